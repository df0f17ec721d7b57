// The vector primitives of cpu_kernel_templates.h in plain C++: 8 lanes of 32 bits held in
// arrays, each operation written as a loop over lanes with the semantics of the AVX2
// instruction of the same name (saturation included), so the templates run anywhere.
// Multiply-add is a multiply then an add (no fused rounding: there may be no FMA unit).
// Included by cpu_kernels.cpp alone.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "compute/cpu_kernel_table.h"

namespace specula::kernels {
namespace {

struct PortableVec {
  static constexpr int kLanes = 8;
  static constexpr int kRegisters = 16;
  static constexpr bool kVnni = false;

  struct F {
    float v[8];
  };
  struct I {
    uint8_t b[32];
  };

  template <class T>
  static T get(const I& a, int i) {
    T v;
    std::memcpy(&v, a.b + i * sizeof(T), sizeof(T));
    return v;
  }
  template <class T>
  static void put(I& a, int i, T v) {
    std::memcpy(a.b + i * sizeof(T), &v, sizeof(T));
  }

  // ---- float -------------------------------------------------------------------------
  static F fzero() { return F{}; }
  static F fload(const float* p) {
    F r;
    std::memcpy(r.v, p, sizeof(r.v));
    return r;
  }
  static F fset1(float x) {
    F r;
    std::fill(r.v, r.v + 8, x);
    return r;
  }
  static F fma(F a, F b, F c) {
    for (int i = 0; i < 8; ++i) c.v[i] = a.v[i] * b.v[i] + c.v[i];
    return c;
  }
  static F fmul(F a, F b) {
    for (int i = 0; i < 8; ++i) a.v[i] *= b.v[i];
    return a;
  }
  static F fmax(F a, F b) {
    for (int i = 0; i < 8; ++i) a.v[i] = std::max(a.v[i], b.v[i]);
    return a;
  }
  static F fabs(F a) {
    for (float& x : a.v) x = std::fabs(x);
    return a;
  }
  static F fround(F a) {  // to nearest, ties to even
    for (float& x : a.v) x = std::nearbyint(x);
    return a;
  }
  static F fload_f16(const uint16_t* p) {
    F r;
    for (int i = 0; i < 8; ++i) r.v[i] = fp16_to_fp32(p[i]);
    return r;
  }
  static F fload_bf16(const uint16_t* p) {
    F r;
    for (int i = 0; i < 8; ++i) r.v[i] = bf16_to_fp32(p[i]);
    return r;
  }
  static F cvt(const I& a) {
    F r;
    for (int i = 0; i < 8; ++i) r.v[i] = static_cast<float>(get<int32_t>(a, i));
    return r;
  }
  // 2^n for whole n in [-126, 127], built in the exponent bits
  static F pow2(const I& n) {
    F r;
    for (int i = 0; i < 8; ++i) {
      const uint32_t bits = static_cast<uint32_t>(get<int32_t>(n, i) + 127) << 23;
      std::memcpy(&r.v[i], &bits, 4);
    }
    return r;
  }
  static void fstore(float* p, F a) { std::memcpy(p, a.v, sizeof(a.v)); }
  static float hsum(F a) {
    return ((a.v[0] + a.v[1]) + (a.v[2] + a.v[3])) + ((a.v[4] + a.v[5]) + (a.v[6] + a.v[7]));
  }
  static void hsums8(const F* acc, float* out) {
    for (int j = 0; j < 8; ++j) out[j] = hsum(acc[j]);
  }
  static float hmax(F a) { return *std::max_element(a.v, a.v + 8); }
  // Hide a value from the optimizer (peak loops), or keep a result alive.
  static void opaque(F& a) { asm volatile("" : "+m"(a)); }
  static void opaque(I& a) { asm volatile("" : "+m"(a)); }
  static void keep(float x) { asm volatile("" : : "m"(x)); }

