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

#include "tensor.h"

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

// Activation blocks for quantized weights (the kernels' input format, public for tests).
struct BlockQ8 {   // 32 activations for Q8_0 and Q4_0 weights
  float d;         // scale: value = d * q
  int8_t q[32];    // quantized values in [-127, 127]
};
struct BlockQ8K {     // 256 activations for Q4_K and Q6_K weights
  float d;            // scale: value = d * q
  int16_t sums[16];   // sum of q over each 16 values (for the K-quants' minimums)
  int8_t q[256];      // quantized values in [-127, 127]
};
void quantize_activations_q8(const float* x, BlockQ8* out, int64_t n);
void quantize_activations_q8k(const float* x, BlockQ8K* out, int64_t n);

}  // namespace specula
