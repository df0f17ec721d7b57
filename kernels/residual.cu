// Residual add on the fp32 stream: x += y, one thread per element. Kept apart from the
// products so that every product has one output layout (cuBLAS with beta = 0).
#include "common.cuh"

namespace specula::cuda {

__global__ void residual_add_kernel(float* x, const float* y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
}

void residual_add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  residual_add_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(x, y, n);
  check(cudaGetLastError(), "residual_add");
}

}  // namespace specula::cuda
