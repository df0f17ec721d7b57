// The kernel algorithms, written once over a thin vector layer V and compiled by each SIMD
// level's translation unit with its own V (cpu_vec_portable.h, cpu_vec_avx2.h,
// cpu_vec_avx512.h) under its own target options. Everything here is in an unnamed
// namespace: each translation unit gets its own copy, so code compiled for AVX-512 can
// never be merged with, or called in place of, its baseline twin.
//
// V provides kLanes (8 or 16 lanes of 32 bits), kRegisters (16 or 32 vector registers),
// kVnni (whether dpbusd is the fast product), float vectors F, integer vectors I and
// primitives named after the instruction each maps to. Rows of a repacked panel sit in
// the lanes; every per-lane operation is independent of the lane count, so the 16-lane
// algorithms can run (and be tested) on pairs of AVX2 registers.
//
// Batch invariance: an output element is one accumulator, updated by the same sequence of
// operations in every tile shape (rows × tokens) and every split; integer sums inside a
// block are exact, so the order in which the products of a block are added is free.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "compute/cpu_kernel_table.h"

namespace specula::kernels {
namespace {

// Calls tile.template operator()<T>(t) for tiles of `Max`, then one smaller tile, covering
// tokens 0..n-1.
template <int T, class Tile>
inline void run_token_tile(int count, int t, Tile& tile) {
  if constexpr (T > 1) {
    if (count < T) return run_token_tile<T - 1>(count, t, tile);
  }
  tile.template operator()<T>(t);
}
template <int Max, class Tile>
inline void each_token_tile(int n, Tile&& tile) {
  for (int t = 0; t < n;) {
    const int count = std::min(n - t, Max);
    run_token_tile<Max>(count, t, tile);
    t += count;
  }
}

// Software prefetch of the weight stream, kAhead bytes ahead of the block a tile is reading
// (panels lie one after another, so that runs on into the next panel): the hardware
// prefetchers alone keep too few lines in flight for the cores to read at the memory's rate,
// in one-token decoding and, more still, in tiles of a few tokens, whose arithmetic spaces
// the loads out. The distances come from alternated runs of the 1.1B files at 4 and 8 KiB:
// 4 KiB for the 32-value blocks and the float panels, 8 KiB for the K-quants' 256-value ones
// and for Q8_0's tiles of several tokens
// (docs/cpu_backend.md). The lines go to the L2 cache (prefetcht2), not the L1: a prefetch
// into the L1 holds one of the core's few L1 miss buffers until its line arrives, which
// capped a Zen 4 core's tiles of 4 and 8 tokens near 12 GB/s; into the L2, 4 to 8 tokens ran
// 1.15x to 1.6x as fast on every type (F16 4 tokens 40 -> 67 tok/s, Q4_K_M 8 tokens 126 ->
// 204), one token as before. A tile of one token prefetches only where that is faster
// (PackedMatrix::one_token_prefetch: on AMD's cores the hardware prefetchers alone stream the
// 32-value blocks and float chunks faster, cpu_kernels.cpp). Prefetches never fault, past the
// matrix's end included.
template <size_t kAhead>
inline void prefetch_ahead(const uint8_t* block, size_t bytes) {
  for (size_t line = 0; line < bytes; line += 64) __builtin_prefetch(block + kAhead + line, 0, 1);
}

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

// ---- quantized weights: repacked panels, rows in lanes ---------------------------------
//
// Each integer vector of a panel holds 4 consecutive values of each of its P rows (row r in
// bytes 4r..4r+3); the matching 4 activation bytes are broadcast to every lane. An
// unsigned-by-signed product of the two (maddubs into 16 bits, then madd into 32; or VNNI's
// dpbusd) gives every row's partial dot at once. A block's integer sums are exact, then
// acc[t] (lane r) += float(sum) · (row scale · token scale): one update per block.

// pshufb patterns: the low (high) 16-bit half of each 32-bit lane, copied to both halves.
alignas(64) constexpr uint8_t kDupLow[64] = {
    0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5, 4, 5,
    8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13,
    0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13};
alignas(64) constexpr uint8_t kDupHigh[64] = {
    2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15, 2, 3, 2, 3, 6, 7, 6, 7,
    10, 11, 10, 11, 14, 15, 14, 15, 2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15,
    2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15};

// Tokens per tile: what the vector registers hold with the weights of one step.
template <class V>
constexpr int kQuantTokens = V::kRegisters >= 32 ? 8 : 4;

// Q4_0: weights as unsigned nibbles (w + 8); the activation offsets subtract 8 · Σq.
// Activation rows are reached through one pointer per token (the scales and offsets at fixed
// distances from it, q8_row's layout): three pointers per token would not fit the general
// registers at 8 tokens, and the spills cost more than the products. On VNNI levels the
// tokens' products are interleaved per weight vector, each token's sum a chain of 8.
template <class V>
struct Q4_0Panel {
  static constexpr int kBias = 8;
  static constexpr int kMaxTokens = kQuantTokens<V>;

  template <int T, bool kPrefetch>
  static void tile(const uint8_t* panel, int64_t cols, const uint8_t* x, size_t x_stride,
                   float* out) {
    using F = typename V::F;
    using I = typename V::I;
    constexpr int P = V::kLanes;
    const uint8_t* row[T];
    F acc[T];
    for (int t = 0; t < T; ++t) row[t] = x + t * x_stride, acc[t] = V::fzero();
    const Q8Row layout = q8_row(x, cols);  // its distances from a row's start hold in every row
    const auto scales_at = reinterpret_cast<const uint8_t*>(layout.scales) - x;
    const auto offsets_at = reinterpret_cast<const uint8_t*>(layout.offsets) - x;
    const I low = V::set8(0x0F);
    for (int64_t b = 0; b < cols / 32; ++b) {
      const uint8_t* block = panel + b * q4_0_panel_block(P);
      if constexpr (kPrefetch) prefetch_ahead<4096>(block, q4_0_panel_block(P));
      I w[8];  // w[c]: values 4c..4c+3 of every row (low nibbles, then high)
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        const I raw = V::iload(block + 2 * P + v * 4 * P);
        w[v] = V::and_(raw, low);
        w[v + 4] = V::and_(V::template srl16<4>(raw), low);
      }
      const F d = V::fload_f16(reinterpret_cast<const uint16_t*>(block));
      const auto update = [&](int t, I sum) {
        float scale;
        std::memcpy(&scale, row[t] + scales_at + 4 * b, 4);
        acc[t] = V::fma(V::cvt(sum), V::fmul(d, V::fset1(scale)), acc[t]);
      };
      if constexpr (V::kVnni) {
        I sum[T];
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) sum[t] = V::bcast32(row[t] + offsets_at + 4 * b);
#pragma GCC unroll 8
        for (int c = 0; c < 8; ++c) {
#pragma GCC unroll 16
          for (int t = 0; t < T; ++t) sum[t] = V::dpbusd(sum[t], w[c], V::bcast32(row[t] + 32 * b + 4 * c));
        }
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) update(t, sum[t]);
      } else {  // 16 registers: each token's sum is used up before the next one's
        for (int t = 0; t < T; ++t) {
          const uint8_t* q = row[t] + 32 * b;
          I pairs = V::maddubs(w[0], V::bcast32(q));
          for (int c = 1; c < 8; ++c) pairs = V::add16(pairs, V::maddubs(w[c], V::bcast32(q + 4 * c)));
          update(t, V::add32(V::madd16(pairs, V::set16(1)), V::bcast32(row[t] + offsets_at + 4 * b)));
        }
      }
    }
    for (int t = 0; t < T; ++t) V::fstore(out + t * P, acc[t]);
  }
};

