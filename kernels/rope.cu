// Rotary position embedding on adjacent pairs (x[2i], x[2i+1]), as llama2.c and GGUF
// models expect. Queries and keys sit side by side at the start of each fused q|k|v row,
// so one launch rotates both: one thread per pair. The angle and its sine and cosine are
// computed in double, as the CPU backend does: in float, position * frequency alone is off
// by up to 1e-4 rad at position 4096, which the two backends would then disagree by.
#include "common.cuh"

namespace specula::cuda {

__global__ void rope_kernel(float* qk, int row_stride, const int32_t* positions, int n_tokens,
                            int pairs_per_row, int head_dim, float theta) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(n_tokens) * pairs_per_row) return;
  const int t = static_cast<int>(i / pairs_per_row);
  const int column = static_cast<int>(i % pairs_per_row) * 2;
  const int in_head = column % head_dim;
  const double angle = positions[t] * pow(static_cast<double>(theta), -static_cast<double>(in_head) / head_dim);
  double sd, cd;
  sincos(angle, &sd, &cd);
  const float s = static_cast<float>(sd), c = static_cast<float>(cd);
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
