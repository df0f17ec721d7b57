// Greedy choice on the device: one block per logit row, so a greedy step copies one int per
// row back to the host instead of the row itself. Ties go to the lowest index, as in the
// CPU sampler.
#include "common.cuh"

namespace specula::cuda {

// one block per row; the launch bound keeps the compiler within 64 registers a thread
constexpr int kThreads = 1024;

__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* logits, int vocab, int32_t* out) {
  __shared__ float scratch_v[32];
  __shared__ int scratch_i[32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const int best = block_argmax([&](int i) { return row[i]; }, vocab, scratch_v, scratch_i);
  if (threadIdx.x == 0) out[blockIdx.x] = best;
}

void argmax_rows(const float* logits, int n_rows, int vocab, int32_t* out, cudaStream_t stream) {
  if (n_rows == 0) return;
  argmax_kernel<<<n_rows, kThreads, 0, stream>>>(logits, vocab, out);
  check(cudaGetLastError(), "argmax_rows");
}

}  // namespace specula::cuda