// Q8_0: VNNI multiplies weights biased to unsigned (w + 128, undone by the offsets);
// otherwise |w| times the activations signed like w (maddubs), which cannot saturate.
//
// IQ4_XS takes this path with f32 scales (kF32): each 32-value sub-block's levels as int8 and
// its scale d · (scale - 32), exact in f32, stored per row at packing.
template <class V, bool kF32 = false>
struct Q8_0Panel {
  static constexpr int kBias = V::kVnni ? 128 : 0;
  static constexpr int kMaxTokens = kQuantTokens<V>;
  static constexpr size_t block_bytes(int P) { return kF32 ? iq4_xs_panel_block(P) / 8 : q8_0_panel_block(P); }
  static constexpr int kScaleBytes = kF32 ? 4 : 2;

  template <int T, bool kPrefetch>
  static void tile(const uint8_t* panel, int64_t cols, const uint8_t* x, size_t x_stride,
                   float* out) {
    using F = typename V::F;
    using I = typename V::I;
    constexpr int P = V::kLanes;
    Q8Row a[T];
    F acc[T];
    for (int t = 0; t < T; ++t) a[t] = q8_row(x + t * x_stride, cols), acc[t] = V::fzero();
    for (int64_t b = 0; b < cols / 32; ++b) {
      const uint8_t* block = panel + b * block_bytes(P);
      // tiles of several tokens spend longer on each block: 8 KiB ahead keeps as many lines
      // in flight (Zen 4, 2 threads, alternated: 4 tokens 42.0 -> 39.8 ms, 8 tokens 45.2 ->
      // 41.5, medians of 6); one token keeps 4 KiB (8 KiB slowed it: 49-52 -> 55-70 ms on
      // one thread)
      if constexpr (kPrefetch) prefetch_ahead<(T == 1 ? 4096 : 8192)>(block, block_bytes(P));
      I sum[T];
      for (int t = 0; t < T; ++t) sum[t] = V::kVnni ? V::bcast32(a[t].offsets + b) : V::izero();
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) {  // values 4c..4c+3
        const I w = V::iload(block + kScaleBytes * P + c * 4 * P);
        if constexpr (V::kVnni) {
          for (int t = 0; t < T; ++t) {
            sum[t] = V::dpbusd(sum[t], w, V::bcast32(a[t].values + 32 * b + 4 * c));
          }
        } else {
          const I abs_w = V::abs8(w);
          for (int t = 0; t < T; ++t) {
            const I xs = V::sign8(V::bcast32(a[t].values + 32 * b + 4 * c), w);
            const I p = V::madd16(V::maddubs(abs_w, xs), V::set16(1));
            sum[t] = V::add32(sum[t], p);
          }
        }
      }
      F d;
      if constexpr (kF32) {
        d = V::fload(reinterpret_cast<const float*>(block));
      } else {
        d = V::fload_f16(reinterpret_cast<const uint16_t*>(block));
      }
      for (int t = 0; t < T; ++t) {
        acc[t] = V::fma(V::cvt(sum[t]), V::fmul(d, V::fset1(a[t].scales[b])), acc[t]);
      }
    }
    for (int t = 0; t < T; ++t) V::fstore(out + t * P, acc[t]);
  }
};

// Q4_1 and Q5_1: value = q · d + m with q unsigned (4 or 5 bits), so per block and token
// acc += Σ(q · qx) · (d · dx) + Σqx · (m · dx): the activation offsets carry Σqx (kBias -1).
// Q4_1 keeps its nibbles (Q4_0's layout); Q5_1's 5-bit values lie one per byte, as Q8_0's,
// and their products (at most 2 · 31 · 127 per pair) are summed four to a 16-bit lane at
// most, then widened, where Q4_1's eight fit (8 · 2 · 15 · 127 < 32767).
//
// Q5_K takes the Q5_1 path with f32 scales (kF32): each 32-value sub-block's d · scale and
// -(dmin · minimum), both exact in f32, stored per row at packing.
template <class V, bool kBytes, bool kF32 = false>
struct AffinePanel {
  static constexpr int kBias = -1;
  static constexpr int kMaxTokens = kQuantTokens<V>;
  static_assert(kBytes || !kF32);

  static constexpr size_t block_bytes(int P) {
    return kF32 ? q5_k_panel_block(P) / 8 : kBytes ? q5_1_panel_block(P) : q4_1_panel_block(P);
  }
  static constexpr int kScaleBytes = kF32 ? 4 : 2;  // of d and of m, per row

