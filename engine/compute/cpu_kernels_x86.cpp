// AVX2 and AVX-512 kernels. Each function carries its own target attribute, so this
// file is compiled for baseline x86-64 and the variants run only where best_simd_level
// found the instructions.
//
// Float weights: one vector accumulator per (row, token), fused multiply-adds in column
// order, then a fixed horizontal sum; on AVX-512, blocks of 4 rows share each activation
// load when there are several tokens. Q8_0 / Q4_0: per 32-value block an exact integer
// dot product (AVX2: |w| times sign-adjusted activations with maddubs + madd; AVX-512:
// two blocks per VNNI vpdpbusd on unsigned weights with precomputed activation offsets),
// converted to float and accumulated with the block's scale. The K-quants use the
// portable tiles, vectorized by the compiler for the target.
#include "compute/cpu_kernels_impl.h"

#if defined(__x86_64__)

#include <immintrin.h>

#define SPECULA_AVX2 __attribute__((target("avx2,fma,f16c")))
#define SPECULA_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")))

namespace specula::kernels {
namespace {

// ---- AVX2 ----------------------------------------------------------------------------

SPECULA_AVX2 inline float hsum256(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

template <int T>
SPECULA_AVX2 inline void f32_tile_avx2(const uint8_t* w, const uint8_t* x, size_t x_stride,
                                       int64_t cols, float* out) {
  const auto* wf = reinterpret_cast<const float*>(w);
  __m256 acc[T];
  float tail[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps(), tail[t] = 0.0f;
  int64_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    const __m256 wv = _mm256_loadu_ps(wf + c);
    for (int t = 0; t < T; ++t) {
      const float* xt = reinterpret_cast<const float*>(x + t * x_stride);
      acc[t] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt + c), acc[t]);
    }
  }
  for (; c < cols; ++c) {
    for (int t = 0; t < T; ++t)
      tail[t] += wf[c] * reinterpret_cast<const float*>(x + t * x_stride)[c];
  }
  for (int t = 0; t < T; ++t) out[t] = hsum256(acc[t]) + tail[t];
}

template <int T>
SPECULA_AVX2 inline void f16_tile_avx2(const uint8_t* w, const uint8_t* x, size_t x_stride,
                                       int64_t cols, float* out) {
  const auto* wh = reinterpret_cast<const uint16_t*>(w);
  __m256 acc[T];
  float tail[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps(), tail[t] = 0.0f;
  int64_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    const __m256 wv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wh + c)));
    for (int t = 0; t < T; ++t) {
      const float* xt = reinterpret_cast<const float*>(x + t * x_stride);
      acc[t] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt + c), acc[t]);
    }
  }
  for (; c < cols; ++c) {
    const float wc = _cvtsh_ss(wh[c]);
    for (int t = 0; t < T; ++t) tail[t] += wc * reinterpret_cast<const float*>(x + t * x_stride)[c];
  }
  for (int t = 0; t < T; ++t) out[t] = hsum256(acc[t]) + tail[t];
}

template <int T>
SPECULA_AVX2 inline void bf16_tile_avx2(const uint8_t* w, const uint8_t* x, size_t x_stride,
                                        int64_t cols, float* out) {
  const auto* wh = reinterpret_cast<const uint16_t*>(w);
  __m256 acc[T];
  float tail[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps(), tail[t] = 0.0f;
  int64_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wh + c)));
    const __m256 wv = _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    for (int t = 0; t < T; ++t) {
      const float* xt = reinterpret_cast<const float*>(x + t * x_stride);
      acc[t] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt + c), acc[t]);
    }
  }
  for (; c < cols; ++c) {
    const uint32_t bits = static_cast<uint32_t>(wh[c]) << 16;
    float wc;
    std::memcpy(&wc, &bits, 4);
    for (int t = 0; t < T; ++t) tail[t] += wc * reinterpret_cast<const float*>(x + t * x_stride)[c];
  }
  for (int t = 0; t < T; ++t) out[t] = hsum256(acc[t]) + tail[t];
}

