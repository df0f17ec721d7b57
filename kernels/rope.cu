// Rotary position embedding, in place on the q and k heads at the start of each fused
// q|k|v row: one thread per rotated pair. Pair i of a head is (2i, 2i+1) in the adjacent
// layout (llama's GGUF layout) or (i, i + head_dim/2) in the halves layout (Qwen's, and
// transformers'). Its frequency comes from the model's table (theta^(-2i/head_dim) with
// the linear and llama3 scalings folded in, computed on the host in double, the same
// numbers the CPU backend uses); the angle and its sine and cosine are computed in double
// too: in float, position * frequency alone is off by up to 1e-4 rad at position 4096,
// which the two backends would then disagree by.
#include "common.cuh"

namespace specula::cuda {

__global__ void rope_kernel(float* qk, int row_stride, const int32_t* positions, int n_tokens,
                            int pairs_per_row, int head_dim, const double* frequencies, bool halves) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(n_tokens) * pairs_per_row) return;
  const int t = static_cast<int>(i / pairs_per_row);
  const int pairs_per_head = head_dim / 2;
  const int head = static_cast<int>(i % pairs_per_row) / pairs_per_head;
  const int pair = static_cast<int>(i % pairs_per_row) % pairs_per_head;
  double sd, cd;
  sincos(positions[t] * frequencies[pair], &sd, &cd);
  const float s = static_cast<float>(sd), c = static_cast<float>(cd);
  float* v = qk + static_cast<int64_t>(t) * row_stride + head * head_dim;
  float& first = halves ? v[pair] : v[2 * pair];
  float& second = halves ? v[pair + pairs_per_head] : v[2 * pair + 1];
  const float a = first, b = second;
  first = a * c - b * s;
  second = a * s + b * c;
}

void rope(float* qk, int row_stride, const int32_t* positions, int n_tokens, int n_rot_heads,
          int head_dim, const double* frequencies, RopeLayout layout, cudaStream_t stream) {
  if (n_tokens == 0) return;
  const int pairs = n_rot_heads * head_dim / 2;
  rope_kernel<<<blocks_for(static_cast<int64_t>(n_tokens) * pairs, 256), 256, 0, stream>>>(
      qk, row_stride, positions, n_tokens, pairs, head_dim, frequencies, layout == RopeLayout::Halves);
  check(cudaGetLastError(), "rope");
}

}  // namespace specula::cuda