  template <int T, bool kPrefetch>
  static void tile(const uint8_t* panel, int64_t cols, const uint8_t* x, size_t x_stride,
                   float* out) {
    using F = typename V::F;
    using I = typename V::I;
    constexpr int P = V::kLanes;
    const uint8_t* row[T];
    F acc[T];
    for (int t = 0; t < T; ++t) row[t] = x + t * x_stride, acc[t] = V::fzero();
    const Q8Row layout = q8_row(x, cols);
    const auto scales_at = reinterpret_cast<const uint8_t*>(layout.scales) - x;
    const auto offsets_at = reinterpret_cast<const uint8_t*>(layout.offsets) - x;
    const I low = V::set8(0x0F);
    for (int64_t b = 0; b < cols / 32; ++b) {
      const uint8_t* block = panel + b * block_bytes(P);
      if constexpr (kPrefetch) prefetch_ahead<4096>(block, block_bytes(P));
      const uint8_t* values = block + 2 * kScaleBytes * P;
      I w[8];  // w[c]: values 4c..4c+3 of every row
      if constexpr (kBytes) {
#pragma GCC unroll 8
        for (int c = 0; c < 8; ++c) w[c] = V::iload(values + c * 4 * P);
      } else {
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          const I raw = V::iload(block + 4 * P + v * 4 * P);
          w[v] = V::and_(raw, low);
          w[v + 4] = V::and_(V::template srl16<4>(raw), low);
        }
      }
      F d, m;
      if constexpr (kF32) {
        d = V::fload(reinterpret_cast<const float*>(block));
        m = V::fload(reinterpret_cast<const float*>(block + 4 * P));
      } else {
        d = V::fload_f16(reinterpret_cast<const uint16_t*>(block));
        m = V::fload_f16(reinterpret_cast<const uint16_t*>(block + 2 * P));
      }
      const auto update = [&](int t, I sum) {
        float scale;
        int32_t qsum;
        std::memcpy(&scale, row[t] + scales_at + 4 * b, 4);
        std::memcpy(&qsum, row[t] + offsets_at + 4 * b, 4);
        const F dx = V::fset1(scale);
        acc[t] = V::fma(V::cvt(sum), V::fmul(d, dx), acc[t]);
        acc[t] = V::fma(V::fset1(static_cast<float>(qsum)), V::fmul(m, dx), acc[t]);
      };
      if constexpr (V::kVnni) {
        I sum[T];
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) sum[t] = V::izero();
#pragma GCC unroll 8
        for (int c = 0; c < 8; ++c) {
#pragma GCC unroll 16
          for (int t = 0; t < T; ++t) sum[t] = V::dpbusd(sum[t], w[c], V::bcast32(row[t] + 32 * b + 4 * c));
        }
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) update(t, sum[t]);
      } else {
        for (int t = 0; t < T; ++t) {
          const uint8_t* q = row[t] + 32 * b;
          if constexpr (kBytes) {
            I half[2];
            for (int h = 0; h < 2; ++h) {
              half[h] = V::maddubs(w[4 * h], V::bcast32(q + 16 * h));
              for (int c = 1; c < 4; ++c) {
                half[h] = V::add16(half[h], V::maddubs(w[4 * h + c], V::bcast32(q + 16 * h + 4 * c)));
              }
            }
            update(t, V::add32(V::madd16(half[0], V::set16(1)), V::madd16(half[1], V::set16(1))));
          } else {
            I pairs = V::maddubs(w[0], V::bcast32(q));
            for (int c = 1; c < 8; ++c) pairs = V::add16(pairs, V::maddubs(w[c], V::bcast32(q + 4 * c)));
            update(t, V::madd16(pairs, V::set16(1)));
          }
        }
      }
    }
    for (int t = 0; t < T; ++t) V::fstore(out + t * P, acc[t]);
  }
};

// Q4_K: per 32-value sub-block, nibbles · activations summed in 16 bits (at most 8 · 3810),
// times the sub-block scale with madd into 32 bits; with VNNI the sub-block's sum goes
// straight into 32 bits (dpbusd) and is multiplied by its scale: the same integer in 10
// instructions per token where maddubs takes 17. The minimums meet the activations'
// 32-value sums with madd. Then acc += main · (d · dx) + mins · (-dmin · dx).
// The 16-bit sums are chains of saturating adds, which never saturate (8 · 3810 < 32767):
// plain adds GCC 12 reassociated into trees that compute all of a sub-block's products
// first, and AVX2's 16 registers spilled them. With the chains, and the sub-block's
// nibble half a template argument rather than a choice made at run time, the AVX2 tile
// of 16 rows ran 1.2x-1.7x as fast in cache on a Zen 4 core (2 tokens 60 -> 87 G
// multiply-adds/s, 3 tokens 56 -> 94, 8 tokens 82 -> 97) and whole forwards of the 1.1B
// Q4_K_M file 1.1x-1.3x (docs/performance.md). The VNNI levels keep one loop over the 8
// sub-blocks: unrolled by two like AVX2's, their forwards of 3-4 tokens read 0.97x.
template <class V>
struct Q4_KPanel {
  static constexpr int kMaxTokens = kQuantTokens<V>;

  template <int T, bool kPrefetch>
  static void tile(const uint8_t* panel, int64_t cols, const uint8_t* x, size_t x_stride,
                   float* out) {
    using F = typename V::F;
    using I = typename V::I;
    constexpr int P = V::kLanes;
    const BlockQ8K* a[T];
    F acc[T];
    for (int t = 0; t < T; ++t) {
      a[t] = reinterpret_cast<const BlockQ8K*>(x + t * x_stride);
      acc[t] = V::fzero();
    }
    const I low = V::set8(0x0F);
    const I dup_low = V::iload(kDupLow), dup_high = V::iload(kDupHigh);
    for (int64_t b = 0; b < cols / 256; ++b) {
      const uint8_t* block = panel + b * q4_k_panel_block(P);
      if constexpr (kPrefetch) prefetch_ahead<8192>(block, q4_k_panel_block(P));
      const uint8_t* scales = block + 4 * P;
      const uint8_t* minimums = block + 12 * P;
      const uint8_t* nibbles = block + 20 * P;
      I main[T], mins[T];
      for (int t = 0; t < T; ++t) main[t] = V::izero(), mins[t] = V::izero();
      // each row's scales of sub-blocks 2g and 2g + 1 (the g-th pair), 16 bits each, in its lane
      const auto scale_pair = [&](int g) { return V::widen_u8_16(scales + 2 * P * g); };
      // one weight vector at a time, for every token: values 4c..4c+3 of sub-block 2g (low
      // nibbles) or 2g + 1 (high), every row (all eight side by side left AVX2's 16 registers
      // short at 4 tokens)
      const auto weights = [&](int g, bool high, int c) __attribute__((always_inline)) {
        const I raw = V::iload(nibbles + (8 * g + c) * 4 * P);
        return V::and_(high ? V::template srl16<4>(raw) : raw, low);
      };
      if constexpr (V::kVnni) {
        for (int j = 0; j < 8; ++j) {  // sub-block j: low nibbles of group j / 2 if j is even
          I s[T];
#pragma GCC unroll 8
          for (int c = 0; c < 8; ++c) {
            const I w = weights(j / 2, j % 2 == 1, c);
            for (int t = 0; t < T; ++t) {
              s[t] = V::dpbusd(c == 0 ? V::izero() : s[t], w, V::bcast32(a[t][b].q + 32 * j + 4 * c));
            }
          }
          const I pair = scale_pair(j / 2);  // 32-bit sums times the scale
          const I scale = V::template srl32<16>(j % 2 == 0 ? V::shuffle8(pair, dup_low) : pair);
          for (int t = 0; t < T; ++t) main[t] = V::add32(main[t], V::mullo32(s[t], scale));
        }
      } else {
        for (int g = 0; g < 4; ++g) {
          const auto sub_block = [&]<bool kHigh>() __attribute__((always_inline)) {
            I s[T];
#pragma GCC unroll 8
            for (int c = 0; c < 8; ++c) {
              const I w = weights(g, kHigh, c);
              for (int t = 0; t < T; ++t) {
                const I p = V::maddubs(w, V::bcast32(a[t][b].q + 32 * (2 * g + kHigh) + 4 * c));
                s[t] = c == 0 ? p : V::adds16(s[t], p);
              }
            }
            const I scale = V::shuffle8(scale_pair(g), kHigh ? dup_high : dup_low);
            for (int t = 0; t < T; ++t) main[t] = V::add32(main[t], V::madd16(s[t], scale));
          };
          sub_block.template operator()<false>();
          sub_block.template operator()<true>();
        }
      }
      for (int k = 0; k < 4; ++k) {  // minimum pairs (2k, 2k + 1)
        const I pair = V::widen_u8_16(minimums + 2 * P * k);
        for (int t = 0; t < T; ++t) {
          const I p = V::madd16(pair, V::bcast32(a[t][b].sums32 + 2 * k));
          mins[t] = V::add32(mins[t], p);
        }
      }
      const F d = V::fload_f16(reinterpret_cast<const uint16_t*>(block));
      const F neg_dmin = V::fload_f16(reinterpret_cast<const uint16_t*>(block + 2 * P));
      for (int t = 0; t < T; ++t) {
        const F dx = V::fset1(a[t][b].d);
        acc[t] = V::fma(V::cvt(main[t]), V::fmul(d, dx), acc[t]);
        acc[t] = V::fma(V::cvt(mins[t]), V::fmul(neg_dmin, dx), acc[t]);
      }
    }
    for (int t = 0; t < T; ++t) V::fstore(out + t * P, acc[t]);
  }
};

