// Float weights (F32, F16, BF16): panels of a few rows, chunks of one vector.
// Part of the kernel algorithms written once over a vector layer V (cpu_kernel_templates.h
// says how they are compiled per SIMD level); in an unnamed namespace like all of them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "compute/cpu_kernel_table.h"
#include "compute/cpu_kernel_tiles.h"

namespace specula::kernels {
namespace {

// ---- float weights: panels of a few rows, chunks of one vector ---------------------------
//
// A panel holds kFloatPanelRows rows (zero rows past the matrix's end) in chunks of L
// consecutive values: chunk c of each row in turn, then chunk c + 1 of each, the last chunk
// zero-padded. A tile of the panel's rows thus reads one contiguous stream: as rows side by
// side (4 streams 4 KiB long each for a 2048-column row) a Zen 4 core read F16 weights at
// 16-18 GB/s, where it reads this layout, or one row at a time, at 25-28 GB/s. The panel is
// the tile's rows: 4 on AVX-512 (by up to 6 tokens: 24 accumulators, 4 weight vectors and an
// activation in its 32 registers, each F16 weight vector converted once for 6 multiply-adds,
// 16 tokens 53 -> 62 % of peak on Zen 5; 3 × 8 halved it), 3 on AVX2 (by up to 4 tokens:
// 12 accumulators in its 16 registers).
//
// Accumulator (r, t) is a vector whose lane i sums columns i, i + L, ... with fused
// multiply-adds in column order; the last chunk meets a zero-padded copy of the activations'
// tail; one fixed tree (V::hsum) gives the result. R rows × T tokens run side by side: each
// weight vector is loaded once for T tokens, each activation vector once for R rows.

struct F32Load {
  static constexpr int kBytes = 4;
  template <class V>
  static typename V::F load(const uint8_t* p) {
    return V::fload(reinterpret_cast<const float*>(p));
  }
};
struct F16Load {
  static constexpr int kBytes = 2;
  template <class V>
  static typename V::F load(const uint8_t* p) {
    return V::fload_f16(reinterpret_cast<const uint16_t*>(p));
  }
};
struct BF16Load {
  static constexpr int kBytes = 2;
  template <class V>
  static typename V::F load(const uint8_t* p) {
    return V::fload_bf16(reinterpret_cast<const uint16_t*>(p));
  }
};

template <class V>
constexpr int kFloatPanelRows = V::kRegisters >= 32 ? 4 : 3;
template <class V>
constexpr int kFloatTokens = V::kRegisters >= 32 ? 6 : 4;

// The first R rows of a float panel (R <= kFloatPanelRows) against T tokens.
template <class V, class Load, int R, int T, bool kPrefetch>
inline void float_tile(const uint8_t* panel, int64_t cols, const float* x, size_t x_stride,
                       float* y, int64_t y_stride) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  constexpr size_t kChunk = L * Load::kBytes;                  // one row's chunk
  constexpr size_t kGroup = kFloatPanelRows<V> * kChunk;       // every row's chunk
  F acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = V::fzero();
  }
  // inlined, or the accumulators live in memory (GCC 12 made it a call: 8 tokens 1.7x slower)
  const auto step = [&](const uint8_t* group, const float* const* xt, int64_t c)
                        __attribute__((always_inline)) {
    if constexpr (kPrefetch) prefetch_ahead<4096>(group, kGroup);
    F wv[R];
    for (int r = 0; r < R; ++r) wv[r] = Load::template load<V>(group + r * kChunk);
    for (int t = 0; t < T; ++t) {
      const F xv = V::fload(xt[t] + c);
      for (int r = 0; r < R; ++r) acc[r][t] = V::fma(wv[r], xv, acc[r][t]);
    }
  };
  const float* xt[T];
  for (int t = 0; t < T; ++t) xt[t] = x + t * x_stride;
  const int64_t full = cols / L * L;
  for (int64_t c = 0; c < full; c += L) step(panel + c / L * kGroup, xt, c);
  if (full < cols) {
    alignas(64) float x_tail[T][L] = {};
    const float* xp[T];
    for (int t = 0; t < T; ++t) {
      std::memcpy(x_tail[t], xt[t] + full, static_cast<size_t>(cols - full) * sizeof(float));
      xp[t] = x_tail[t];
    }
    step(panel + full / L * kGroup, xp, 0);
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) y[t * y_stride + r] = V::hsum(acc[r][t]);
  }
}

// Panels [begin, end) against every token; the last panel's rows past the matrix's end are
// left out.
template <class V, class Load>
void float_rows(const PackedMatrix& w, int64_t begin, int64_t end, const uint8_t* xb,
                size_t x_stride, int n, float* y) {
  constexpr int P = kFloatPanelRows<V>;
  const auto* x = reinterpret_cast<const float*>(xb);
  const size_t xs = x_stride / sizeof(float);
  const auto rows = [&]<int R>(int64_t p) {
    each_token_tile<kFloatTokens<V>>(n, [&]<int T>(int t) {
      const uint8_t* panel = w.data() + p * w.panel_bytes;
      float* out = y + t * w.rows + p * P;
      if (T == 1 && !w.one_token_prefetch) {
        float_tile<V, Load, R, 1, false>(panel, w.cols, x + t * xs, xs, out, w.rows);
      } else {
        float_tile<V, Load, R, T, true>(panel, w.cols, x + t * xs, xs, out, w.rows);
      }
    });
  };
  for (int64_t p = begin; p < end; ++p) {
    const int64_t valid = std::min<int64_t>(P, w.rows - p * P);
    if (valid == P) {
      rows.template operator()<P>(p);
    } else if (valid == 1) {
      rows.template operator()<1>(p);
    } else if (valid == 2) {
      rows.template operator()<2>(p);
    } else {
      rows.template operator()<3>(p);
    }
  }
}

}  // namespace
}  // namespace specula::kernels
