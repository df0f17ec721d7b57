// Random GGUF rows of any quantized type for the layout and product checks: every code and
// scale bit pattern, with finite fp16 scales of either sign and a moderate size.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "model/tensor.h"

namespace specula::test {

// Random GGUF rows of `type`: random codes and scale bits, finite scales of either sign.
inline std::vector<uint8_t> random_rows(TensorType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> data(row_bytes(type, cols) * static_cast<size_t>(rows));
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> magnitude(1e-3f, 0.2f);
  const auto scale = [&](uint8_t* at) {
    const float v = magnitude(rng) * (rng() % 2 ? 1.0f : -1.0f);
    const uint16_t h = fp32_to_fp16(v);
    std::memcpy(at, &h, 2);
  };
  const TypeTraits& t = type_traits(type);
  for (size_t b = 0; b < data.size() / static_cast<size_t>(t.block_bytes); ++b) {
    uint8_t* block = data.data() + b * static_cast<size_t>(t.block_bytes);
    switch (type) {
      case TensorType::Q8_0:
      case TensorType::Q4_0:
      case TensorType::Q5_0: scale(block); break;
      case TensorType::Q4_1:
      case TensorType::Q5_1:
      case TensorType::Q4_K:
      case TensorType::Q5_K: scale(block), scale(block + 2); break;  // d and m, or d and dmin
      case TensorType::Q2_K: scale(block + 80), scale(block + 82); break;
      case TensorType::Q3_K: scale(block + 108); break;
      case TensorType::Q6_K: scale(block + 208); break;
      case TensorType::IQ4_XS: scale(block); break;
      default: break;
    }
  }
  return data;
}

}  // namespace specula::test
