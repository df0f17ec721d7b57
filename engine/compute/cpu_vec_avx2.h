// The vector primitives of cpu_kernel_templates.h on AVX2 + FMA + F16C (Avx2Vec: 8 lanes),
// and 16 lanes on pairs of AVX2 registers: Avx2PairVec, whose rows share each activation
// broadcast (the AVX2 level's Q4_K panels), and Emu512Vec, the AVX-512 kernels' primitives
// with the VNNI product emulated, which lets an AVX2 machine run and test the 16-lane
// algorithms: lane layouts, panel widths, the VNNI product. Every pair operation is the
// AVX-512 instruction's definition applied to the low and high 256 bits, which holds because
// every primitive here acts within 128-bit lanes or lane by lane.
// Included by cpu_kernels_avx2.cpp alone, after its target pragma.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "compute/cpu_kernel_table.h"

namespace specula::kernels {
namespace {

struct Avx2Vec {
  static constexpr int kLanes = 8;
  static constexpr int kRegisters = 16;
  static constexpr bool kVnni = false;
  using F = __m256;
  using I = __m256i;

  // ---- float -------------------------------------------------------------------------
  static F fzero() { return _mm256_setzero_ps(); }
  static F fload(const float* p) { return _mm256_loadu_ps(p); }
  static F fset1(float x) { return _mm256_set1_ps(x); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fmul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fmax(F a, F b) { return _mm256_max_ps(a, b); }
  static F fabs(F a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static F fround(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F fload_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static F fload_bf16(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static F cvt(I a) { return _mm256_cvtepi32_ps(a); }
  // 2^n for whole n in [-126, 127], built in the exponent bits
  static F pow2(I n) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23)); }
  static void fstore(float* p, F a) { _mm256_storeu_ps(p, a); }
  // ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)): the tree every 8-lane sum uses
  static float hsum(F a) {
    const __m256 pairs = _mm256_hadd_ps(a, a);
    const __m256 quads = _mm256_hadd_ps(pairs, pairs);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(quads), _mm256_extractf128_ps(quads, 1)));
  }
  // hsum of 8 vectors at once, with the same tree for each
  static void hsums8(const F* acc, float* out) {
    const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
    const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(acc[4], acc[5]), _mm256_hadd_ps(acc[6], acc[7]));
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                                        _mm256_permute2f128_ps(u0, u1, 0x31)));
  }
  static float hmax(F a) {
    const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    return _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
  }
  // Hide a value from the optimizer (peak loops), or keep a result alive.
  static void opaque(F& a) { asm volatile("" : "+x"(a)); }
  static void opaque(I& a) { asm volatile("" : "+x"(a)); }
  static void keep(float x) { asm volatile("" : : "x"(x)); }

  // ---- integer -----------------------------------------------------------------------
  static I izero() { return _mm256_setzero_si256(); }
  static I iload(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static I bcast32(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
  }
  static I set8(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }
  static I set16(int v) { return _mm256_set1_epi16(static_cast<short>(v)); }
  static I and_(I a, I b) { return _mm256_and_si256(a, b); }
  static I or_(I a, I b) { return _mm256_or_si256(a, b); }
  template <int k>
  static I srl16(I a) { return _mm256_srli_epi16(a, k); }
  template <int k>
  static I sll16(I a) { return _mm256_slli_epi16(a, k); }
  static I add16(I a, I b) { return _mm256_add_epi16(a, b); }
  // Saturating: the same sum where it cannot overflow, and one the compiler may not reassociate
  static I adds16(I a, I b) { return _mm256_adds_epi16(a, b); }
  static I add32(I a, I b) { return _mm256_add_epi32(a, b); }
  static I sub32(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I maddubs(I u, I s) { return _mm256_maddubs_epi16(u, s); }
  static I madd16(I a, I b) { return _mm256_madd_epi16(a, b); }
  static I abs8(I a) { return _mm256_abs_epi8(a); }
  static I sign8(I a, I b) { return _mm256_sign_epi8(a, b); }
  static I widen_u8_16(const uint8_t* p) {
    return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I widen_s8_16(const int8_t* p) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I widen_u8_32(const uint8_t* p) {  // 8 bytes, one to a 32-bit lane
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static I shuffle8(I a, I pattern) { return _mm256_shuffle_epi8(a, pattern); }
  static I cvt_f2i(F a) { return _mm256_cvtps_epi32(a); }
  static void store_i8(int8_t* p, I a) {  // of values in [-128, 127]
    const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi16(words, words));
  }
  // Exact VNNI product: acc + the sum of 4 adjacent u8 · s8 products in each 32-bit lane
  // (the even and odd bytes widened to 16 bits and multiplied with madd).
  static I dpbusd(I acc, I u, I s) {
    const __m256i u_even = _mm256_and_si256(u, _mm256_set1_epi16(0x00FF));
    const __m256i u_odd = _mm256_srli_epi16(u, 8);
    const __m256i s_even = _mm256_srai_epi16(_mm256_slli_epi16(s, 8), 8);
    const __m256i s_odd = _mm256_srai_epi16(s, 8);
    return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(u_even, s_even),
                                                  _mm256_madd_epi16(u_odd, s_odd)));
  }
  static I mullo32(I a, I b) { return _mm256_mullo_epi32(a, b); }
  template <int k>
  static I srl32(I a) { return _mm256_srli_epi32(a, k); }
  template <int k>
  static I sra32(I a) { return _mm256_srai_epi32(a, k); }
};

