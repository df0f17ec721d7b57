// Per-head RMSNorm (qwen3's q_norm and k_norm), in place on the fp32 q|k|v rows before the
// rotation: one warp per (token, head), a fixed-order warp reduction for the mean square,
// every head normalized with the same head_dim weights.
#include "common.cuh"

namespace specula::cuda {

__global__ void head_rmsnorm_kernel(float* x, int row_stride, int n_rows, int n_heads, int head_dim,
                                    const float* weight, float eps) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (item >= static_cast<int64_t>(n_rows) * n_heads) return;  // whole warps leave together
  const int lane = threadIdx.x % 32;
  float* head = x + (item / n_heads) * row_stride + (item % n_heads) * head_dim;
  float ss = 0.0f;
  for (int i = lane; i < head_dim; i += 32) ss += head[i] * head[i];
  ss = warp_sum(ss);
  const float scale = 1.0f / sqrtf(ss / head_dim + eps);
  for (int i = lane; i < head_dim; i += 32) head[i] = weight[i] * (scale * head[i]);
}

void head_rmsnorm(float* x, int row_stride, int n_rows, int n_heads, int head_dim, const float* weight, float eps,
                  cudaStream_t stream) {
  if (n_rows == 0 || n_heads == 0) return;
  constexpr int kWarps = 8;
  const int64_t items = static_cast<int64_t>(n_rows) * n_heads;
  head_rmsnorm_kernel<<<blocks_for(items, kWarps), kWarps * 32, 0, stream>>>(x, row_stride, n_rows, n_heads,
                                                                             head_dim, weight, eps);
  check(cudaGetLastError(), "head_rmsnorm");
}

}  // namespace specula::cuda
