// The AVX-512 kernels (16 lanes, VNNI), compiled for AVX-512 F/BW/VL/DQ/VNNI by the pragma
// below: this file's code runs only where best_simd_level found those instructions. The
// algorithms are the ones the AVX2 machines run as the emulated level (cpu_vec_avx2.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "compute/cpu_kernel_table.h"

#if defined(__x86_64__)

#if defined(__clang__)
#pragma clang attribute push(                                                                  \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"))), \
    apply_to = function)
#else
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
#endif

#include "compute/cpu_vec_avx512.h"
#include "compute/cpu_kernel_templates.h"

namespace specula::kernels {

const KernelTable& avx512_kernels() {
  static const KernelTable table = [] {
    KernelTable t = make_kernel_table<Avx512Vec>();
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
const KernelTable& avx512_kernels() { return portable_kernels(); }
}  // namespace specula::kernels

#endif
