// The peak multiply-add rate of each kernel's inner step.
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
    case TensorType::Q5_0:
    case TensorType::Q5_1:
    case TensorType::Q5_K:
      return peak_block32<V, false>(rounds);
    case TensorType::IQ4_XS:
    case TensorType::IQ4_NL:
    case TensorType::MXFP4:
      return peak_block32<V, true>(rounds);
    case TensorType::Q4_K:
      return peak_super_block<V, false>(rounds);
    case TensorType::Q6_K:
    case TensorType::Q2_K:
    case TensorType::Q3_K:
      return peak_super_block<V, true>(rounds);
    default:
      return 0.0;
  }
}

}  // namespace
}  // namespace specula::kernels
