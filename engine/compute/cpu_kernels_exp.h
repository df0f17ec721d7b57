// exp of non-positive arguments in vector lanes, and the log-sum-exp of a row built on it.
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

// ---- exp of non-positive arguments (softmax, log-sum-exp) --------------------------------
//
// exp(x) for x ≤ 0 by range reduction: x = n·ln 2 + r with n = round(x·log2 e), |r| ≤ ln 2 / 2
// (ln 2 in two parts, so that r is exact), exp(r) by Cephes' degree-6 polynomial (relative
// error about 1e-7), times 2^n built in the exponent bits. Arguments are clamped at -87: a
// term below e^-87 is lost in a sum that holds e^0 = 1 (the row's maximum) anyway.
template <class V>
typename V::F exp_nonpositive(typename V::F x) {
  using F = typename V::F;
  x = V::fmax(x, V::fset1(-87.0f));
  const F n = V::fround(V::fmul(x, V::fset1(1.44269504088896341f)));
  F r = V::fma(n, V::fset1(-0.693359375f), x);
  r = V::fma(n, V::fset1(2.12194440e-4f), r);
  F p = V::fset1(1.9875691500e-4f);
  p = V::fma(p, r, V::fset1(1.3981999507e-3f));
  p = V::fma(p, r, V::fset1(8.3334519073e-3f));
  p = V::fma(p, r, V::fset1(4.1665795894e-2f));
  p = V::fma(p, r, V::fset1(1.6666665459e-1f));
  p = V::fma(p, r, V::fset1(5.0000001201e-1f));
  const F one = V::fset1(1.0f);
  const F e = V::fma(p, V::fmul(r, r), V::fma(r, one, one));
  return V::fmul(e, V::pow2(V::cvt_f2i(n)));
}

// The largest of x[0 .. n): lane-wise maxima, then the tail (max is exact in any order).
template <class V>
float row_max(const float* x, int64_t n) {
  constexpr int L = V::kLanes;
  const int64_t whole = n / L * L;
  float max_value = -INFINITY;
  if (whole > 0) {
    typename V::F m = V::fload(x);
    for (int64_t i = L; i < whole; i += L) m = V::fmax(m, V::fload(x + i));
    max_value = V::hmax(m);
  }
  for (int64_t i = whole; i < n; ++i) max_value = std::max(max_value, x[i]);
  return max_value;
}

// ---- log-sum-exp of a row (a log-softmax's normaliser) ------------------------------------
//
// log Σ exp(x_i): the maximum m first, then Σ exp(x_i - m) in float lanes, moved into a
// double every 256 values (so a 150 000-value row keeps float's precision), the tail
// (n mod lanes) by the scalar exp. Called once per emitted token on the vocabulary's row.
template <class V>
double log_sum_exp(const float* x, int64_t n) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  const int64_t whole = n / L * L;
  const float max_value = row_max<V>(x, n);
  const F shift = V::fset1(-max_value), one = V::fset1(1.0f);
  double sum = 0.0;
  for (int64_t begin = 0; begin < whole; begin += 256) {
    const int64_t end = std::min<int64_t>(whole, begin + 256);
    F acc = V::fzero();
    for (int64_t i = begin; i < end; i += L) acc = V::fma(exp_nonpositive<V>(V::fma(V::fload(x + i), one, shift)), one, acc);
    sum += V::hsum(acc);
  }
  for (int64_t i = whole; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - max_value);
  return max_value + std::log(sum);
}

}  // namespace
}  // namespace specula::kernels
