// Tensor element types and read-only views of weight matrices.
//
// A weight matrix is stored row-major as in GGUF: `cols` (GGUF's ne0) contiguous
// elements per row, `rows` rows (the product of the outer dimensions). Quantized
// types pack each row in blocks of `block_elements` values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace specula {

// Values are GGML's type ids, so GGUF files map onto them directly. Every type GGML
// defines a block layout for is named here, so that a file's header, vocabulary and tensor
// table read whatever its weights hold; which of them the engine computes with is
// is_supported_type's answer.
enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
};

struct TypeTraits {
  std::string_view name;   // as llama.cpp prints it: "f32", "q8_0", ...
  int64_t block_elements;  // values per block (1 for float types)
  int64_t block_bytes;     // bytes per block
  bool supported;          // dequantize_row decodes it and a model's weights may have it
};

const TypeTraits& type_traits(TensorType type);
// Whether the engine computes with weights of this type: dequantize_row decodes it, and the
// loader either hands it to the CPU kernels as it is or converts it exactly at load into a
// type they read (docs/model_files.md lists which).
inline bool is_supported_type(TensorType type) { return type_traits(type).supported; }
// The supported types' names, "f32, f16, bf16, q8_0, ...", for messages.
const std::string& supported_type_names();
// F32, F16 and BF16: one value per block, no scales.
inline bool is_float_type(TensorType type) {
  return type == TensorType::F32 || type == TensorType::F16 || type == TensorType::BF16;
}
// Any type GGML defines a layout for (supported or not); nullopt for ids it does not define.
std::optional<TensorType> tensor_type_from_ggml(uint32_t ggml_type);
std::optional<TensorType> tensor_type_from_name(std::string_view name);

// Bytes taken by `n` values of `type`; `n` must be a multiple of the block size.
size_t row_bytes(TensorType type, int64_t n);

struct TensorView {
  TensorType type = TensorType::F32;
  int64_t cols = 0;             // elements per row (ne0)
  int64_t rows = 0;             // number of rows (ne1 * ne2 * ...)
  // rows * row_bytes(type, cols) bytes; null in an empty view, and in the views of a model
  // read for its headers alone (LoadOptions::metadata_only), which have a shape and no data
  const void* data = nullptr;

  bool empty() const { return data == nullptr && cols == 0; }  // no tensor at all
  size_t row_size() const { return row_bytes(type, cols); }
  size_t bytes() const { return row_size() * static_cast<size_t>(rows); }
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_size();
  }
};

// Decodes `n` consecutive values (whole blocks) of a row into floats, as GGML's
// dequantize_row_* does (every value is computed in float with at most one rounding, so the
// result is the same bits with or without fused multiply-adds). Throws std::invalid_argument
// for a type that is not supported.
void dequantize_row(TensorType type, const void* src, float* dst, int64_t n);
// Encodes `n` floats (whole blocks) into `type`, rounding as llama.cpp's reference
// quantizers do. Only F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 are written; the other
// types are read-only here: quantizing to them throws std::invalid_argument.
void quantize_row(TensorType type, const float* src, void* dst, int64_t n);

// Re-encodes `n` values (whole blocks) of Q5_0 into Q8_0 (the type a device computes it in:
// device_tiled_type) with every value unchanged: dequantize_row gives the same floats from
// `dst` as from `src`. Returns true; throws std::invalid_argument for another type.
bool convert_row_exact(TensorType type, const void* src, void* dst, int64_t n);

// Sub-block j (0..7) of a Q4_K block: its 6-bit scale and minimum, from the block's 12
// packed scale bytes.
void q4_k_scale_min(int j, const uint8_t* scales, uint8_t* scale, uint8_t* min);

// GGML's kvalues_iq4nl: the 16 levels IQ4_NL and IQ4_XS nibbles index.
inline constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// GGML's kvalues_mxfp4: the E2M1 values doubled (GGML scales them by half the block scale).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Q3_K's sixteen 6-bit sub-block scales (stored plus 32) from its 12 packed bytes.
void q3_k_scales(const uint8_t* packed, int8_t* scales);
// Half an MXFP4 block's scale, 2^(e - 128) for its E8M0 exponent byte e (the FP4 code
// values are kept doubled, as GGML keeps them).
float mxfp4_half_scale(uint8_t e);

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

}  // namespace specula