// Q6_K: 6-bit values (w + 32) from a low-nibble vector and a high-bit vector; per 16-value
// sub-block two 16-bit sums of two products each (at most 4 · 63 · 127), times the signed
// scale with madd (with VNNI: one 32-bit sum of four dpbusd, times the scale); the offsets
// 32 · scale · (16-value activation sums) come off with madd.
template <class V>
struct Q6_KPanel {
  static constexpr int kMaxTokens = kQuantTokens<V>;

  template <int T, bool kPrefetch>
  static void tile(const uint8_t* panel, int64_t cols, const uint8_t* x, size_t x_stride,
                   float* out) {
    using F = typename V::F;
    using I = typename V::I;
    constexpr int P = V::kLanes;
    const BlockQ8K* a[T];
    F acc[T];
    for (int t = 0; t < T; ++t) {
      a[t] = reinterpret_cast<const BlockQ8K*>(x + t * x_stride);
      acc[t] = V::fzero();
    }
    const I nibble = V::set8(0x0F), top = V::set8(0x30);
    const I dup_low = V::iload(kDupLow), dup_high = V::iload(kDupHigh);
    for (int64_t b = 0; b < cols / 256; ++b) {
      const uint8_t* block = panel + b * q6_k_panel_block(P);
      if constexpr (kPrefetch) prefetch_ahead<8192>(block, q6_k_panel_block(P));
      const auto* scales = reinterpret_cast<const int8_t*>(block + 2 * P);
      const uint8_t* values = block + 18 * P;
      I total[T];
      for (int t = 0; t < T; ++t) total[t] = V::izero();
      for (int k = 0; k < 8; ++k) {  // sub-blocks 2k and 2k + 1
        const I pair = V::widen_s8_16(scales + 2 * P * k);
        const I pair32 = V::template sll16<5>(pair);
        for (int t = 0; t < T; ++t) {
          const I offset = V::madd16(pair32, V::bcast32(a[t][b].sums16 + 2 * k));
          total[t] = V::sub32(total[t], offset);
        }
        for (int half = 0; half < 2; ++half) {
          const int j = 2 * k + half;
          const I scale = V::shuffle8(pair, half == 0 ? dup_low : dup_high);
          const uint8_t* v = values + j * 12 * P;
          const I l1 = V::iload(v), l2 = V::iload(v + 4 * P), h = V::iload(v + 8 * P);
          const I qa = V::or_(V::and_(l1, nibble), V::and_(V::template sll16<4>(h), top));
          const I qb = V::or_(V::and_(V::template srl16<4>(l1), nibble),
                              V::and_(V::template sll16<2>(h), top));
          const I qc = V::or_(V::and_(l2, nibble), V::and_(h, top));
          const I qd = V::or_(V::and_(V::template srl16<4>(l2), nibble),
                              V::and_(V::template srl16<2>(h), top));
          for (int t = 0; t < T; ++t) {
            const int8_t* q = a[t][b].q + 16 * j;
            if constexpr (V::kVnni) {
              I sum = V::dpbusd(V::izero(), qa, V::bcast32(q));
              sum = V::dpbusd(sum, qb, V::bcast32(q + 4));
              sum = V::dpbusd(sum, qc, V::bcast32(q + 8));
              sum = V::dpbusd(sum, qd, V::bcast32(q + 12));
              total[t] = V::add32(total[t], V::mullo32(sum, V::template sra32<16>(scale)));  // scale in 32 bits
            } else {
              const I p1 = V::add16(V::maddubs(qa, V::bcast32(q)), V::maddubs(qb, V::bcast32(q + 4)));
              const I p2 = V::add16(V::maddubs(qc, V::bcast32(q + 8)), V::maddubs(qd, V::bcast32(q + 12)));
              total[t] = V::add32(total[t], V::add32(V::madd16(p1, scale), V::madd16(p2, scale)));
            }
          }
        }
      }
      const F d = V::fload_f16(reinterpret_cast<const uint16_t*>(block));
      for (int t = 0; t < T; ++t) {
        acc[t] = V::fma(V::cvt(total[t]), V::fmul(d, V::fset1(a[t][b].d)), acc[t]);
      }
    }
    for (int t = 0; t < T; ++t) V::fstore(out + t * P, acc[t]);
  }
};

