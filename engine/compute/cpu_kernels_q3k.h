// The Q3_K panel: 3-bit weights read at their stored size (no re-encoding into Q6_K).
// Part of the kernel algorithms written once over a vector layer V (cpu_kernel_templates.h
// says how they are compiled per SIMD level); in an unnamed namespace like all of them.
#pragma once

#include <cstdint>

#include "compute/cpu_kernel_table.h"
#include "compute/cpu_kernel_tiles.h"
#include "compute/cpu_kernels_quantized.h"

namespace specula::kernels {
namespace {

// Q3_K: value = d · (scale - 32) · v per 16-value sub-block, v in -4..3, taken unsigned as
// u = v + 4 in 0..7: its low 2 bits as Q2_K's crumb vectors (byte k of a row: values k, 4 + k,
// 8 + k, 12 + k), its third bit from one vector per sub-block pair (2k, 2k + 1) holding at
// bit 4 · half + c of byte k the third bit of the value the crumb vector of sub-block
// 2k + half holds at its crumb c of byte k: one shift and one and bring it to bit 2 of that
// crumb's byte. The scales minus 32 are byte pairs as Q6_K's. As Q6_K: per sub-block four
// products (at most 2 · 7 · 127 per pair) summed in 16 bits, times the signed scale with madd
// (VNNI: 4 dpbusd times the scale); the offsets 4 · scale · (16-value activation sums) come
// off with madd. Then acc += total · (d · dx).
template <class V>
struct Q3_KPanel {
  static constexpr int kMaxTokens = kQuantTokens<V>;

  // The third bits of crumb m (0..7 over the pair) at bit 2 of every byte.
  template <int m>
  static typename V::I third_bits(typename V::I h, typename V::I bit2) {
    if constexpr (m < 2) {
      return V::and_(V::template sll16<2 - m>(h), bit2);
    } else if constexpr (m == 2) {
      return V::and_(h, bit2);
    } else {  // a 16-bit shift of at most 5 keeps bit 2 + m of a byte within that byte
      return V::and_(V::template srl16<m - 2>(h), bit2);
    }
  }

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
    const I crumb = V::set8(0x03), bit2 = V::set8(0x04);
    const I dup_low = V::iload(kDupLow), dup_high = V::iload(kDupHigh);
    for (int64_t b = 0; b < cols / 256; ++b) {
      const uint8_t* block = panel + b * q3_k_panel_block(P);
      if constexpr (kPrefetch) prefetch_ahead<8192>(block, q3_k_panel_block(P));
      const auto* scales = reinterpret_cast<const int8_t*>(block + 2 * P);
      const uint8_t* values = block + 18 * P;
      I total[T];
      for (int t = 0; t < T; ++t) total[t] = V::izero();
      for (int k = 0; k < 8; ++k) {  // sub-blocks 2k and 2k + 1
        const I pair = V::widen_s8_16(scales + 2 * P * k);
        const I pair4 = V::template sll16<2>(pair);
        for (int t = 0; t < T; ++t) {
          const I offset = V::madd16(pair4, V::bcast32(a[t][b].sums16 + 2 * k));
          total[t] = V::sub32(total[t], offset);
        }
        const uint8_t* v = values + 12 * P * k;
        const I h = V::iload(v);
        const auto sub_block = [&]<int kHalf>() __attribute__((always_inline)) {
          const int j = 2 * k + kHalf;
          const I scale = V::shuffle8(pair, kHalf == 0 ? dup_low : dup_high);
          const I c = V::iload(v + 4 * P + 4 * P * kHalf);
          const I qa = V::or_(V::and_(c, crumb), third_bits<4 * kHalf>(h, bit2));
          const I qb = V::or_(V::and_(V::template srl16<2>(c), crumb), third_bits<4 * kHalf + 1>(h, bit2));
          const I qc = V::or_(V::and_(V::template srl16<4>(c), crumb), third_bits<4 * kHalf + 2>(h, bit2));
          const I qd = V::or_(V::and_(V::template srl16<6>(c), crumb), third_bits<4 * kHalf + 3>(h, bit2));
          for (int t = 0; t < T; ++t) {
            const int8_t* q = a[t][b].q + 16 * j;
            if constexpr (V::kVnni) {
              I sum = V::dpbusd(V::izero(), qa, V::bcast32(q));
              sum = V::dpbusd(sum, qb, V::bcast32(q + 4));
              sum = V::dpbusd(sum, qc, V::bcast32(q + 8));
              sum = V::dpbusd(sum, qd, V::bcast32(q + 12));
              total[t] = V::add32(total[t], V::mullo32(sum, V::template sra32<16>(scale)));  // scale in 32 bits
            } else {
              I p = V::add16(V::maddubs(qa, V::bcast32(q)), V::maddubs(qb, V::bcast32(q + 4)));
              p = V::add16(p, V::add16(V::maddubs(qc, V::bcast32(q + 8)), V::maddubs(qd, V::bcast32(q + 12))));
              total[t] = V::add32(total[t], V::madd16(p, scale));
            }
          }
        };
        sub_block.template operator()<0>();
        sub_block.template operator()<1>();
      }
      const F d = V::fload_f16(reinterpret_cast<const uint16_t*>(block));
      for (int t = 0; t < T; ++t) {
        acc[t] = V::fma(V::cvt(total[t]), V::fmul(d, V::fset1(a[t][b].d)), acc[t]);
      }
    }
    for (int t = 0; t < T; ++t) V::fstore(out + t * P, acc[t]);
  }
};

}  // namespace
}  // namespace specula::kernels
