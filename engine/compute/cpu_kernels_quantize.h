// Activation quantization to q8_0 / q8_K blocks, as llama.cpp's.
// Part of the kernel algorithms written once over a vector layer V (cpu_kernel_templates.h
// says how they are compiled per SIMD level); in an unnamed namespace like all of them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "compute/cpu_kernel_table.h"

namespace specula::kernels {
namespace {

// ---- activation quantization -----------------------------------------------------------
//
// q = nearbyint(x · (127 / amax)) as llama.cpp's q8_0 / q8_K: the vector multiply and
// round-to-nearest-even give the same bits on every level.

template <class V>
float quantize_block(const float* x, int n, int8_t* q) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  F amax = V::fzero();
  for (int i = 0; i < n; i += L) amax = V::fmax(amax, V::fabs(V::fload(x + i)));
  const float d = V::hmax(amax) / 127.0f;
  const F id = V::fset1(d != 0.0f ? 1.0f / d : 0.0f);
  for (int i = 0; i < n; i += L) V::store_i8(q + i, V::cvt_f2i(V::fround(V::fmul(V::fload(x + i), id))));
  return d;
}

inline int block_sum(const int8_t* q, int n) {
  int sum = 0;
  for (int i = 0; i < n; ++i) sum += q[i];
  return sum;
}

template <class V>
void quantize_q8(const float* x, uint8_t* out, int64_t n, int32_t bias) {
  auto* values = reinterpret_cast<int8_t*>(out);
  auto* scales = reinterpret_cast<float*>(out + n);
  auto* offsets = reinterpret_cast<int32_t*>(out + n + n / 32 * 4);
  for (int64_t b = 0; b < n / 32; ++b) {
    int8_t* q = values + 32 * b;
    scales[b] = quantize_block<V>(x + 32 * b, 32, q);
    offsets[b] = -bias * block_sum(q, 32);
  }
}

template <class V>
void quantize_q8k(const float* x, BlockQ8K* out, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b) {
    BlockQ8K& block = out[b];
    block.d = quantize_block<V>(x + 256 * b, 256, block.q);
    for (int j = 0; j < 16; ++j) block.sums16[j] = static_cast<int16_t>(block_sum(block.q + 16 * j, 16));
    for (int j = 0; j < 8; ++j) {
      block.sums32[j] = static_cast<int16_t>(block.sums16[2 * j] + block.sums16[2 * j + 1]);
    }
  }
}

}  // namespace
}  // namespace specula::kernels