// Q2_K: value = d · scale · q - dmin · min per 16-value sub-block, q in 0..3 (2-bit crumbs,
// one vector per sub-block: byte k of a row holds values k, 4 + k, 8 + k, 12 + k), the 4-bit
// scales and minimums unpacked to byte pairs as Q6_K's scales. As Q6_K: per sub-block four
// products (at most 2 · 3 · 127 per pair) summed in 16 bits, times the scale with madd (VNNI:
// 4 dpbusd times the scale); the minimums meet the activations' 16-value sums with madd.
// Then acc += main · (d · dx) + mins · (-dmin · dx).
template <class V>
struct Q2_KPanel {
  static constexpr int kMaxTokens = kQuantTokens<V>;

  template <int T, bool kPrefetch>
  static void tile(const uint8_t* panel, int64_t cols, const uint8_t* x, size_t x_stride,
                   float* out) {
    using F = typename V::F;
    using I = typename V::I;
    constexpr int P = V::kLanes;
    const BlockQ8K* a[T];
    F acc[T];
    for (int t = 0; t < T; ++t) {
      a[t] = reinterpret_cast<const BlockQ8K*>(x + t * x_stride);
      acc[t] = V::fzero();
    }
    const I crumb = V::set8(0x03);
    const I dup_low = V::iload(kDupLow), dup_high = V::iload(kDupHigh);
    for (int64_t b = 0; b < cols / 256; ++b) {
      const uint8_t* block = panel + b * q2_k_panel_block(P);
      if constexpr (kPrefetch) prefetch_ahead<8192>(block, q2_k_panel_block(P));
      const auto* scales = reinterpret_cast<const int8_t*>(block + 4 * P);
      const auto* minimums = reinterpret_cast<const int8_t*>(block + 20 * P);
      const uint8_t* values = block + 36 * P;
      I main[T], mins[T];
      for (int t = 0; t < T; ++t) main[t] = V::izero(), mins[t] = V::izero();
      for (int k = 0; k < 8; ++k) {  // sub-blocks 2k and 2k + 1
        const I pair = V::widen_s8_16(scales + 2 * P * k);
        const I min_pair = V::widen_s8_16(minimums + 2 * P * k);
        for (int t = 0; t < T; ++t) mins[t] = V::add32(mins[t], V::madd16(min_pair, V::bcast32(a[t][b].sums16 + 2 * k)));
        for (int half = 0; half < 2; ++half) {
          const int j = 2 * k + half;
          const I scale = V::shuffle8(pair, half == 0 ? dup_low : dup_high);
          const I v = V::iload(values + j * 4 * P);
          const I qa = V::and_(v, crumb);
          const I qb = V::and_(V::template srl16<2>(v), crumb);
          const I qc = V::and_(V::template srl16<4>(v), crumb);
          const I qd = V::and_(V::template srl16<6>(v), crumb);
          for (int t = 0; t < T; ++t) {
            const int8_t* q = a[t][b].q + 16 * j;
            if constexpr (V::kVnni) {
              I sum = V::dpbusd(V::izero(), qa, V::bcast32(q));
              sum = V::dpbusd(sum, qb, V::bcast32(q + 4));
              sum = V::dpbusd(sum, qc, V::bcast32(q + 8));
              sum = V::dpbusd(sum, qd, V::bcast32(q + 12));
              main[t] = V::add32(main[t], V::mullo32(sum, V::template sra32<16>(scale)));  // scale in 32 bits
            } else {
              I p = V::add16(V::maddubs(qa, V::bcast32(q)), V::maddubs(qb, V::bcast32(q + 4)));
              p = V::add16(p, V::add16(V::maddubs(qc, V::bcast32(q + 8)), V::maddubs(qd, V::bcast32(q + 12))));
              main[t] = V::add32(main[t], V::madd16(p, scale));
            }
          }
        }
      }
      const F d = V::fload_f16(reinterpret_cast<const uint16_t*>(block));
      const F dmin = V::fload_f16(reinterpret_cast<const uint16_t*>(block + 2 * P));  // -dmin
      for (int t = 0; t < T; ++t) {
        const F dx = V::fset1(a[t][b].d);
        acc[t] = V::fma(V::cvt(main[t]), V::fmul(d, dx), acc[t]);
        acc[t] = V::fma(V::cvt(mins[t]), V::fmul(dmin, dx), acc[t]);
      }
    }
    for (int t = 0; t < T; ++t) V::fstore(out + t * P, acc[t]);
  }
};

// Panels [begin, end) against every token, tile by tile; rows past the matrix's end (the
// zero padding of its last panel) are computed and dropped.
template <class V, class Panel>
void panel_rows(const PackedMatrix& w, int64_t begin, int64_t end, const uint8_t* x,
                size_t x_stride, int n, float* y) {
  constexpr int P = V::kLanes;
  alignas(64) float out[Panel::kMaxTokens * P];
  for (int64_t p = begin; p < end; ++p) {
    const uint8_t* panel = w.data() + p * w.panel_bytes;
    const int64_t row0 = p * P;
    const size_t valid = static_cast<size_t>(std::min<int64_t>(P, w.rows - row0));
    each_token_tile<Panel::kMaxTokens>(n, [&]<int T>(int t0) {
      if (T == 1 && !w.one_token_prefetch) {
        Panel::template tile<1, false>(panel, w.cols, x + t0 * x_stride, x_stride, out);
      } else {
        Panel::template tile<T, true>(panel, w.cols, x + t0 * x_stride, x_stride, out);
      }
      for (int t = 0; t < T; ++t) {
        std::memcpy(y + (t0 + t) * w.rows + row0, out + t * P, valid * sizeof(float));
      }
    });
  }
}

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

// ---- exp of non-positive arguments (softmax, log-sum-exp) --------------------------------
//
// exp(x) for x ≤ 0 by range reduction: x = n·ln 2 + r with n = round(x·log2 e), |r| ≤ ln 2 / 2
// (ln 2 in two parts, so that r is exact), exp(r) by Cephes' degree-6 polynomial (relative
// error about 1e-7), times 2^n built in the exponent bits. Arguments are clamped at -87: a
// term below e^-87 is lost in a sum that holds e^0 = 1 (the row's maximum) anyway.
template <class V>
typename V::F exp_nonpositive(typename V::F x) {
  using F = typename V::F;
  x = V::fmax(x, V::fset1(-87.0f));
  const F n = V::fround(V::fmul(x, V::fset1(1.44269504088896341f)));
  F r = V::fma(n, V::fset1(-0.693359375f), x);
  r = V::fma(n, V::fset1(2.12194440e-4f), r);
  F p = V::fset1(1.9875691500e-4f);
  p = V::fma(p, r, V::fset1(1.3981999507e-3f));
  p = V::fma(p, r, V::fset1(8.3334519073e-3f));
  p = V::fma(p, r, V::fset1(4.1665795894e-2f));
  p = V::fma(p, r, V::fset1(1.6666665459e-1f));
  p = V::fma(p, r, V::fset1(5.0000001201e-1f));
  const F one = V::fset1(1.0f);
  const F e = V::fma(p, V::fmul(r, r), V::fma(r, one, one));
  return V::fmul(e, V::pow2(V::cvt_f2i(n)));
}

