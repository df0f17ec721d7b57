// Attention over the KV cache in 8-lane vectors.
// Part of the kernel algorithms written once over a vector layer V (cpu_kernel_templates.h
// says how they are compiled per SIMD level); in an unnamed namespace like all of them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "compute/cpu_kernel_table.h"
#include "compute/cpu_kernels_exp.h"

namespace specula::kernels {
namespace {

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

// s[0 .. length) <- softmax(s), in place; with a sink logit, exp(sink - max) is added to the
// denominator after the scores' sum (max over the scores and the sink).
template <class V>
inline void softmax_row(float* s, int length, const float* sink) {
  using F = typename V::F;
  const int whole = length / 8 * 8;
  const float max = sink ? std::max(row_max<V>(s, length), *sink) : row_max<V>(s, length);
  const F shift = V::fset1(-max), one = V::fset1(1.0f);
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
  if (sink) sum += std::exp(*sink - max);
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

  for (int h = 0; h < heads; ++h) {
    softmax_row<V>(a.scores + static_cast<size_t>(h) * length, length, a.sinks ? a.sinks + h : nullptr);
  }

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

}  // namespace
}  // namespace specula::kernels
