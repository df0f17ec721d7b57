// Rotary position embedding, in place on the q and k heads at the start of each fused
// q|k|v row: one thread per rotated pair. Pair i of a head is (2i, 2i+1) in the adjacent
// layout (llama's GGUF layout) or (i, i + head_dim/2) in the halves layout (Qwen's, and
// transformers'). Its frequency comes from the model's table (theta^(-2i/head_dim) with
// the linear and llama3 scalings folded in, computed on the host in double, the same
// numbers the CPU backend uses); the angle and its sine and cosine are computed in double
// too: in float, position * frequency alone is off by up to 1e-4 rad at position 4096,
// which the two backends would then disagree by. The fused form also writes each token's
// rotated key and its value into its cache slot (what kv_write does after rope, the same
// bits in one launch).
#include "common.cuh"

namespace specula::cuda {

// The columns of pair `pair` within a head.
__device__ __forceinline__ int first_column(int pair, bool halves) { return halves ? pair : 2 * pair; }
__device__ __forceinline__ int second_column(int pair, int head_dim, bool halves) {
  return halves ? pair + head_dim / 2 : 2 * pair + 1;
}

// Rotates pair `pair` of the head starting at `head` by position * frequency.
__device__ __forceinline__ void rotate_pair(float* head, int pair, int head_dim, bool halves, int position,
                                            double frequency) {
  double sd, cd;
  sincos(position * frequency, &sd, &cd);
  const float s = static_cast<float>(sd), c = static_cast<float>(cd);
  float& first = head[first_column(pair, halves)];
  float& second = head[second_column(pair, head_dim, halves)];
  const float a = first, b = second;
  first = a * c - b * s;
  second = a * s + b * c;
}

__global__ void rope_kernel(float* qk, int row_stride, const int32_t* positions, int n_tokens,
                            int pairs_per_row, int head_dim, const double* frequencies, bool halves) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(n_tokens) * pairs_per_row) return;
  const int t = static_cast<int>(i / pairs_per_row);
  const int pairs_per_head = head_dim / 2;
  const int head = static_cast<int>(i % pairs_per_row) / pairs_per_head;
  const int pair = static_cast<int>(i % pairs_per_row) % pairs_per_head;
  rotate_pair(qk + static_cast<int64_t>(t) * row_stride + head * head_dim, pair, head_dim, halves, positions[t],
              frequencies[pair]);
}

// Per token: (n_heads + n_kv_heads) * head_dim / 2 pairs, then kv_dim values.
template <typename T>
__global__ void rope_kv_write_kernel(RopeKvArgs a, T* k_cache, T* v_cache) {
  const int kv_dim = a.n_kv_heads * a.head_dim, pairs_per_head = a.head_dim / 2;
  const int pairs = (a.n_heads + a.n_kv_heads) * pairs_per_head, per_token = pairs + kv_dim;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(a.n_tokens) * per_token) return;
  const int t = static_cast<int>(i / per_token), j = static_cast<int>(i % per_token);
  float* row = a.qkv + static_cast<int64_t>(t) * a.row_stride;
  const int64_t slot = static_cast<int64_t>(a.cache_slots[t]) * kv_dim;
  if (j < pairs) {
    const int head = j / pairs_per_head, pair = j % pairs_per_head;
    const bool halves = a.layout == RopeLayout::Halves;
    float* h = row + head * a.head_dim;
    rotate_pair(h, pair, a.head_dim, halves, a.positions[t], a.frequencies[pair]);
    if (head >= a.n_heads) {
      T* key = k_cache + slot + (head - a.n_heads) * a.head_dim;
      const int first = first_column(pair, halves), second = second_column(pair, a.head_dim, halves);
      key[first] = from_float<T>(h[first]);
      key[second] = from_float<T>(h[second]);
    }
  } else {
    const int e = j - pairs;
    v_cache[slot + e] = from_float<T>(row[(a.n_heads + a.n_kv_heads) * a.head_dim + e]);
  }
}

void rope(float* qk, int row_stride, const int32_t* positions, int n_tokens, int n_rot_heads,
          int head_dim, const double* frequencies, RopeLayout layout, cudaStream_t stream) {
  if (n_tokens == 0) return;
  const int pairs = n_rot_heads * head_dim / 2;
  rope_kernel<<<blocks_for(static_cast<int64_t>(n_tokens) * pairs, 256), 256, 0, stream>>>(
      qk, row_stride, positions, n_tokens, pairs, head_dim, frequencies, layout == RopeLayout::Halves);
  check(cudaGetLastError(), "rope");
}

void rope_kv_write(const RopeKvArgs& args, cudaStream_t stream) {
  if (args.n_tokens == 0) return;
  const int per_token = (args.n_heads + args.n_kv_heads) * args.head_dim / 2 + args.n_kv_heads * args.head_dim;
  dispatch(args.cache_type, [&](auto zero) {
    using T = decltype(zero);
    rope_kv_write_kernel<T><<<blocks_for(static_cast<int64_t>(args.n_tokens) * per_token, 256), 256, 0, stream>>>(
        args, static_cast<T*>(args.k_cache), static_cast<T*>(args.v_cache));
  });
  check(cudaGetLastError(), "rope_kv_write");
}

}  // namespace specula::cuda