// 8 lane sums of |w| * (x signed like w) over 32 int8 pairs: lane i covers bytes 4i..4i+3.
SPECULA_AVX2 inline __m256i block_dot_avx2(__m256i abs_w, __m256i w, __m256i x) {
  const __m256i pairs = _mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

template <int T>
SPECULA_AVX2 inline void q8_0_tile_avx2(const uint8_t* w, const uint8_t* x, size_t x_stride,
                                        int64_t cols, float* out) {
  const auto* wb = reinterpret_cast<const BlockQ8_0*>(w);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < cols / 32; ++b) {
    const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].q));
    const __m256i abs_w = _mm256_sign_epi8(wq, wq);
    const float d = _cvtsh_ss(wb[b].d);
    for (int t = 0; t < T; ++t) {
      const Q8Row a = q8_row(x + t * x_stride, cols);
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.values + 32 * b));
      const __m256 sums = _mm256_cvtepi32_ps(block_dot_avx2(abs_w, wq, xq));
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * a.scales[8 * b]), sums, acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t] = hsum256(acc[t]);
}

// A Q4_0 block's 32 values as int8 in [-8, 7], in element order.
SPECULA_AVX2 inline __m256i q4_0_values_avx2(const uint8_t* q) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(0x0F)), _mm256_set1_epi8(8));
}

template <int T>
SPECULA_AVX2 inline void q4_0_tile_avx2(const uint8_t* w, const uint8_t* x, size_t x_stride,
                                        int64_t cols, float* out) {
  const auto* wb = reinterpret_cast<const BlockQ4_0*>(w);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < cols / 32; ++b) {
    const __m256i wq = q4_0_values_avx2(wb[b].q);
    const __m256i abs_w = _mm256_sign_epi8(wq, wq);
    const float d = _cvtsh_ss(wb[b].d);
    for (int t = 0; t < T; ++t) {
      const Q8Row a = q8_row(x + t * x_stride, cols);
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.values + 32 * b));
      const __m256 sums = _mm256_cvtepi32_ps(block_dot_avx2(abs_w, wq, xq));
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * a.scales[8 * b]), sums, acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t] = hsum256(acc[t]);
}

template <int T>
SPECULA_AVX2 inline void q4_k_tile_avx2(const uint8_t* w, const uint8_t* x, size_t x_stride,
                                        int64_t cols, float* out) {
  q4_k_tile<T>(w, x, x_stride, cols, out);
}

template <int T>
SPECULA_AVX2 inline void q6_k_tile_avx2(const uint8_t* w, const uint8_t* x, size_t x_stride,
                                        int64_t cols, float* out) {
  q6_k_tile<T>(w, x, x_stride, cols, out);
}

SPECULA_ROWS_KERNEL(SPECULA_AVX2, f32_rows_avx2, f32_tile_avx2)
SPECULA_ROWS_KERNEL(SPECULA_AVX2, f16_rows_avx2, f16_tile_avx2)
SPECULA_ROWS_KERNEL(SPECULA_AVX2, bf16_rows_avx2, bf16_tile_avx2)
SPECULA_ROWS_KERNEL(SPECULA_AVX2, q8_0_rows_avx2, q8_0_tile_avx2)
SPECULA_ROWS_KERNEL(SPECULA_AVX2, q4_0_rows_avx2, q4_0_tile_avx2)
SPECULA_ROWS_KERNEL(SPECULA_AVX2, q4_k_rows_avx2, q4_k_tile_avx2)
SPECULA_ROWS_KERNEL(SPECULA_AVX2, q6_k_rows_avx2, q6_k_tile_avx2)

// ---- AVX-512 -------------------------------------------------------------------------

SPECULA_AVX512 inline float hsum512(__m512 v) {
  const __m256 s =
      _mm256_add_ps(_mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(v), 0)),
                    _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(v), 1)));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

SPECULA_AVX512 inline float hsum256_avx512(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// The 16-float weight vector at column c of each float type; the tail uses a mask so the
// missing lanes are zero and add nothing. (The zero-masked forms of the conversions
// avoid GCC 12's spurious uninitialized warnings in the unmasked ones.)
struct F32Weights {
  SPECULA_AVX512 static __m512 load(const uint8_t* w, int64_t c) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(w) + c);
  }
  SPECULA_AVX512 static __m512 load_tail(const uint8_t* w, int64_t c, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(w) + c);
  }
};
struct F16Weights {
  SPECULA_AVX512 static __m512 load(const uint8_t* w, int64_t c) {
    return _mm512_maskz_cvtph_ps(0xFFFF,
                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2 * c)));
  }
  SPECULA_AVX512 static __m512 load_tail(const uint8_t* w, int64_t c, __mmask16 m) {
    return _mm512_maskz_cvtph_ps(0xFFFF, _mm256_maskz_loadu_epi16(m, w + 2 * c));
  }
};
struct BF16Weights {
  SPECULA_AVX512 static __m512 load(const uint8_t* w, int64_t c) {
    const __m512i wide = _mm512_maskz_cvtepu16_epi32(
        0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2 * c)));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, wide, 16));
  }
  SPECULA_AVX512 static __m512 load_tail(const uint8_t* w, int64_t c, __mmask16 m) {
    const __m512i wide =
        _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_maskz_loadu_epi16(m, w + 2 * c));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, wide, 16));
  }
};

