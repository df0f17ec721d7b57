// The AVX2 kernels (8 lanes) and the 16-lane AVX-512 algorithms emulated on pairs of AVX2
// registers, all compiled for AVX2 + FMA + F16C by the pragma below: this file's code runs
// only where best_simd_level found those instructions (or in tests that ask for it).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "compute/cpu_kernel_table.h"

#if defined(__x86_64__)

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC target("avx2,fma,f16c")
#endif

#include "compute/cpu_vec_avx2.h"
#include "compute/cpu_kernel_templates.h"

namespace specula::kernels {

const KernelTable& avx2_kernels() {
  static const KernelTable table = make_kernel_table<Avx2Vec, Avx2PairVec>();
  return table;
}

const KernelTable& avx512_emulated_kernels() {
  static const KernelTable table = [] {
    KernelTable t = make_kernel_table<Emu512Vec>();
    t.attend = avx2_kernels().attend;  // attention runs on 8 lanes at every x86 level
    return t;
  }();
  return table;
}

}  // namespace specula::kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif

#else  // not x86-64: only the portable kernels exist

namespace specula::kernels {
const KernelTable& avx2_kernels() { return portable_kernels(); }
const KernelTable& avx512_emulated_kernels() { return portable_kernels(); }
}  // namespace specula::kernels

#endif
