// 5-bit weights (Q5_0, Q5_1, Q5_K): panels that keep the file's nibbles and fifth bits apart,
// about as many bits per weight as the file (5.5, 6 and 5.625), so that decoding one token,
// which streams every weight once, reads no more bytes than the file holds. The whole 5-bit
// values are rebuilt in registers: per 32 values and row, 4 vectors of nibbles as Q4_0's
// panel keeps them and one 32-bit word of fifth bits.
// Part of the kernel algorithms written once over a vector layer V (cpu_kernel_templates.h);
// in an unnamed namespace like all of them.
#pragma once

#include <cstdint>
#include <cstring>

#include "compute/cpu_kernel_table.h"
#include "compute/cpu_kernel_tiles.h"
#include "compute/cpu_kernels_quantized.h"

namespace specula::kernels {
namespace {

// The fifth-bit word of a row's 32 values: bit c of byte j is the fifth bit of value 4c + j,
// so vector c's four bits (values 4c..4c+3, bytes 0..3 of the lane) are bit c of every byte:
// one shift puts them at bit 4, a mask keeps them. The shift is a 16-bit one: no other bit
// of the lane lands on a bit 4 (from byte 0 that would take bit 8 + c, from byte 1 bit c - 8).
template <class V, int c>
inline typename V::I fifth_bits(typename V::I h, typename V::I bit4) {
  if constexpr (c < 4) {
    return V::and_(V::template sll16<4 - c>(h), bit4);
  } else if constexpr (c == 4) {
    return V::and_(h, bit4);
  } else {
    return V::and_(V::template srl16<c - 4>(h), bit4);
  }
}

// w[c]: values 4c..4c+3 (0..31) of every row, from the P fifth-bit words at `h` and the
// 4 nibble vectors at `nibbles` (low nibbles values 4v..4v+3, high ones 16 + 4v..).
template <class V>
__attribute__((always_inline)) inline void unpack5(const uint8_t* h_words, const uint8_t* nibbles,
                                                   typename V::I* w) {
  using I = typename V::I;
  constexpr int P = V::kLanes;
  const I low = V::set8(0x0F), bit4 = V::set8(0x10);
  const I h = V::iload(h_words);
  const auto pair = [&]<int v>() __attribute__((always_inline)) {
    const I raw = V::iload(nibbles + v * 4 * P);
    w[v] = V::or_(V::and_(raw, low), fifth_bits<V, v>(h, bit4));
    w[v + 4] = V::or_(V::and_(V::template srl16<4>(raw), low), fifth_bits<V, v + 4>(h, bit4));
  };
  pair.template operator()<0>();
  pair.template operator()<1>();
  pair.template operator()<2>();
  pair.template operator()<3>();
}

// Σ w · qx over 32 values in each lane, exact: with VNNI 8 dpbusd from `init`; otherwise
// maddubs (at most 2 · 31 · 128 per pair) summed four to a 16-bit lane (< 32767), two madd
// into 32 bits, plus `init`.
template <class V>
__attribute__((always_inline)) inline typename V::I dot5(const typename V::I* w, const uint8_t* q,
                                                         typename V::I init) {
  using I = typename V::I;
  if constexpr (V::kVnni) {
    I sum = init;
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) sum = V::dpbusd(sum, w[c], V::bcast32(q + 4 * c));
    return sum;
  } else {
    I half[2];
    for (int h = 0; h < 2; ++h) {
      half[h] = V::maddubs(w[4 * h], V::bcast32(q + 16 * h));
      for (int c = 1; c < 4; ++c) half[h] = V::add16(half[h], V::maddubs(w[4 * h + c], V::bcast32(q + 16 * h + 4 * c)));
    }
    return V::add32(init, V::add32(V::madd16(half[0], V::set16(1)), V::madd16(half[1], V::set16(1))));
  }
}

// Q5_0 (kAffine false: value = (q - 16) · d, the activation offsets carry -16 · Σqx, kBias 16)
// and Q5_1 (kAffine: value = q · d + m; the offsets carry +Σqx, kBias -1, and per block and
// token acc += Σ(q · qx) · (d · dx) + Σqx · (m · dx), as AffinePanel's Q4_1).
// A block column: f16 d[P] (Q5_1: then f16 m[P]), u32 fifth-bit words[P], 4 nibble vectors.
template <class V, bool kAffine>
struct Q5Panel {
  static constexpr int kBias = kAffine ? -1 : 16;
  static constexpr int kMaxTokens = kQuantTokens<V>;
  static constexpr size_t block_bytes(int P) { return kAffine ? q5_1_panel_block(P) : q5_0_panel_block(P); }
  static constexpr int kScaleBytes = kAffine ? 4 : 2;  // per row: d (and m)

