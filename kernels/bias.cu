// Bias add on fp32 product outputs: rows[t][i] += bias[i], one thread per element. The
// products run through cuBLAS with beta = 0 (one output layout for every product), so the
// biases of qwen2's q|k|v and of llama's attention output come after, as their own step.
#include "common.cuh"

namespace specula::cuda {

__global__ void add_bias_kernel(float* rows, int row_stride, int n_rows, const float* bias, int width) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(n_rows) * width) return;
  const int t = static_cast<int>(i / width), c = static_cast<int>(i % width);
  rows[static_cast<int64_t>(t) * row_stride + c] += bias[c];
}

void add_bias(float* rows, int row_stride, int n_rows, const float* bias, int width, cudaStream_t stream) {
  if (n_rows == 0 || width == 0) return;
  add_bias_kernel<<<blocks_for(static_cast<int64_t>(n_rows) * width, 256), 256, 0, stream>>>(rows, row_stride,
                                                                                              n_rows, bias, width);
  check(cudaGetLastError(), "add_bias");
}

}  // namespace specula::cuda
