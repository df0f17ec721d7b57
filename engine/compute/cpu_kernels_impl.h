// Internals shared by the kernel variants of cpu_kernels.cpp (portable) and
// cpu_kernels_x86.cpp (AVX2, AVX-512): the kernel table, the weight block layouts, and
// the portable per-block tiles that the x86 variants reuse for the K-quants.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "compute/cpu_kernels.h"

namespace specula::kernels {

// Computes y[t * y_stride + r] = row r of w · activation row t, for r in [0, rows) and
// t in [0, n). `w` points at the first row (rows are w_stride bytes apart), `x` at the
// first activation row in the type's activation format (x_stride bytes apart).
using RowsKernel = void (*)(const uint8_t* w, size_t w_stride, int64_t rows, int64_t cols,
                            const uint8_t* x, size_t x_stride, int n, float* y,
                            int64_t y_stride);

struct KernelTable {
  RowsKernel f32, f16, bf16, q8_0, q4_0, q4_k, q6_k;
};

const KernelTable& portable_kernels();
const KernelTable& avx2_kernels();
const KernelTable& avx512_kernels();

// Tokens processed side by side against one loaded weight block.
constexpr int kMaxTile = 8;

// GGML's block layouts.
struct BlockQ8_0 {
  uint16_t d;     // f16 scale
  int8_t q[32];
};
struct BlockQ4_0 {
  uint16_t d;       // f16 scale
  uint8_t q[16];    // value j in the low nibble of q[j], value j + 16 in the high nibble; minus 8
};
struct BlockQ4_K {
  uint16_t d;           // f16 scale of the sub-block scales
  uint16_t dmin;        // f16 scale of the sub-block minimums
  uint8_t scales[12];   // 8 six-bit scales and 8 six-bit minimums, packed
  uint8_t q[128];       // 256 nibbles: 64-value groups, low nibbles first then high
};
struct BlockQ6_K {
  uint8_t ql[128];   // low 4 bits
  uint8_t qh[64];    // high 2 bits
  int8_t scales[16]; // one per 16 values
  uint16_t d;        // f16 super-block scale
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ6_K) == 210);

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else {  // zero or subnormal: mantissa * 2^-24 is exact in float
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    std::memcpy(&bits, &magnitude, 4);
    bits |= sign;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Unpacks a Q4_K block's eight (scale, minimum) pairs, as GGML's get_scale_min_k4.
inline void q4_k_scales(const uint8_t* s, uint8_t* scale, uint8_t* minimum) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scale[j] = s[j] & 63;
      minimum[j] = s[j + 4] & 63;
    } else {
      scale[j] = static_cast<uint8_t>((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
      minimum[j] = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
  }
}

// Sum of a[i] * b[i] over n int8 values; written so compilers vectorize it.
inline __attribute__((always_inline)) int32_t dot_i8(const int8_t* a, const int8_t* b, int n) {
  int32_t sum = 0;
  for (int i = 0; i < n; ++i) sum += static_cast<int32_t>(a[i]) * static_cast<int32_t>(b[i]);
  return sum;
}

// Q4_K weights · q8_K activations for T tokens. Per block and token: the integer sums
// of each 32-value sub-block times its scale, minus the minimums times the activation
// sums, then one float update of the token's accumulator.
template <int T>
inline __attribute__((always_inline)) void q4_k_tile(const uint8_t* w, const uint8_t* x,
                                                     size_t x_stride, int64_t cols, float* out) {
  const auto* wb = reinterpret_cast<const BlockQ4_K*>(w);
  float acc[T] = {};
  int8_t values[256];
  for (int64_t b = 0; b < cols / 256; ++b) {
    const BlockQ4_K& block = wb[b];
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        values[64 * g + l] = static_cast<int8_t>(block.q[32 * g + l] & 0xF);
        values[64 * g + 32 + l] = static_cast<int8_t>(block.q[32 * g + l] >> 4);
      }
    }
    uint8_t scale[8], minimum[8];
    q4_k_scales(block.scales, scale, minimum);
    const float d = half_to_float(block.d);
    const float dmin = half_to_float(block.dmin);
    for (int t = 0; t < T; ++t) {
      const BlockQ8K& a = reinterpret_cast<const BlockQ8K*>(x + t * x_stride)[b];
      int32_t sum_main = 0, sum_min = 0;
      for (int j = 0; j < 8; ++j) {
        sum_main += scale[j] * dot_i8(values + 32 * j, a.q + 32 * j, 32);
        sum_min += minimum[j] * (a.sums[2 * j] + a.sums[2 * j + 1]);
      }
      acc[t] += a.d * (d * static_cast<float>(sum_main) - dmin * static_cast<float>(sum_min));
    }
  }
  for (int t = 0; t < T; ++t) out[t] = acc[t];
}

