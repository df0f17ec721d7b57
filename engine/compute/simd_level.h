// The instruction sets the CPU backend's kernels come in, detected at run time.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace specula {

enum class SimdLevel {
  Portable,        // plain C++ for baseline x86-64 or any other processor
  Avx2,            // AVX2 + FMA + F16C: 8-lane kernels
  Avx512,          // AVX-512 F/BW/VL/DQ + VNNI: 16-lane kernels
  Avx512Emulated,  // the 16-lane kernels on pairs of AVX2 registers: for tests on AVX2 machines
};

std::string_view simd_name(SimdLevel level);  // "portable", "avx2", "avx512", "avx512-emulated"
std::optional<SimdLevel> simd_level_from_name(std::string_view name);
// Whether this processor can run `level`.
bool simd_supported(SimdLevel level);
// Every real level this processor supports, from Portable up (never the emulated one).
std::vector<SimdLevel> supported_simd_levels();
// The best real level this processor supports.
SimdLevel best_simd_level();
// supported_simd_levels() plus Avx512Emulated where AVX2 runs: what tests cover.
std::vector<SimdLevel> testable_simd_levels();

}  // namespace specula