// R weight rows times T tokens with R * T accumulators: each loaded weight vector meets
// T activation vectors and each activation vector R weight vectors, so activations that
// no longer fit in L1 (long rows, many tokens) cost a quarter of the loads. Accumulator
// (r, t) sees the columns in the same order whatever R and T are.
template <class Weights, int R, int T>
SPECULA_AVX512 inline void float_block_avx512(const uint8_t* w, size_t w_stride, const uint8_t* x,
                                              size_t x_stride, int64_t cols, float* y,
                                              int64_t y_stride) {
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = Weights::load(w + r * w_stride, c);
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_loadu_ps(reinterpret_cast<const float*>(x + t * x_stride) + c);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (c < cols) {
    const __mmask16 m = static_cast<__mmask16>((1u << (cols - c)) - 1);
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = Weights::load_tail(w + r * w_stride, c, m);
    for (int t = 0; t < T; ++t) {
      const __m512 xv =
          _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(x + t * x_stride) + c);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) y[t * y_stride + r] = hsum512(acc[r][t]);
  }
}

// R rows against every token, in tiles of 4, 2 and 1 tokens.
template <class Weights, int R>
SPECULA_AVX512 inline void float_rows_block_avx512(const uint8_t* w, size_t w_stride,
                                                   const uint8_t* x, size_t x_stride, int n,
                                                   int64_t cols, float* y, int64_t y_stride) {
  for (int t = 0; t < n;) {
    const uint8_t* xt = x + t * x_stride;
    float* yt = y + t * y_stride;
    if (n - t >= 4) {
      float_block_avx512<Weights, R, 4>(w, w_stride, xt, x_stride, cols, yt, y_stride);
      t += 4;
    } else if (n - t >= 2) {
      float_block_avx512<Weights, R, 2>(w, w_stride, xt, x_stride, cols, yt, y_stride);
      t += 2;
    } else {
      float_block_avx512<Weights, R, 1>(w, w_stride, xt, x_stride, cols, yt, y_stride);
      t += 1;
    }
  }
}

// Rows in blocks of 4, then one at a time. A single token (decoding) streams one row at a
// time: there is no activation traffic to save, and one weight stream keeps the
// prefetcher ahead. Either way each output gets the same bits.
template <class Weights>
SPECULA_AVX512 inline void float_rows_avx512(const uint8_t* w, size_t w_stride, int64_t rows,
                                             int64_t cols, const uint8_t* x, size_t x_stride, int n,
                                             float* y, int64_t y_stride) {
  int64_t r = 0;
  for (; n > 1 && r + 4 <= rows; r += 4) {
    float_rows_block_avx512<Weights, 4>(w + r * w_stride, w_stride, x, x_stride, n, cols, y + r,
                                        y_stride);
  }
  for (; r < rows; ++r) {
    float_rows_block_avx512<Weights, 1>(w + r * w_stride, w_stride, x, x_stride, n, cols, y + r,
                                        y_stride);
  }
}

SPECULA_AVX512 void f32_rows_avx512(const uint8_t* w, size_t w_stride, int64_t rows, int64_t cols,
                                    const uint8_t* x, size_t x_stride, int n, float* y,
                                    int64_t y_stride) {
  float_rows_avx512<F32Weights>(w, w_stride, rows, cols, x, x_stride, n, y, y_stride);
}
SPECULA_AVX512 void f16_rows_avx512(const uint8_t* w, size_t w_stride, int64_t rows, int64_t cols,
                                    const uint8_t* x, size_t x_stride, int n, float* y,
                                    int64_t y_stride) {
  float_rows_avx512<F16Weights>(w, w_stride, rows, cols, x, x_stride, n, y, y_stride);
}
SPECULA_AVX512 void bf16_rows_avx512(const uint8_t* w, size_t w_stride, int64_t rows, int64_t cols,
                                     const uint8_t* x, size_t x_stride, int n, float* y,
                                     int64_t y_stride) {
  float_rows_avx512<BF16Weights>(w, w_stride, rows, cols, x, x_stride, n, y, y_stride);
}

