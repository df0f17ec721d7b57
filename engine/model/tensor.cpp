#include "model/tensor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace specula {

namespace {

constexpr TypeTraits kF32{"f32", 1, 4};
constexpr TypeTraits kF16{"f16", 1, 2};
constexpr TypeTraits kBF16{"bf16", 1, 2};
constexpr TypeTraits kQ8_0{"q8_0", 32, 34};    // f16 scale + 32 int8
constexpr TypeTraits kQ4_0{"q4_0", 32, 18};    // f16 scale + 16 bytes of nibbles
constexpr TypeTraits kQ4_K{"q4_K", 256, 144};  // f16 d, dmin + 12 bytes scales + 128 bytes nibbles
constexpr TypeTraits kQ6_K{"q6_K", 256, 210};  // 128 ql + 64 qh + 16 scales + f16 d

}  // namespace

// The first four live in the low 6 bits of bytes 0..3 (scales) and 4..7 (minimums); the
// last four take their low 4 bits from bytes 8..11 and their top 2 bits from the spare top
// bits of bytes 0..7.
void q4_k_scale_min(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

const TypeTraits& type_traits(TensorType type) {
  switch (type) {
    case TensorType::F32: return kF32;
    case TensorType::F16: return kF16;
    case TensorType::BF16: return kBF16;
    case TensorType::Q8_0: return kQ8_0;
    case TensorType::Q4_0: return kQ4_0;
    case TensorType::Q4_K: return kQ4_K;
    case TensorType::Q6_K: return kQ6_K;
  }
  throw std::invalid_argument("unknown tensor type " + std::to_string(static_cast<uint32_t>(type)));
}

std::optional<TensorType> tensor_type_from_ggml(uint32_t ggml_type) {
  for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0,
                       TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K}) {
    if (static_cast<uint32_t>(t) == ggml_type) return t;
  }
  return std::nullopt;
}

std::optional<TensorType> tensor_type_from_name(std::string_view name) {
  for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0,
                       TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K}) {
    if (type_traits(t).name == name) return t;
  }
  return std::nullopt;
}

size_t row_bytes(TensorType type, int64_t n) {
  const TypeTraits& t = type_traits(type);
  if (n % t.block_elements != 0) {
    throw std::invalid_argument("row of " + std::to_string(n) + " values is not a whole number of " +
                                std::string(t.name) + " blocks");
  }
  return static_cast<size_t>(n / t.block_elements * t.block_bytes);
}

// Branch-free, so row loops vectorize (the method of Maratyszcza's FP16 library, as ggml
// uses): move the half's exponent and mantissa into float position and rescale by 2^-112,
// which is exact for normals, infinities and NaNs; subnormals come out of a float whose
// mantissa holds them, minus the implicit 0.5.
float fp16_to_fp32(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;  // exponent and mantissa, sign shifted out
  const float normalized = std::bit_cast<float>((two_w >> 4) + (0xE0u << 23)) * 0x1p-112f;
  const float denormalized = std::bit_cast<float>((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t magnitude = two_w < (1u << 27) ? std::bit_cast<uint32_t>(denormalized)
                                                 : std::bit_cast<uint32_t>(normalized);
  return std::bit_cast<float>(sign | magnitude);
}

uint16_t fp32_to_fp16(float f) {
  // round to nearest even, as the hardware conversion does
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (abs < 0x38800000u) {  // subnormal or zero in fp16
    const float magnitude = std::bit_cast<float>(abs);
    const uint32_t half = static_cast<uint32_t>(std::nearbyint(magnitude * 16777216.0f));  // 2^24
    return static_cast<uint16_t>(sign | half);
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

namespace {

// Block layouts, byte for byte as ggml defines them (ggml-common.h).
struct BlockQ8_0 {
  uint16_t d;       // f16 scale
  int8_t qs[32];    // value = qs[i] * d
};
struct BlockQ4_0 {
  uint16_t d;       // f16 scale
  uint8_t qs[16];   // element i in the low nibble of qs[i], element 16+i in the high nibble; value = (q - 8) * d
};
struct BlockQ4_K {
  uint16_t d;           // f16 scale of the 6-bit sub-block scales
  uint16_t dmin;        // f16 scale of the 6-bit sub-block minimums
  uint8_t scales[12];   // 8 scales and 8 minimums of 6 bits, packed (see q4_k_scale_min)
  uint8_t qs[128];      // 4-bit quants: 64-value chunks, low nibbles first then high nibbles
};
struct BlockQ6_K {
  uint8_t ql[128];      // low 4 bits of the quants
  uint8_t qh[64];       // high 2 bits of the quants
  int8_t scales[16];    // 8-bit scale of each 16-value sub-block
  uint16_t d;           // f16 super-block scale
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ6_K) == 210);

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < 32; j++) *y++ = x[i].qs[j] * d;
  }
}

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++, y += 32) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < 16; j++) {
      y[j] = ((x[i].qs[j] & 0x0F) - 8) * d;
      y[j + 16] = ((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++) {
    const float d = fp16_to_fp32(x[i].d);
    const float dmin = fp16_to_fp32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    for (int j = 0; j < 8; j += 2, q += 32) {  // 64 values: 32 low nibbles, then 32 high
      uint8_t sc, m;
      q4_k_scale_min(j, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      q4_k_scale_min(j + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++) {
    const float d = fp16_to_fp32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; l++) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

// quantize_row_q8_0_ref: scale = amax / 127, values rounded half away from zero.
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 32; j++) y[i].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

// quantize_row_q4_0_ref: the value of largest magnitude maps to -8 exactly, so the
// scale carries its sign and the full range [-8, 7] is used.
void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++, x += 32) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 16; j++) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

int64_t whole_blocks(TensorType type, int64_t n) {
  const TypeTraits& t = type_traits(type);
  if (n < 0 || n % t.block_elements != 0) {
    throw std::invalid_argument(std::to_string(n) + " values are not a whole number of " +
                                std::string(t.name) + " blocks");
  }
  return n / t.block_elements;
}

}  // namespace

void dequantize_row(TensorType type, const void* src, float* dst, int64_t n) {
  const int64_t blocks = whole_blocks(type, n);
  if (n == 0) return;  // empty rows may come with null pointers
  switch (type) {
    case TensorType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case TensorType::F16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; i++) dst[i] = fp16_to_fp32(h[i]);
      return;
    }
    case TensorType::BF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_fp32(h[i]);
      return;
    }
    case TensorType::Q8_0: dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, blocks); return;
    case TensorType::Q4_0: dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, blocks); return;
    case TensorType::Q4_K: dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, blocks); return;
    case TensorType::Q6_K: dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, blocks); return;
  }
  throw std::invalid_argument("dequantize_row: unknown tensor type");
}

void quantize_row(TensorType type, const float* src, void* dst, int64_t n) {
  const int64_t blocks = whole_blocks(type, n);
  if (n == 0) return;  // empty rows may come with null pointers
  switch (type) {
    case TensorType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case TensorType::F16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; i++) h[i] = fp32_to_fp16(src[i]);
      return;
    }
    case TensorType::BF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; i++) h[i] = fp32_to_bf16(src[i]);
      return;
    }
    case TensorType::Q8_0: quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), blocks); return;
    case TensorType::Q4_0: quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), blocks); return;
    case TensorType::Q4_K:
    case TensorType::Q6_K:
      throw std::invalid_argument("quantizing to " + std::string(type_traits(type).name) +
                                  " is not supported; use q8_0 or q4_0");
  }
  throw std::invalid_argument("quantize_row: unknown tensor type");
}

}  // namespace specula
