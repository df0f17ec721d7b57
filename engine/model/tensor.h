// Tensor element types and read-only views of weight matrices.
//
// A weight matrix is stored row-major as in GGUF: `cols` (GGUF's ne0) contiguous
// elements per row, `rows` rows (the product of the outer dimensions). Quantized
// types pack each row in blocks of `block_elements` values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace specula {

// Values are GGML's type ids, so GGUF files map onto them directly.
enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 8,
  Q4_K = 12,
  Q6_K = 14,
  BF16 = 30,
};

struct TypeTraits {
  std::string_view name;   // as llama.cpp prints it: "f32", "q8_0", ...
  int64_t block_elements;  // values per block (1 for float types)
  int64_t block_bytes;     // bytes per block
};

const TypeTraits& type_traits(TensorType type);
// F32, F16 and BF16: one value per block, no scales.
inline bool is_float_type(TensorType type) {
  return type == TensorType::F32 || type == TensorType::F16 || type == TensorType::BF16;
}
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

// Decodes `n` consecutive values (whole blocks) of a row into floats.
void dequantize_row(TensorType type, const void* src, float* dst, int64_t n);
// Encodes `n` floats (whole blocks) into `type`, rounding as llama.cpp's reference
// quantizers do. Q4_K and Q6_K are read-only here: quantizing to them throws
// std::invalid_argument.
void quantize_row(TensorType type, const float* src, void* dst, int64_t n);

// Sub-block j (0..7) of a Q4_K block: its 6-bit scale and minimum, from the block's 12
// packed scale bytes.
void q4_k_scale_min(int j, const uint8_t* scales, uint8_t* scale, uint8_t* min);

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

}  // namespace specula