// The largest of x[0 .. n): lane-wise maxima, then the tail (max is exact in any order).
template <class V>
float row_max(const float* x, int64_t n) {
  constexpr int L = V::kLanes;
  const int64_t whole = n / L * L;
  float max_value = -INFINITY;
  if (whole > 0) {
    typename V::F m = V::fload(x);
    for (int64_t i = L; i < whole; i += L) m = V::fmax(m, V::fload(x + i));
    max_value = V::hmax(m);
  }
  for (int64_t i = whole; i < n; ++i) max_value = std::max(max_value, x[i]);
  return max_value;
}

// ---- attention (8-lane vectors) ---------------------------------------------------------
//
// Scores: each (head, position) pair is one accumulator over the head dimension (lane i
// takes elements i, i + 8, ...), summed by the fixed 8-lane tree; elements past the last
// whole vector are added after it, in order. Tiles of 2 heads × 4 positions (1 × 8 for an
// odd head count) share each query and key load. Softmax per head: exp_nonpositive of
// score - max in 8 lanes, their sum lane by lane then by the tree, the tail after it in
// order, then each times 1 / sum. Values: each (head, 8 dimensions) is one accumulator over
// the positions in order, in tiles of 2 heads × 4 such chunks (1 × 4) that share each value
// load and probability broadcast. How pairs and chunks are tiled never changes what an
// accumulator computes, so a token's result depends on nothing but its own queries and its
// sequence's cache.
//
// Softmax in 8 lanes and shared loads where a scalar exp per score (a call that spilled
// the loop's registers) and two loads per multiply-add were: the 1.1B shape's attention
// alone, one thread, 1024 cached positions, 17.0 -> 12.2 ms for one token and 52.6 -> 31.5
// for 4; whole Q4_K_M forwards at the AVX2 level, 2 threads, 1.12x-1.20x for one token and
// 1.24x-1.27x for 4 at 512-1024 positions (docs/performance.md).

// The scores of heads [h0, h0 + H) at positions [p0, p0 + count), count <= 8 / H; lanes
// past the end repeat the last position.
template <class V, int H>
inline void score_tile(const AttentionArgs& a, const float* const* keys, int h0, int p0, int count) {
  using F = typename V::F;
  constexpr int P = 8 / H;
  const int dim = a.head_dim, whole = dim / 8 * 8;
  const float* q[H];
  const float* k[P];
  for (int i = 0; i < H; ++i) q[i] = a.q + (h0 + i) * dim;
  for (int j = 0; j < P; ++j) k[j] = keys[p0 + std::min(j, count - 1)];
  F acc[8];
  for (F& v : acc) v = V::fzero();
  for (int d = 0; d < whole; d += 8) {
    F qv[H];
    for (int i = 0; i < H; ++i) qv[i] = V::fload(q[i] + d);
    for (int j = 0; j < P; ++j) {
      const F kv = V::fload(k[j] + d);
      for (int i = 0; i < H; ++i) acc[i * P + j] = V::fma(qv[i], kv, acc[i * P + j]);
    }
  }
  float s[8];
  V::hsums8(acc, s);
  for (int d = whole; d < dim; ++d) {
    for (int i = 0; i < H; ++i) {
      for (int j = 0; j < P; ++j) s[i * P + j] += q[i][d] * k[j][d];
    }
  }
  for (int i = 0; i < H; ++i) {
    for (int j = 0; j < count; ++j) a.scores[(h0 + i) * a.length + p0 + j] = s[i * P + j] * a.scale;
  }
}

// s[0 .. length) <- softmax(s), in place.
template <class V>
inline void softmax_row(float* s, int length) {
  using F = typename V::F;
  const int whole = length / 8 * 8;
  const F shift = V::fset1(-row_max<V>(s, length)), one = V::fset1(1.0f);
  F acc = V::fzero();
  for (int p = 0; p < whole; p += 8) {
    const F e = exp_nonpositive<V>(V::fma(V::fload(s + p), one, shift));
    V::fstore(s + p, e);
    acc = V::fma(e, one, acc);
  }
  float sum = V::hsum(acc);
  if (whole < length) {  // the tail through one padded vector, summed in order
    float tail[8] = {};
    std::copy(s + whole, s + length, tail);
    V::fstore(tail, exp_nonpositive<V>(V::fma(V::fload(tail), one, shift)));
    for (int p = whole; p < length; ++p) sum += s[p] = tail[p - whole];
  }
  const float inverse = 1.0f / sum;
  const F scale = V::fset1(inverse);
  for (int p = 0; p < whole; p += 8) V::fstore(s + p, V::fmul(V::fload(s + p), scale));
  for (int p = whole; p < length; ++p) s[p] *= inverse;
}

// out for heads [h0, h0 + H), 8-value chunks [c0, c0 + count) of each, count <= 4; lanes
// past the end repeat the last chunk.
template <class V, int H>
inline void value_tile(const AttentionArgs& a, const float* const* values, int h0, int c0, int count) {
  using F = typename V::F;
  constexpr int C = 4;
  const float* probability[H];
  int offset[C];
  for (int i = 0; i < H; ++i) probability[i] = a.scores + static_cast<size_t>(h0 + i) * a.length;
  for (int c = 0; c < C; ++c) offset[c] = 8 * (c0 + std::min(c, count - 1));
  F acc[H][C];
  for (int i = 0; i < H; ++i) {
    for (int c = 0; c < C; ++c) acc[i][c] = V::fzero();
  }
  for (int p = 0; p < a.length; ++p) {
    const float* v = values[p];
    F weight[H];
    for (int i = 0; i < H; ++i) weight[i] = V::fset1(probability[i][p]);
    for (int c = 0; c < C; ++c) {
      const F row = V::fload(v + offset[c]);
      for (int i = 0; i < H; ++i) acc[i][c] = V::fma(weight[i], row, acc[i][c]);
    }
  }
  for (int i = 0; i < H; ++i) {
    for (int c = 0; c < count; ++c) V::fstore(a.out + (h0 + i) * a.head_dim + offset[c], acc[i][c]);
  }
}