// Q8_0 and Q4_0 with 512-bit VNNI, two blocks per vector. The weights become unsigned
// bytes (Q8_0: w + 128, Q4_0: the nibble, i.e. w + 8), so vpdpbusd multiplies them with
// the signed activations directly; starting each lane from the activations' precomputed
// -128 or -8 times its lane sum makes the integer result exactly the sum of w * x. Lanes
// 0..7 hold the even block of a pair, lanes 8..15 the odd one; an odd last block goes
// through a 256-bit accumulator of its own.

SPECULA_AVX512 inline __m512i join256(__m256i low, __m256i high) {
  const __m512i zero = _mm512_setzero_si512();
  return _mm512_maskz_inserti64x4(0xFF, _mm512_maskz_inserti64x4(0xFF, zero, low, 0), high, 1);
}

SPECULA_AVX512 inline __m512 pair_scales(uint16_t d0, uint16_t d1) {
  // both f16 scales in one register, converted together, then spread over 8 lanes each
  const __m128 both = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(d0 | (uint32_t{d1} << 16))));
  const __m512i spread = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_maskz_permutexvar_ps(0xFFFF, spread, _mm512_castps128_ps512(both));
}

// Two consecutive Q4_0 blocks' nibbles as 64 unsigned bytes in element order: one load
// per block, one shift, and a lane shuffle into [low a, high a, low b, high b].
SPECULA_AVX512 inline __m512i q4_0_pair_nibbles(const uint8_t* qa, const uint8_t* qb) {
  const __m256i packed = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qb)),
                                          _mm_loadu_si128(reinterpret_cast<const __m128i*>(qa)));
  const __m512i both = join256(packed, _mm256_srli_epi16(packed, 4));  // [a, b, a>>4, b>>4]
  return _mm512_and_si512(_mm512_maskz_shuffle_i64x2(0xFF, both, both, 0xD8),
                          _mm512_set1_epi8(0x0F));
}

SPECULA_AVX512 inline __m256i q4_0_nibbles(const uint8_t* q) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
                          _mm256_set1_epi8(0x0F));
}

SPECULA_AVX512 inline __m256i q8_0_biased(const int8_t* q) {
  return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)),
                          _mm256_set1_epi8(static_cast<char>(0x80)));
}

// Block b of a Q8_0 / Q4_0 row: its weights as unsigned bytes, and its f16 scale.
template <bool kQ8>
SPECULA_AVX512 inline __m256i unsigned_weights(const uint8_t* w, int64_t b) {
  return kQ8 ? q8_0_biased(reinterpret_cast<const BlockQ8_0*>(w)[b].q)
             : q4_0_nibbles(reinterpret_cast<const BlockQ4_0*>(w)[b].q);
}
template <bool kQ8>
SPECULA_AVX512 inline uint16_t block_scale(const uint8_t* w, int64_t b) {
  return kQ8 ? reinterpret_cast<const BlockQ8_0*>(w)[b].d
             : reinterpret_cast<const BlockQ4_0*>(w)[b].d;
}

// Offsets of the activations for bias 8 (Q4_0) or 128 (Q8_0 = 16 * 8).
template <bool kQ8>
SPECULA_AVX512 inline __m512i pair_offsets(const int32_t* offsets) {
  const __m512i o = _mm512_loadu_si512(offsets);
  return kQ8 ? _mm512_maskz_slli_epi32(0xFFFF, o, 4) : o;
}
template <bool kQ8>
SPECULA_AVX512 inline __m256i block_offsets(const int32_t* offsets) {
  const __m256i o = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offsets));
  return kQ8 ? _mm256_slli_epi32(o, 4) : o;
}