// 16 lanes on two AVX2 registers, with AVX2's own products (maddubs, no VNNI) and its 16
// registers (8 pairs: tiles sized as for Avx2Vec). A broadcast feeds both halves, so a tile
// of 16 rows issues half the broadcasts per product of an 8-row one. AVX2's Q4_K tile is
// bound by the instructions it issues (a broadcast, a product and a 16-bit sum per 32
// multiply-adds, and the unpacking), not by its products: on 16 rows, in cache on one Zen 4
// core, 2 to 8 tokens ran 1.03x to 1.24x as fast as on 8 rows, 16 tokens 0.93x to 1.10x
// (docs/cpu_backend.md).
struct Avx2PairVec {
  static constexpr int kLanes = 16;
  static constexpr int kRegisters = 16;
  static constexpr bool kVnni = false;
  struct F {
    __m256 lo, hi;  // lanes 0..7 and 8..15
  };
  struct I {
    __m256i lo, hi;  // bytes 0..31 and 32..63
  };
  using H = Avx2Vec;

  // ---- float -------------------------------------------------------------------------
  static F fzero() { return {H::fzero(), H::fzero()}; }
  static F fload(const float* p) { return {H::fload(p), H::fload(p + 8)}; }
  static F fset1(float x) { return {H::fset1(x), H::fset1(x)}; }
  static F fma(F a, F b, F c) { return {H::fma(a.lo, b.lo, c.lo), H::fma(a.hi, b.hi, c.hi)}; }
  static F fmul(F a, F b) { return {H::fmul(a.lo, b.lo), H::fmul(a.hi, b.hi)}; }
  static F fmax(F a, F b) { return {H::fmax(a.lo, b.lo), H::fmax(a.hi, b.hi)}; }
  static F fabs(F a) { return {H::fabs(a.lo), H::fabs(a.hi)}; }
  static F fround(F a) { return {H::fround(a.lo), H::fround(a.hi)}; }
  static F fload_f16(const uint16_t* p) { return {H::fload_f16(p), H::fload_f16(p + 8)}; }
  static F fload_bf16(const uint16_t* p) { return {H::fload_bf16(p), H::fload_bf16(p + 8)}; }
  static F cvt(I a) { return {H::cvt(a.lo), H::cvt(a.hi)}; }
  static F pow2(I n) { return {H::pow2(n.lo), H::pow2(n.hi)}; }
  static void fstore(float* p, F a) {
    H::fstore(p, a.lo);
    H::fstore(p + 8, a.hi);
  }
  // lanes i and i + 8 first, then the 8-lane tree
  static float hsum(F a) { return H::hsum(_mm256_add_ps(a.lo, a.hi)); }
  static float hmax(F a) { return H::hmax(H::fmax(a.lo, a.hi)); }
  static void opaque(F& a) { H::opaque(a.lo), H::opaque(a.hi); }
  static void opaque(I& a) { H::opaque(a.lo), H::opaque(a.hi); }
  static void keep(float x) { H::keep(x); }

