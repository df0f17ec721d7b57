// The vector primitives of cpu_kernel_templates.h on AVX-512 F/BW/VL/DQ + VNNI: 16 lanes.
// Each is one instruction (or the fixed reduction tree of Avx2Vec / Emu512Vec, which runs
// the same algorithms on AVX2 machines and in their tests). The zero-masked forms of some
// conversions avoid GCC 12's spurious uninitialized warnings in the unmasked ones.
// Included by cpu_kernels_avx512.cpp alone, after its target pragma.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "compute/cpu_kernel_table.h"

namespace specula::kernels {
namespace {

struct Avx512Vec {
  static constexpr int kLanes = 16;
  static constexpr int kRegisters = 32;
  static constexpr bool kVnni = true;
  using F = __m512;
  using I = __m512i;

  // ---- float -------------------------------------------------------------------------
  static F fzero() { return _mm512_setzero_ps(); }
  static F fload(const float* p) { return _mm512_loadu_ps(p); }
  static F fset1(float x) { return _mm512_set1_ps(x); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fmul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fmax(F a, F b) { return _mm512_maskz_max_ps(0xFFFF, a, b); }
  static F fabs(F a) {
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7FFFFFFF)));
  }
  static F fround(F a) {
    return _mm512_maskz_roundscale_ps(0xFFFF, a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static F fload_f16(const uint16_t* p) {
    return _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F fload_bf16(const uint16_t* p) {
    const __m512i wide =
        _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, wide, 16));
  }
  static F cvt(I a) { return _mm512_maskz_cvtepi32_ps(0xFFFF, a); }
  // 2^n for whole n in [-126, 127], built in the exponent bits
  static F pow2(I n) {
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_add_epi32(0xFFFF, n, _mm512_set1_epi32(127)), 23));
  }
  static void fstore(float* p, F a) { _mm512_storeu_ps(p, a); }
  static __m256 low(F a) {
    return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(a), 0));
  }
  static __m256 high(F a) {
    return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(a), 1));
  }
  // lanes i and i + 8 first, then ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7))
  static float hsum(F a) {
    const __m256 s = _mm256_add_ps(low(a), high(a));
    const __m256 pairs = _mm256_hadd_ps(s, s);
    const __m256 quads = _mm256_hadd_ps(pairs, pairs);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(quads), _mm256_extractf128_ps(quads, 1)));
  }
  static float hmax(F a) {
    const __m256 m8 = _mm256_max_ps(low(a), high(a));
    const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
    const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    return _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
  }
  // Hide a value from the optimizer (peak loops), or keep a result alive.
  static void opaque(F& a) { asm volatile("" : "+v"(a)); }
  static void opaque(I& a) { asm volatile("" : "+v"(a)); }
  static void keep(float x) { asm volatile("" : : "v"(x)); }

  // ---- integer -----------------------------------------------------------------------
  static I izero() { return _mm512_setzero_si512(); }
  static I iload(const void* p) { return _mm512_loadu_si512(p); }
  static I bcast32(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
  }
  static I set8(int v) { return _mm512_set1_epi8(static_cast<char>(v)); }
  static I set16(int v) { return _mm512_set1_epi16(static_cast<short>(v)); }
  static I and_(I a, I b) { return _mm512_and_si512(a, b); }
  static I or_(I a, I b) { return _mm512_or_si512(a, b); }
  template <int k>
  static I srl16(I a) { return _mm512_srli_epi16(a, k); }
  template <int k>
  static I sll16(I a) { return _mm512_slli_epi16(a, k); }
  static I add16(I a, I b) { return _mm512_add_epi16(a, b); }
  static I add32(I a, I b) { return _mm512_add_epi32(a, b); }
  static I sub32(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I maddubs(I u, I s) { return _mm512_maddubs_epi16(u, s); }
  static I madd16(I a, I b) { return _mm512_madd_epi16(a, b); }
  static I dpbusd(I acc, I u, I s) { return _mm512_dpbusd_epi32(acc, u, s); }
  static I mullo32(I a, I b) { return _mm512_mullo_epi32(a, b); }
  template <int k>
  static I srl32(I a) { return _mm512_maskz_srli_epi32(0xFFFF, a, k); }
  template <int k>
  static I sra32(I a) { return _mm512_maskz_srai_epi32(0xFFFF, a, k); }
  static I widen_u8_16(const uint8_t* p) {
    return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static I widen_s8_16(const int8_t* p) {
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static I widen_u8_32(const uint8_t* p) {  // 16 bytes, one to a 32-bit lane (maskz: as srl32)
    return _mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I shuffle8(I a, I pattern) { return _mm512_shuffle_epi8(a, pattern); }
  static I cvt_f2i(F a) { return _mm512_maskz_cvtps_epi32(0xFFFF, a); }
  static void store_i8(int8_t* p, I a) {  // of values in [-128, 127]
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_maskz_cvtepi32_epi8(0xFFFF, a));
  }
};

}  // namespace
}  // namespace specula::kernels