template <bool kQ8, int T>
SPECULA_AVX512 inline void q8_tile_avx512(const uint8_t* w, const uint8_t* x, size_t x_stride,
                                          int64_t cols, float* out) {
  const int64_t blocks = cols / 32;
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    const __m512i wq = kQ8 ? join256(unsigned_weights<kQ8>(w, b), unsigned_weights<kQ8>(w, b + 1))
                           : q4_0_pair_nibbles(reinterpret_cast<const BlockQ4_0*>(w)[b].q,
                                               reinterpret_cast<const BlockQ4_0*>(w)[b + 1].q);
    const __m512 d = pair_scales(block_scale<kQ8>(w, b), block_scale<kQ8>(w, b + 1));
    for (int t = 0; t < T; ++t) {
      const Q8Row a = q8_row(x + t * x_stride, cols);
      const __m512i xq = _mm512_loadu_si512(a.values + 32 * b);
      const __m512i sums = _mm512_dpbusd_epi32(pair_offsets<kQ8>(a.offsets + 8 * b), wq, xq);
      const __m512 scaled =
          _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, sums), _mm512_loadu_ps(a.scales + 8 * b));
      acc[t] = _mm512_fmadd_ps(scaled, d, acc[t]);
    }
  }
  __m256 tail[T];
  for (int t = 0; t < T; ++t) tail[t] = _mm256_setzero_ps();
  if (b < blocks) {
    const __m256i wq = unsigned_weights<kQ8>(w, b);
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(block_scale<kQ8>(w, b)));
    for (int t = 0; t < T; ++t) {
      const Q8Row a = q8_row(x + t * x_stride, cols);
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.values + 32 * b));
      const __m256i sums = _mm256_dpbusd_epi32(block_offsets<kQ8>(a.offsets + 8 * b), wq, xq);
      const __m256 scaled =
          _mm256_mul_ps(_mm256_cvtepi32_ps(sums), _mm256_loadu_ps(a.scales + 8 * b));
      tail[t] = _mm256_fmadd_ps(scaled, d, tail[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t] = hsum512(acc[t]) + hsum256_avx512(tail[t]);
}

template <int T>
SPECULA_AVX512 inline void q8_0_tile_avx512(const uint8_t* w, const uint8_t* x, size_t s,
                                            int64_t cols, float* out) {
  q8_tile_avx512<true, T>(w, x, s, cols, out);
}
template <int T>
SPECULA_AVX512 inline void q4_0_tile_avx512(const uint8_t* w, const uint8_t* x, size_t s,
                                            int64_t cols, float* out) {
  q8_tile_avx512<false, T>(w, x, s, cols, out);
}

template <int T>
SPECULA_AVX512 inline void q4_k_tile_avx512(const uint8_t* w, const uint8_t* x, size_t x_stride,
                                            int64_t cols, float* out) {
  q4_k_tile<T>(w, x, x_stride, cols, out);
}

template <int T>
SPECULA_AVX512 inline void q6_k_tile_avx512(const uint8_t* w, const uint8_t* x, size_t x_stride,
                                            int64_t cols, float* out) {
  q6_k_tile<T>(w, x, x_stride, cols, out);
}

SPECULA_ROWS_KERNEL(SPECULA_AVX512, q8_0_rows_avx512, q8_0_tile_avx512)
SPECULA_ROWS_KERNEL(SPECULA_AVX512, q4_0_rows_avx512, q4_0_tile_avx512)
SPECULA_ROWS_KERNEL(SPECULA_AVX512, q4_k_rows_avx512, q4_k_tile_avx512)
SPECULA_ROWS_KERNEL(SPECULA_AVX512, q6_k_rows_avx512, q6_k_tile_avx512)

}  // namespace

const KernelTable& avx2_kernels() {
  static const KernelTable table{f32_rows_avx2,  f16_rows_avx2,  bf16_rows_avx2, q8_0_rows_avx2,
                                 q4_0_rows_avx2, q4_k_rows_avx2, q6_k_rows_avx2};
  return table;
}

const KernelTable& avx512_kernels() {
  static const KernelTable table{f32_rows_avx512,  f16_rows_avx512,  bf16_rows_avx512,
                                 q8_0_rows_avx512, q4_0_rows_avx512, q4_k_rows_avx512,
                                 q6_k_rows_avx512};
  return table;
}

}  // namespace specula::kernels

#else  // not x86-64: only the portable kernels exist

namespace specula::kernels {
const KernelTable& avx2_kernels() { return portable_kernels(); }
const KernelTable& avx512_kernels() { return portable_kernels(); }
}  // namespace specula::kernels

#endif
