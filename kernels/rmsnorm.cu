// RMSNorm: one block per row (a row is at most a few thousand values), a fixed-order block
// reduction for the mean square, output in the type of the next product's weights. An
// optional row list lets the final norm run on the rows whose logits are wanted only. The
// fused form adds a sub-layer's output into the residual stream first (the residual add and
// the next norm in one pass, the same bits as the two kernels in turn).
#include "common.cuh"

namespace specula::cuda {

template <typename T>
__global__ void rmsnorm_kernel(const float* x, const float* weight, const int32_t* rows, int dim,
                               float eps, T* out) {
  __shared__ float scratch[32];
  const int r = blockIdx.x;
  const float* src = x + static_cast<int64_t>(rows ? rows[r] : r) * dim;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += src[i] * src[i];
  ss = block_sum(ss, scratch);
  const float scale = 1.0f / sqrtf(ss / dim + eps);
  T* dst = out + static_cast<int64_t>(r) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = from_float<T>(weight[i] * (scale * src[i]));
}

template <typename T>
__global__ void residual_rmsnorm_kernel(float* x, const float* y, const float* weight, int dim, float eps, T* out) {
  __shared__ float scratch[32];
  const int64_t row = static_cast<int64_t>(blockIdx.x) * dim;
  float* v = x + row;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float sum = v[i] + y[row + i];
    v[i] = sum;
    ss += sum * sum;
  }
  ss = block_sum(ss, scratch);
  const float scale = 1.0f / sqrtf(ss / dim + eps);
  T* dst = out + row;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = from_float<T>(weight[i] * (scale * v[i]));
}

void residual_rmsnorm(float* x, const float* y, const float* weight, int n_rows, int dim, float eps, void* out,
                      DType out_type, cudaStream_t stream) {
  if (n_rows == 0) return;
  dispatch(out_type, [&](auto zero) {
    using T = decltype(zero);
    residual_rmsnorm_kernel<T><<<n_rows, 256, 0, stream>>>(x, y, weight, dim, eps, static_cast<T*>(out));
  });
  check(cudaGetLastError(), "residual_rmsnorm");
}

void rmsnorm(const float* x, const float* weight, const int32_t* rows, int n_rows, int dim,
             float eps, void* out, DType out_type, cudaStream_t stream) {
  if (n_rows == 0) return;
  dispatch(out_type, [&](auto zero) {
    using T = decltype(zero);
    rmsnorm_kernel<T><<<n_rows, 256, 0, stream>>>(x, weight, rows, dim, eps, static_cast<T*>(out));
  });
  check(cudaGetLastError(), "rmsnorm");
}

}  // namespace specula::cuda