  template <int T, bool kPrefetch>
  static void tile(const uint8_t* panel, int64_t cols, const uint8_t* x, size_t x_stride, float* out) {
    using F = typename V::F;
    using I = typename V::I;
    constexpr int P = V::kLanes;
    const uint8_t* row[T];
    F acc[T];
    for (int t = 0; t < T; ++t) row[t] = x + t * x_stride, acc[t] = V::fzero();
    const Q8Row layout = q8_row(x, cols);  // its distances from a row's start hold in every row
    const auto scales_at = reinterpret_cast<const uint8_t*>(layout.scales) - x;
    const auto offsets_at = reinterpret_cast<const uint8_t*>(layout.offsets) - x;
    for (int64_t b = 0; b < cols / 32; ++b) {
      const uint8_t* block = panel + b * block_bytes(P);
      if constexpr (kPrefetch) prefetch_ahead<4096>(block, block_bytes(P));
      I w[8];
      unpack5<V>(block + kScaleBytes * P, block + (kScaleBytes + 4) * P, w);
      const F d = V::fload_f16(reinterpret_cast<const uint16_t*>(block));
      [[maybe_unused]] F m;
      if constexpr (kAffine) m = V::fload_f16(reinterpret_cast<const uint16_t*>(block + 2 * P));
      for (int t = 0; t < T; ++t) {
        float scale;
        std::memcpy(&scale, row[t] + scales_at + 4 * b, 4);
        const F dx = V::fset1(scale);
        if constexpr (kAffine) {
          int32_t qsum;
          std::memcpy(&qsum, row[t] + offsets_at + 4 * b, 4);
          const I sum = dot5<V>(w, row[t] + 32 * b, V::izero());
          acc[t] = V::fma(V::cvt(sum), V::fmul(d, dx), acc[t]);
          acc[t] = V::fma(V::fset1(static_cast<float>(qsum)), V::fmul(m, dx), acc[t]);
        } else {
          const I sum = dot5<V>(w, row[t] + 32 * b, V::bcast32(row[t] + offsets_at + 4 * b));
          acc[t] = V::fma(V::cvt(sum), V::fmul(d, dx), acc[t]);
        }
      }
    }
    for (int t = 0; t < T; ++t) V::fstore(out + t * P, acc[t]);
  }
};

// Q5_K: per 32-value sub-block j, value = (d · scale_j) · q - dmin · min_j with q in 0..31,
// against activations quantized per 32 values (kBias -1: the offsets carry Σqx). The panel
// keeps the 6-bit scales and minimums as bytes; d · scale_j and -dmin · min_j, an f16 times a
// 6-bit integer, are exact in f32, so computing them here gives the same floats, for every
// token count, as storing them would (5.625 bits per weight where f32 scales took 7.5).
// Per sub-block and token acc += Σ(q · qx) · (d·scale · dx) + Σqx · (-dmin·min · dx).
// A block column: f16 d[P], f16 -dmin[P], u8 scale[8][P], u8 minimum[8][P], then per
// sub-block u32 fifth-bit words[P] and 4 nibble vectors (each sub-block as a Q5_1 block).
template <class V>
struct Q5_KPanel {
  static constexpr int kBias = -1;
  static constexpr int kMaxTokens = kQuantTokens<V>;

  template <int T, bool kPrefetch>
  static void tile(const uint8_t* panel, int64_t cols, const uint8_t* x, size_t x_stride, float* out) {
    using F = typename V::F;
    using I = typename V::I;
    constexpr int P = V::kLanes;
    const uint8_t* row[T];
    F acc[T];
    for (int t = 0; t < T; ++t) row[t] = x + t * x_stride, acc[t] = V::fzero();
    const Q8Row layout = q8_row(x, cols);
    const auto scales_at = reinterpret_cast<const uint8_t*>(layout.scales) - x;
    const auto offsets_at = reinterpret_cast<const uint8_t*>(layout.offsets) - x;
    for (int64_t b = 0; b < cols / 256; ++b) {
      const uint8_t* block = panel + b * q5_k_panel_block(P);
      if constexpr (kPrefetch) prefetch_ahead<8192>(block, q5_k_panel_block(P));
      const F d = V::fload_f16(reinterpret_cast<const uint16_t*>(block));
      const F neg_dmin = V::fload_f16(reinterpret_cast<const uint16_t*>(block + 2 * P));
      for (int j = 0; j < 8; ++j) {
        const int64_t s = 8 * b + j;  // the activations' 32-value block
        const uint8_t* sub = block + 20 * P + 20 * P * j;
        I w[8];
        unpack5<V>(sub, sub + 4 * P, w);
        const F ds = V::fmul(d, V::cvt(V::widen_u8_32(block + 4 * P + P * j)));
        const F ms = V::fmul(neg_dmin, V::cvt(V::widen_u8_32(block + 12 * P + P * j)));
        for (int t = 0; t < T; ++t) {
          float scale;
          int32_t qsum;
          std::memcpy(&scale, row[t] + scales_at + 4 * s, 4);
          std::memcpy(&qsum, row[t] + offsets_at + 4 * s, 4);
          const F dx = V::fset1(scale);
          const I sum = dot5<V>(w, row[t] + 32 * s, V::izero());
          acc[t] = V::fma(V::cvt(sum), V::fmul(ds, dx), acc[t]);
          acc[t] = V::fma(V::fset1(static_cast<float>(qsum)), V::fmul(ms, dx), acc[t]);
        }
      }
    }
    for (int t = 0; t < T; ++t) V::fstore(out + t * P, acc[t]);
  }
};

}  // namespace
}  // namespace specula::kernels