template <class V>
void attend(const AttentionArgs& args) {
  static_assert(V::kLanes == 8);
  // The attended positions [start, length) become rows 0 .. length - start of their own.
  AttentionArgs a = args;
  a.length = args.length - args.start;
  const int heads = a.heads, dim = a.head_dim, length = a.length;
  const int whole = dim / 8 * 8;
  // The key and value rows of every position, found once through the block table.
  const float** keys = a.rows;
  const float** values = a.rows + length;
  for (int p = args.start, i = 0; p < args.length;) {
    const size_t first =
        static_cast<size_t>(a.block_table[p / a.block_size]) * a.block_size * a.kv_dim + a.kv_offset;
    for (int o = p % a.block_size; o < a.block_size && p < args.length; ++o, ++p, ++i) {
      keys[i] = a.keys + first + static_cast<size_t>(o) * a.kv_dim;
      values[i] = a.values + first + static_cast<size_t>(o) * a.kv_dim;
    }
  }

  const bool pairs = heads % 2 == 0;
  for (int h = 0; h < heads; h += pairs ? 2 : 1) {
    for (int p = 0; p < length; p += pairs ? 4 : 8) {
      if (pairs) {
        score_tile<V, 2>(a, keys, h, p, std::min(4, length - p));
      } else {
        score_tile<V, 1>(a, keys, h, p, std::min(8, length - p));
      }
    }
  }

  for (int h = 0; h < heads; ++h) softmax_row<V>(a.scores + static_cast<size_t>(h) * length, length);

  const int chunks = whole / 8;
  for (int h = 0; h < heads; h += pairs ? 2 : 1) {
    for (int c = 0; c < chunks; c += 4) {
      if (pairs) {
        value_tile<V, 2>(a, values, h, c, std::min(4, chunks - c));
      } else {
        value_tile<V, 1>(a, values, h, c, std::min(4, chunks - c));
      }
    }
  }
  for (int h = 0; h < heads; ++h) {
    for (int d = whole; d < dim; ++d) {
      float o = 0.0f;
      for (int p = 0; p < length; ++p) o += a.scores[static_cast<size_t>(h) * length + p] * values[p][d];
      a.out[h * dim + d] = o;
    }
  }
}

// ---- peak multiply-add rate ------------------------------------------------------------
//
// The arithmetic of each kernel's inner step for two tokens, with every operand in a
// register (V::opaque hides the activations and scales from the optimizer each round, so
// nothing is hoisted and no load is issued): the rate a core reaches for that instruction
// mix. The kernels' own work on top (loads and broadcasts of activations, unpacking of
// weights) is left out, so the kernels stay below it. Returns the multiply-adds done.

template <class V>
double peak_float(int64_t rounds) {  // fused multiply-adds into 12 independent chains
  using F = typename V::F;
  F acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = V::fset1(static_cast<float>(i));
  F w = V::fset1(0.999f), x = V::fset1(1e-3f);
  for (int64_t i = 0; i < rounds; ++i) {
    V::opaque(w);
    V::opaque(x);
    for (F& a : acc) a = V::fma(w, x, a);
  }
  float sink = 0.0f;
  for (F& a : acc) sink += V::hsum(a);
  V::keep(sink);
  return 12.0 * V::kLanes * static_cast<double>(rounds);
}

// One round is one block column per token, as the kernel computes it, on 4 weight vectors
// and 2 activation vectors per token (every product distinct, nothing to hoist).
template <class V>
struct PeakState {
  using F = typename V::F;
  using I = typename V::I;
  static constexpr int T = 2;
  I w[4];
  I x[T][2];
  F acc[T];
  F d[T];
  PeakState() {
    #pragma GCC unroll 16
    for (int c = 0; c < 4; ++c) w[c] = V::set8(3 + c);
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      x[t][0] = V::set8(5 + t), x[t][1] = V::set8(-7 - t);
      acc[t] = V::fzero(), d[t] = V::fset1(1e-7f * static_cast<float>(t + 1));
    }
  }
  void hide() {
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) V::opaque(x[t][0]), V::opaque(x[t][1]), V::opaque(d[t]);
  }
  // 8 products of 4 values per lane summed as the kernels sum one 32-value block
  template <bool kDpbusd, bool kSignedWeights>
  I block32(int t) const {
    I sum = V::izero();
    if constexpr (kDpbusd) {
      #pragma GCC unroll 16
      for (int c = 0; c < 8; ++c) sum = V::dpbusd(sum, w[c % 4], x[t][c / 4]);
    } else if constexpr (kSignedWeights) {  // Q8_0: sign, maddubs and madd per 4 values
      #pragma GCC unroll 16
      for (int c = 0; c < 8; ++c) {
        sum = V::add32(sum, V::madd16(V::maddubs(w[c % 4], V::sign8(x[t][c / 4], w[(c + 1) % 4])),
                                      V::set16(1)));
      }
    } else {  // maddubs summed in 16 bits
      sum = V::maddubs(w[0], x[t][0]);
      #pragma GCC unroll 16
      for (int c = 1; c < 8; ++c) sum = V::add16(sum, V::maddubs(w[c % 4], x[t][c / 4]));
    }
    return sum;
  }
  void update(int t, I sum) { acc[t] = V::fma(V::cvt(sum), V::fmul(d[t], d[(t + 1) % T]), acc[t]); }
  double finish(double macs_per_round, int64_t rounds) {
    float sink = 0.0f;
    for (F& a : acc) sink += V::hsum(a);
    V::keep(sink);
    return T * macs_per_round * static_cast<double>(rounds);
  }
};

// Q8_0 / Q4_0: a 32-value block, then its float update.
template <class V, bool kQ8>
double peak_block32(int64_t rounds) {
  PeakState<V> s;
  for (int64_t i = 0; i < rounds; ++i) {
    s.hide();
    #pragma GCC unroll 16
    for (int t = 0; t < s.T; ++t) {
      typename V::I sum = s.template block32<V::kVnni, kQ8>(t);
      if constexpr (!V::kVnni && !kQ8) sum = V::add32(V::madd16(sum, V::set16(1)), s.x[t][1]);
      s.update(t, sum);
    }
  }
  return s.finish(32.0 * V::kLanes, rounds);
}

