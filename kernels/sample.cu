// Drawing tokens on the device: a plain draw from a distribution, and the speculative
// accept/reject draw (Leviathan et al., Chen et al.) for a verified draft token. Both are
// one block per row and return a few ints per row, the only copy back a step needs. The
// uniforms come from the host's per-sequence generators, so runs stay reproducible and
// the draws match the CPU sampler's given the same numbers.
#include "common.cuh"

namespace specula::cuda {

// one block per row; the launch bound keeps the compiler within 64 registers a thread
constexpr int kThreads = 1024;

namespace {

__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* probs, int vocab, const float* uniforms, int32_t* out) {
  __shared__ double sums[kThreads + 1];
  __shared__ int result[2];
  const float* p = probs + static_cast<int64_t>(blockIdx.x) * vocab;
  const int drawn = block_draw([&](int i) { return p[i]; }, vocab, uniforms[blockIdx.x], sums, result);
  if (threadIdx.x == 0) out[blockIdx.x] = max(drawn, 0);
}

__global__ void __launch_bounds__(kThreads)
    verify_kernel(const float* target_probs, const float* draft_probs, const int32_t* draft_tokens, int vocab,
                  const float* u_accept, const float* u_residual, int32_t* accepted, int32_t* residual) {
  __shared__ double sums[kThreads + 1];
  __shared__ int result[2];
  const int r = blockIdx.x;
  const float* p = target_probs + static_cast<int64_t>(r) * vocab;
  const float* q = draft_probs + static_cast<int64_t>(r) * vocab;
  const int d = draft_tokens[r];
  int drawn = block_draw([&](int i) { return fmaxf(p[i] - q[i], 0.0f); }, vocab, u_residual[r], sums, result);
  if (drawn < 0) {  // p == q: rejection cannot happen, but keep the answer a valid token
    drawn = block_draw([&](int i) { return p[i]; }, vocab, u_residual[r], sums, result);
  }
  if (threadIdx.x == 0) {
    accepted[r] = u_accept[r] * q[d] < p[d] ? 1 : 0;
    residual[r] = max(drawn, 0);
  }
}

}  // namespace

void sample_rows(const float* probs, int n_rows, int vocab, const float* uniforms, int32_t* out,
                 cudaStream_t stream) {
  if (n_rows == 0) return;
  sample_kernel<<<n_rows, kThreads, 0, stream>>>(probs, vocab, uniforms, out);
  check(cudaGetLastError(), "sample_rows");
}

void speculative_verify(const float* target_probs, const float* draft_probs,
                        const int32_t* draft_tokens, int n_rows, int vocab,
                        const float* u_accept, const float* u_residual, int32_t* accepted,
                        int32_t* residual, cudaStream_t stream) {
  if (n_rows == 0) return;
  verify_kernel<<<n_rows, kThreads, 0, stream>>>(target_probs, draft_probs, draft_tokens, vocab,
                                              u_accept, u_residual, accepted, residual);
  check(cudaGetLastError(), "speculative_verify");
}

}  // namespace specula::cuda