  // ---- integer -----------------------------------------------------------------------
  static I izero() { return {H::izero(), H::izero()}; }
  static I iload(const void* p) {
    return {H::iload(p), H::iload(static_cast<const uint8_t*>(p) + 32)};
  }
  static I bcast32(const void* p) {  // one broadcast for both halves
    const __m256i v = H::bcast32(p);
    return {v, v};
  }
  static I set8(int v) { return {H::set8(v), H::set8(v)}; }
  static I set16(int v) { return {H::set16(v), H::set16(v)}; }
  static I and_(I a, I b) { return {H::and_(a.lo, b.lo), H::and_(a.hi, b.hi)}; }
  static I or_(I a, I b) { return {H::or_(a.lo, b.lo), H::or_(a.hi, b.hi)}; }
  template <int k>
  static I srl16(I a) { return {H::srl16<k>(a.lo), H::srl16<k>(a.hi)}; }
  template <int k>
  static I sll16(I a) { return {H::sll16<k>(a.lo), H::sll16<k>(a.hi)}; }
  static I add16(I a, I b) { return {H::add16(a.lo, b.lo), H::add16(a.hi, b.hi)}; }
  static I adds16(I a, I b) { return {H::adds16(a.lo, b.lo), H::adds16(a.hi, b.hi)}; }
  static I add32(I a, I b) { return {H::add32(a.lo, b.lo), H::add32(a.hi, b.hi)}; }
  static I sub32(I a, I b) { return {H::sub32(a.lo, b.lo), H::sub32(a.hi, b.hi)}; }
  static I maddubs(I u, I s) { return {H::maddubs(u.lo, s.lo), H::maddubs(u.hi, s.hi)}; }
  static I madd16(I a, I b) { return {H::madd16(a.lo, b.lo), H::madd16(a.hi, b.hi)}; }
  static I widen_u8_16(const uint8_t* p) { return {H::widen_u8_16(p), H::widen_u8_16(p + 16)}; }
  static I widen_s8_16(const int8_t* p) { return {H::widen_s8_16(p), H::widen_s8_16(p + 16)}; }
  static I widen_u8_32(const uint8_t* p) { return {H::widen_u8_32(p), H::widen_u8_32(p + 8)}; }
  static I shuffle8(I a, I pattern) { return {H::shuffle8(a.lo, pattern.lo), H::shuffle8(a.hi, pattern.hi)}; }
  static I cvt_f2i(F a) { return {H::cvt_f2i(a.lo), H::cvt_f2i(a.hi)}; }
  static void store_i8(int8_t* p, I a) {
    H::store_i8(p, a.lo);
    H::store_i8(p + 8, a.hi);
  }
};

// The AVX-512 level's algorithms (32 registers, the VNNI product) on pairs of AVX2 registers.
struct Emu512Vec : Avx2PairVec {
  static constexpr int kRegisters = 32;
  static constexpr bool kVnni = true;
  static I dpbusd(I acc, I u, I s) { return {H::dpbusd(acc.lo, u.lo, s.lo), H::dpbusd(acc.hi, u.hi, s.hi)}; }
  static I mullo32(I a, I b) { return {H::mullo32(a.lo, b.lo), H::mullo32(a.hi, b.hi)}; }
  template <int k>
  static I srl32(I a) { return {H::srl32<k>(a.lo), H::srl32<k>(a.hi)}; }
  template <int k>
  static I sra32(I a) { return {H::sra32<k>(a.lo), H::sra32<k>(a.hi)}; }
};

}  // namespace
}  // namespace specula::kernels
