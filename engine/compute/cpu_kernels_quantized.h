// Quantized weights: repacked panels with the rows in the lanes, one micro-kernel per block format.
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
template <class V>
struct Q8_0Panel {
  static constexpr int kBias = V::kVnni ? 128 : 0;
  static constexpr int kMaxTokens = kQuantTokens<V>;
  static constexpr size_t block_bytes(int P) { return q8_0_panel_block(P); }
  static constexpr int kScaleBytes = 2;

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
      const F d = V::fload_f16(reinterpret_cast<const uint16_t*>(block));
      for (int t = 0; t < T; ++t) {
        acc[t] = V::fma(V::cvt(sum[t]), V::fmul(d, V::fset1(a[t].scales[b])), acc[t]);
      }
    }
    for (int t = 0; t < T; ++t) V::fstore(out + t * P, acc[t]);
  }
};

// Q4_1: value = q · d + m with q an unsigned nibble, so per block and token
// acc += Σ(q · qx) · (d · dx) + Σqx · (m · dx): the activation offsets carry Σqx (kBias -1).
// Its nibbles lie as Q4_0's; eight products per 16-bit lane fit (8 · 2 · 15 · 127 < 32767).
// (Q5_1 and Q5_K, the same sums over 5-bit values: cpu_kernels_5bit.h.)
template <class V>
struct AffinePanel {
  static constexpr int kBias = -1;
  static constexpr int kMaxTokens = kQuantTokens<V>;

  static constexpr size_t block_bytes(int P) { return q4_1_panel_block(P); }

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
      I w[8];  // w[c]: values 4c..4c+3 of every row
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        const I raw = V::iload(block + 4 * P + v * 4 * P);
        w[v] = V::and_(raw, low);
        w[v + 4] = V::and_(V::template srl16<4>(raw), low);
      }
      const F d = V::fload_f16(reinterpret_cast<const uint16_t*>(block));
      const F m = V::fload_f16(reinterpret_cast<const uint16_t*>(block + 2 * P));
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
          I pairs = V::maddubs(w[0], V::bcast32(q));
          for (int c = 1; c < 8; ++c) pairs = V::add16(pairs, V::maddubs(w[c], V::bcast32(q + 4 * c)));
          update(t, V::madd16(pairs, V::set16(1)));
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

}  // namespace
}  // namespace specula::kernels
