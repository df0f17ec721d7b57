#include "tensor.h"

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

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
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

}  // namespace specula
