// The 4-bit lookup types: IQ4_NL, IQ4_XS and MXFP4 weights keep their nibbles in the panel
// (as Q4_0's do, ~4.5 bits a weight) and the kernel turns them into their levels with one
// byte shuffle per weight vector against a 16-entry table: GGML's kvalues_iq4nl
// (kIq4Levels) or the doubled FP4 values (kMxfp4Values). Widening the levels to a byte each
// at packing doubled the bytes a product streams, and decoding is bound by those bytes.
// Part of the kernel algorithms written once over a vector layer V (cpu_kernel_templates.h
// says how they are compiled per SIMD level); in an unnamed namespace like all of them.
#pragma once

#include <cstdint>
#include <cstring>

#include "compute/cpu_kernel_table.h"
#include "compute/cpu_kernel_tiles.h"
#include "compute/cpu_kernels_quantized.h"

namespace specula::kernels {
namespace {

enum class LookupType { IQ4_NL, IQ4_XS, MXFP4 };

// A 16-entry byte table repeated in each 16-byte lane (pshufb looks up within the lane).
struct alignas(64) ByteTable {
  uint8_t b[64];
};
constexpr ByteTable lookup_table(const int8_t (&levels)[16], int bias) {
  ByteTable t{};
  for (int i = 0; i < 64; ++i) t.b[i] = static_cast<uint8_t>(levels[i % 16] + bias);
  return t;
}
// [biased]: the levels as int8, or plus 128 as uint8 (VNNI's unsigned weights)
constexpr ByteTable kIq4Tables[2] = {lookup_table(kIq4Levels, 0), lookup_table(kIq4Levels, 128)};
constexpr ByteTable kMxfp4Tables[2] = {lookup_table(kMxfp4Values, 0), lookup_table(kMxfp4Values, 128)};

// madd16 with these picks the low (high) signed 16-bit half of each 32-bit lane.
constexpr int32_t kPickLow = 1, kPickHigh = 1 << 16;

// Levels are signed, so the products follow Q8_0Panel's: with VNNI the table gives the levels
// plus 128 as unsigned bytes for dpbusd, and the activation offsets (-128 · Σq) undo the
// bias; without, |level| times the activations signed like the level (maddubs, at most
// 2 · 127 · 127 per pair: no saturation). Per 32-value (sub-)block and token, the exact
// integer sum, then acc += float(sum) · (row scale · token scale) as Q8_0's.
// The row scales: IQ4_NL an f16 d, MXFP4 the half scale 2^(e - 128) as a bf16 (every such
// power of two, subnormal ones included, is a bf16: the f32's top 16 bits), IQ4_XS the
// f16 d times the sub-block's 6-bit scale minus 32, multiplied here (exact in f32: 11 by 6
// bits), from signed byte pairs as Q4_K's panel keeps its scales.
template <class V, LookupType kType>
struct LookupPanel {
  static constexpr int kBias = V::kVnni ? 128 : 0;
  static constexpr int kMaxTokens = kQuantTokens<V>;
  static constexpr bool kSuper = kType == LookupType::IQ4_XS;  // 256-value blocks
  static constexpr size_t block_bytes(int P) {
    return kType == LookupType::IQ4_NL  ? iq4_nl_panel_block(P)
           : kType == LookupType::MXFP4 ? mxfp4_panel_block(P)
                                        : iq4_xs_panel_block(P);
  }

  template <int T, bool kPrefetch>
  static void tile(const uint8_t* panel, int64_t cols, const uint8_t* x, size_t x_stride,
                   float* out) {
    using F = typename V::F;
    using I = typename V::I;
    constexpr int P = V::kLanes;
    Q8Row a[T];
    F acc[T];
    for (int t = 0; t < T; ++t) a[t] = q8_row(x + t * x_stride, cols), acc[t] = V::fzero();
    const I table = V::iload((kType == LookupType::MXFP4 ? kMxfp4Tables : kIq4Tables)[V::kVnni].b);
    const I low = V::set8(0x0F);
    // 32 values of every row: 4 vectors of nibbles (values 4v.. low, 16 + 4v.. high) at
    // `nibbles`, the rows' scales d, activation block q
    const auto sub_block = [&](const uint8_t* nibbles, F d, int64_t q) __attribute__((always_inline)) {
      I sum[T];
      for (int t = 0; t < T; ++t) sum[t] = V::kVnni ? V::bcast32(a[t].offsets + q) : V::izero();
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        const I raw = V::iload(nibbles + v * 4 * P);
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const I w = V::shuffle8(table, V::and_(h == 0 ? raw : V::template srl16<4>(raw), low));
          const int c = v + 4 * h;  // values 4c..4c+3
          if constexpr (V::kVnni) {
            for (int t = 0; t < T; ++t) sum[t] = V::dpbusd(sum[t], w, V::bcast32(a[t].values + 32 * q + 4 * c));
          } else {
            const I abs_w = V::abs8(w);
            for (int t = 0; t < T; ++t) {
              const I xs = V::sign8(V::bcast32(a[t].values + 32 * q + 4 * c), w);
              sum[t] = V::add32(sum[t], V::madd16(V::maddubs(abs_w, xs), V::set16(1)));
            }
          }
        }
      }
      for (int t = 0; t < T; ++t) acc[t] = V::fma(V::cvt(sum[t]), V::fmul(d, V::fset1(a[t].scales[q])), acc[t]);
    };
    if constexpr (!kSuper) {
      for (int64_t b = 0; b < cols / 32; ++b) {
        const uint8_t* block = panel + b * block_bytes(P);
        if constexpr (kPrefetch) prefetch_ahead<(T == 1 ? 4096 : 8192)>(block, block_bytes(P));
        const auto* scale = reinterpret_cast<const uint16_t*>(block);
        const F d = kType == LookupType::MXFP4 ? V::fload_bf16(scale) : V::fload_f16(scale);
        sub_block(block + 2 * P, d, b);
      }
    } else {
      const I pick_low = V::bcast32(&kPickLow), pick_high = V::bcast32(&kPickHigh);
      for (int64_t b = 0; b < cols / 256; ++b) {
        const uint8_t* block = panel + b * block_bytes(P);
        if constexpr (kPrefetch) prefetch_ahead<(T == 1 ? 4096 : 8192)>(block, block_bytes(P));
        const F d = V::fload_f16(reinterpret_cast<const uint16_t*>(block));
        const auto* scales = reinterpret_cast<const int8_t*>(block + 2 * P);
        const uint8_t* nibbles = block + 10 * P;
        for (int g = 0; g < 4; ++g) {  // sub-blocks 2g and 2g + 1
          const I pair = V::widen_s8_16(scales + 2 * P * g);
          for (int h = 0; h < 2; ++h) {
            const int j = 2 * g + h;
            const F dj = V::fmul(d, V::cvt(V::madd16(pair, h == 0 ? pick_low : pick_high)));
            sub_block(nibbles + 16 * P * j, dj, 8 * b + j);
          }
        }
      }
    }
    for (int t = 0; t < T; ++t) V::fstore(out + t * P, acc[t]);
  }
};

}  // namespace
}  // namespace specula::kernels
