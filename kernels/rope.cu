// Rotary position embedding on adjacent pairs (x[2i], x[2i+1]), as llama2.c and GGUF
// models expect. Queries and keys sit side by side at the start of each fused q|k|v row,
// so one launch rotates both: one thread per pair. The angle uses powf/sincosf at full
// precision so that it matches the CPU backend to a few ulp.
#include "common.cuh"

namespace specula::cuda {

__global__ void rope_kernel(float* qk, int row_stride, const int32_t* positions, int n_tokens,
                            int pairs_per_row, int head_dim, float theta) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(n_tokens) * pairs_per_row) return;
  const int t = static_cast<int>(i / pairs_per_row);
  const int column = static_cast<int>(i % pairs_per_row) * 2;
  const int in_head = column % head_dim;
  const float frequency = 1.0f / powf(theta, static_cast<float>(in_head) / static_cast<float>(head_dim));
  const float angle = static_cast<float>(positions[t]) * frequency;
  float s, c;
  sincosf(angle, &s, &c);
  float* pair = qk + static_cast<int64_t>(t) * row_stride + column;
  const float a = pair[0], b = pair[1];
  pair[0] = a * c - b * s;
  pair[1] = a * s + b * c;
}

void rope(float* qk, int row_stride, const int32_t* positions, int n_tokens, int n_rot_heads,
          int head_dim, float theta, cudaStream_t stream) {
  if (n_tokens == 0) return;
  const int pairs = n_rot_heads * head_dim / 2;
  rope_kernel<<<blocks_for(static_cast<int64_t>(n_tokens) * pairs, 256), 256, 0, stream>>>(
      qk, row_stride, positions, n_tokens, pairs, head_dim, theta);
  check(cudaGetLastError(), "rope");
}

}  // namespace specula::cuda