  // ---- integer -----------------------------------------------------------------------
  static I izero() { return I{}; }
  static I iload(const void* p) {
    I r;
    std::memcpy(r.b, p, 32);
    return r;
  }
  static I bcast32(const void* p) {
    I r;
    for (int i = 0; i < 8; ++i) std::memcpy(r.b + 4 * i, p, 4);
    return r;
  }
  static I set8(int v) {
    I r;
    std::memset(r.b, v & 0xFF, 32);
    return r;
  }
  static I set16(int v) {
    I r;
    for (int i = 0; i < 16; ++i) put<int16_t>(r, i, static_cast<int16_t>(v));
    return r;
  }
  static I and_(I a, const I& b) {
    for (int i = 0; i < 32; ++i) a.b[i] &= b.b[i];
    return a;
  }
  static I or_(I a, const I& b) {
    for (int i = 0; i < 32; ++i) a.b[i] |= b.b[i];
    return a;
  }
  template <int k>
  static I srl16(I a) {
    for (int i = 0; i < 16; ++i) put<uint16_t>(a, i, static_cast<uint16_t>(get<uint16_t>(a, i) >> k));
    return a;
  }
  template <int k>
  static I sll16(I a) {
    for (int i = 0; i < 16; ++i) put<uint16_t>(a, i, static_cast<uint16_t>(get<uint16_t>(a, i) << k));
    return a;
  }
  static I add16(I a, const I& b) {
    for (int i = 0; i < 16; ++i) {
      put<uint16_t>(a, i, static_cast<uint16_t>(get<uint16_t>(a, i) + get<uint16_t>(b, i)));
    }
    return a;
  }
  static I adds16(I a, const I& b) {  // saturating
    for (int i = 0; i < 16; ++i) {
      const int sum = get<int16_t>(a, i) + get<int16_t>(b, i);
      put<int16_t>(a, i, static_cast<int16_t>(std::clamp(sum, -32768, 32767)));
    }
    return a;
  }
  static I add32(I a, const I& b) {
    for (int i = 0; i < 8; ++i) {
      put<uint32_t>(a, i, get<uint32_t>(a, i) + get<uint32_t>(b, i));
    }
    return a;
  }
  static I sub32(I a, const I& b) {
    for (int i = 0; i < 8; ++i) {
      put<uint32_t>(a, i, get<uint32_t>(a, i) - get<uint32_t>(b, i));
    }
    return a;
  }
  // unsigned bytes of u times signed bytes of s, adjacent pairs summed with saturation
  static I maddubs(const I& u, const I& s) {
    I r;
    for (int i = 0; i < 16; ++i) {
      const int sum = u.b[2 * i] * static_cast<int8_t>(s.b[2 * i]) +
                      u.b[2 * i + 1] * static_cast<int8_t>(s.b[2 * i + 1]);
      put<int16_t>(r, i, static_cast<int16_t>(std::clamp(sum, -32768, 32767)));
    }
    return r;
  }
  static I madd16(const I& a, const I& b) {
    I r;
    for (int i = 0; i < 8; ++i) {
      const int32_t sum = get<int16_t>(a, 2 * i) * get<int16_t>(b, 2 * i) +
                          get<int16_t>(a, 2 * i + 1) * get<int16_t>(b, 2 * i + 1);
      put<int32_t>(r, i, sum);
    }
    return r;
  }
  static I abs8(I a) {
    for (uint8_t& x : a.b) x = static_cast<uint8_t>(std::abs(static_cast<int8_t>(x)));
    return a;
  }
  // a negated where b < 0, zero where b == 0
  static I sign8(I a, const I& b) {
    for (int i = 0; i < 32; ++i) {
      const int8_t s = static_cast<int8_t>(b.b[i]);
      a.b[i] = s == 0 ? 0 : s < 0 ? static_cast<uint8_t>(-a.b[i]) : a.b[i];
    }
    return a;
  }
  static I widen_u8_16(const uint8_t* p) {
    I r;
    for (int i = 0; i < 16; ++i) put<uint16_t>(r, i, p[i]);
    return r;
  }
  static I widen_s8_16(const int8_t* p) {
    I r;
    for (int i = 0; i < 16; ++i) put<int16_t>(r, i, p[i]);
    return r;
  }
  static I widen_u8_32(const uint8_t* p) {  // 8 bytes, one to a 32-bit lane
    I r;
    for (int i = 0; i < 8; ++i) put<uint32_t>(r, i, p[i]);
    return r;
  }
  // bytes picked within each 16-byte lane, as pshufb (an index with the top bit set gives 0)
  static I shuffle8(const I& a, const I& pattern) {
    I r;
    for (int i = 0; i < 32; ++i) {
      const uint8_t k = pattern.b[i];
      r.b[i] = (k & 0x80) ? 0 : a.b[(i & ~15) + (k & 15)];
    }
    return r;
  }
  static I cvt_f2i(F a) {  // of values already rounded to whole numbers
    I r;
    for (int i = 0; i < 8; ++i) put<int32_t>(r, i, static_cast<int32_t>(a.v[i]));
    return r;
  }
  static void store_i8(int8_t* p, const I& a) {  // of values in [-128, 127]
    for (int i = 0; i < 8; ++i) p[i] = static_cast<int8_t>(get<int32_t>(a, i));
  }
};

}  // namespace
}  // namespace specula::kernels
