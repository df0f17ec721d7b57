// Matrix kernels of the CPU backend: y = x · Wᵀ for a batch of activation rows.
//
// Every weight type is multiplied block by block, without dequantizing whole matrices:
// float weights (F32, F16, BF16) meet f32 activations; quantized weights (Q8_0, Q4_0,
// Q4_K, Q6_K) meet activations quantized to 8 bits per row (llama.cpp's q8_0 / q8_K),
// with integer dot products inside each block.
//
// Batch invariance: each output element y[t][r] is computed by one call of the same
// per-(row, token) sequence of operations, whatever the number of tokens in the call and
// whatever the thread count. Tokens are processed in tiles that share each loaded weight
// block (that is what makes a forward of k tokens cheap), but a tile only changes how
// many accumulators run side by side, never the order of any one of them.
//
// SIMD is chosen at run time; each variant is compiled with a per-function target
// attribute so the binary runs on any x86-64.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "model/tensor.h"

namespace specula {

class ThreadPool;

enum class SimdLevel { Scalar, Avx2, Avx512 };

std::string_view simd_name(SimdLevel level);
// The best level this processor supports.
SimdLevel best_simd_level();
// Every level this processor supports, from Scalar up.
std::vector<SimdLevel> supported_simd_levels();

// y (n, w.rows) = x (n, w.cols) · wᵀ. `x` and `y` are row-major with w.cols and w.rows
// floats per row. Throws std::invalid_argument when w.cols is not a whole number of blocks.
void matmul(const TensorView& w, const float* x, int n, float* y, ThreadPool& pool,
            SimdLevel level);

// Activations for quantized weights (the kernels' input format, public for tests).
//
// For Q8_0 and Q4_0 weights, a row of n activations becomes 3n bytes in three sections,
// each block of 32 values taking 32 bytes of each, so that consecutive blocks lie side by
// side for wide vector loads:
//   values   (n int8)       q in [-127, 127]; value = scale * q
//   scales   (n / 4 float)  each block's scale, repeated 8 times (one per VNNI lane)
//   offsets  (n / 4 int32)  -8 * (sum of q over each 4 consecutive values): Q4_0's offset
struct Q8Row {
  const int8_t* values;
  const float* scales;
  const int32_t* offsets;
};
inline size_t q8_row_bytes(int64_t n) { return static_cast<size_t>(3 * n); }
inline Q8Row q8_row(const uint8_t* row, int64_t n) {
  return {reinterpret_cast<const int8_t*>(row), reinterpret_cast<const float*>(row + n),
          reinterpret_cast<const int32_t*>(row + 2 * n)};
}
void quantize_activations_q8(const float* x, uint8_t* out, int64_t n);

struct BlockQ8K {    // 256 activations for Q4_K and Q6_K weights
  float d;           // scale: value = d * q
  int16_t sums[16];  // sum of q over each 16 values (for the K-quants' minimums)
  int8_t q[256];     // quantized values in [-127, 127]
};
void quantize_activations_q8k(const float* x, BlockQ8K* out, int64_t n);

}  // namespace specula