// Q4_K: 8 sub-blocks of 32 (maddubs in 16 bits, madd with the scales; with VNNI dpbusd
// into 32 bits, a multiply by the scale), the minimums' 4 madds, two float updates per 256
// values. Q6_K: 16 sub-blocks of 16 (4 maddubs, two 16-bit sums, two madds; with VNNI 4
// dpbusd and a multiply), the offsets' 8 madds, one float update.
template <class V, bool kQ6>
double peak_super_block(int64_t rounds) {
  using I = typename V::I;
  PeakState<V> s;
  const I scale = V::set16(5);
  for (int64_t i = 0; i < rounds; ++i) {
    s.hide();
    #pragma GCC unroll 16
    for (int t = 0; t < s.T; ++t) {
      I main = V::izero(), side = V::izero();
      if constexpr (kQ6) {
        #pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) {
          V::opaque(s.x[t][0]), V::opaque(s.x[t][1]);  // a new sub-block's activations
          if constexpr (V::kVnni) {
            I sum = V::dpbusd(V::izero(), s.w[j % 4], s.x[t][0]);
            sum = V::dpbusd(sum, s.w[(j + 1) % 4], s.x[t][1]);
            sum = V::dpbusd(sum, s.w[(j + 2) % 4], s.x[t][0]);
            sum = V::dpbusd(sum, s.w[(j + 3) % 4], s.x[t][1]);
            main = V::add32(main, V::mullo32(sum, j % 2 ? scale : s.x[t][0]));
          } else {
            const I p1 = V::add16(V::maddubs(s.w[j % 4], s.x[t][0]), V::maddubs(s.w[(j + 1) % 4], s.x[t][1]));
            const I p2 = V::add16(V::maddubs(s.w[(j + 2) % 4], s.x[t][0]), V::maddubs(s.w[(j + 3) % 4], s.x[t][1]));
            main = V::add32(main, V::add32(V::madd16(p1, scale), V::madd16(p2, s.x[t][j % 2])));
          }
        }
        #pragma GCC unroll 16
        for (int k = 0; k < 8; ++k) {
          V::opaque(s.x[t][k % 2]);
          side = V::sub32(side, V::madd16(s.w[k % 4], s.x[t][k % 2]));
        }
        s.update(t, V::add32(main, side));
      } else {
        #pragma GCC unroll 16
        for (int j = 0; j < 8; ++j) {
          V::opaque(s.x[t][0]), V::opaque(s.x[t][1]);  // a new sub-block's activations
          if constexpr (V::kVnni) {
            I sums = V::izero();
            #pragma GCC unroll 16
            for (int c = 0; c < 8; ++c) sums = V::dpbusd(sums, s.w[(j + c) % 4], s.x[t][c / 4]);
            main = V::add32(main, V::mullo32(sums, j % 2 ? scale : s.x[t][1]));
          } else {
            I pairs = V::maddubs(s.w[j % 4], s.x[t][0]);
            #pragma GCC unroll 16
            for (int c = 1; c < 8; ++c) pairs = V::add16(pairs, V::maddubs(s.w[(j + c) % 4], s.x[t][c / 4]));
            main = V::add32(main, V::madd16(pairs, j % 2 ? scale : s.x[t][1]));
          }
        }
        #pragma GCC unroll 16
        for (int k = 0; k < 4; ++k) {
          V::opaque(s.x[t][k % 2]);
          side = V::add32(side, V::madd16(s.w[k], s.x[t][k % 2]));
        }
        s.update(t, main);
        s.update(t, side);
      }
    }
  }
  return s.finish(256.0 * V::kLanes, rounds);
}

template <class V>
double peak_loop(TensorType type, int64_t rounds) {
  switch (type) {
    case TensorType::F32:
    case TensorType::F16:
    case TensorType::BF16:
      return peak_float<V>(rounds);
    case TensorType::Q8_0:
      return peak_block32<V, true>(rounds);
    case TensorType::Q4_0:
    case TensorType::Q4_1:
    case TensorType::Q5_1:
    case TensorType::Q5_K:
      return peak_block32<V, false>(rounds);
    case TensorType::IQ4_XS:
      return peak_block32<V, true>(rounds);
    case TensorType::Q4_K:
      return peak_super_block<V, false>(rounds);
    case TensorType::Q6_K:
    case TensorType::Q2_K:
      return peak_super_block<V, true>(rounds);
    default:
      return 0.0;
  }
}

// ---- log-sum-exp of a row (a log-softmax's normaliser) ------------------------------------
//
// log Σ exp(x_i): the maximum m first, then Σ exp(x_i - m) in float lanes, moved into a
// double every 256 values (so a 150 000-value row keeps float's precision), the tail
// (n mod lanes) by the scalar exp. Called once per emitted token on the vocabulary's row.
template <class V>
double log_sum_exp(const float* x, int64_t n) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  const int64_t whole = n / L * L;
  const float max_value = row_max<V>(x, n);
  const F shift = V::fset1(-max_value), one = V::fset1(1.0f);
  double sum = 0.0;
  for (int64_t begin = 0; begin < whole; begin += 256) {
    const int64_t end = std::min<int64_t>(whole, begin + 256);
    F acc = V::fzero();
    for (int64_t i = begin; i < end; i += L) acc = V::fma(exp_nonpositive<V>(V::fma(V::fload(x + i), one, shift)), one, acc);
    sum += V::hsum(acc);
  }
  for (int64_t i = whole; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - max_value);
  return max_value + std::log(sum);
}

// ---- the level's table ------------------------------------------------------------------

// VQ4K: the vector type of the Q4_K kernel (its lanes are the rows of a Q4_K panel).
template <class V, class VQ4K = V>
KernelTable make_kernel_table() {
  KernelTable table{};
  table.lanes = V::kLanes;
  table.q4_k_rows = VQ4K::kLanes;
  table.float_rows = kFloatPanelRows<V>;
  table.vnni = V::kVnni;
  table.f32 = float_rows<V, F32Load>;
  table.f16 = float_rows<V, F16Load>;
  table.bf16 = float_rows<V, BF16Load>;
  table.q8_0 = panel_rows<V, Q8_0Panel<V>>;
  table.q4_0 = panel_rows<V, Q4_0Panel<V>>;
  table.q4_1 = panel_rows<V, AffinePanel<V, false>>;
  table.q5_1 = panel_rows<V, AffinePanel<V, true>>;
  table.q5_k = panel_rows<V, AffinePanel<V, true, true>>;
  table.iq4_xs = panel_rows<V, Q8_0Panel<V, true>>;
  table.q4_k = panel_rows<VQ4K, Q4_KPanel<VQ4K>>;
  table.q6_k = panel_rows<V, Q6_KPanel<V>>;
  table.q2_k = panel_rows<V, Q2_KPanel<V>>;
  table.quantize_q8 = quantize_q8<V>;
  table.quantize_q8k = quantize_q8k<V>;
  if constexpr (V::kLanes == 8) table.attend = attend<V>;
  table.peak = peak_loop<V>;
  table.log_sum_exp = log_sum_exp<V>;
  return table;
}

}  // namespace
}  // namespace specula::kernels