// Q6_K weights · q8_K activations for T tokens: integer sums of each 16-value
// sub-block times its signed scale, then one float update per block and token.
template <int T>
inline __attribute__((always_inline)) void q6_k_tile(const uint8_t* w, const uint8_t* x,
                                                     size_t x_stride, int64_t cols, float* out) {
  const auto* wb = reinterpret_cast<const BlockQ6_K*>(w);
  float acc[T] = {};
  int8_t values[256];
  for (int64_t b = 0; b < cols / 256; ++b) {
    const BlockQ6_K& block = wb[b];
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = block.ql + 64 * half;
      const uint8_t* qh = block.qh + 32 * half;
      int8_t* v = values + 128 * half;
      for (int l = 0; l < 32; ++l) {
        v[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
        v[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
        v[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        v[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
    }
    const float d = half_to_float(block.d);
    for (int t = 0; t < T; ++t) {
      const BlockQ8K& a = reinterpret_cast<const BlockQ8K*>(x + t * x_stride)[b];
      int32_t sum = 0;
      for (int j = 0; j < 16; ++j) sum += block.scales[j] * dot_i8(values + 16 * j, a.q + 16 * j, 16);
      acc[t] += (d * a.d) * static_cast<float>(sum);
    }
  }
  for (int t = 0; t < T; ++t) out[t] = acc[t];
}

}  // namespace specula::kernels

// Defines `name` as a RowsKernel running `tile<T>` over each weight row for tokens in
// tiles of kMaxTile, then tiles of 4, 2 and 1 for the rest; `attributes` selects the
// instruction set. Tiles only differ in how many tokens share a loaded weight block.
#define SPECULA_ROWS_KERNEL(attributes, name, tile)                                           \
  attributes void name(const uint8_t* w, size_t w_stride, int64_t rows, int64_t cols,         \
                       const uint8_t* x, size_t x_stride, int n, float* y, int64_t y_stride) { \
    static_assert(kMaxTile == 8);                                                            \
    float out[kMaxTile];                                                                     \
    for (int64_t r = 0; r < rows; ++r) {                                                     \
      const uint8_t* wr = w + static_cast<size_t>(r) * w_stride;                             \
      for (int t = 0; t < n;) {                                                              \
        const int rest = n - t;                                                              \
        const int count = rest >= 8 ? 8 : rest >= 4 ? 4 : rest >= 2 ? 2 : 1;                 \
        const uint8_t* xt = x + t * x_stride;                                                \
        if (count == 8) tile<8>(wr, xt, x_stride, cols, out);                                \
        if (count == 4) tile<4>(wr, xt, x_stride, cols, out);                                \
        if (count == 2) tile<2>(wr, xt, x_stride, cols, out);                                \
        if (count == 1) tile<1>(wr, xt, x_stride, cols, out);                                \
        for (int i = 0; i < count; ++i) y[(t + i) * y_stride + r] = out[i];                  \
        t += count;                                                                          \
      }                                                                                      \
    }                                                                                        \
  }
