// Dense products y = x * w^T with fp32 accumulation, in two modes.
//
// Cublas: cublasGemmEx on the weights' type (fp16/bf16 on tensor cores, fp32 without
// TF32), the fast path. cuBLAS picks its algorithm by shape, so one row's result may
// change with the number of rows in the batch.
//
// Invariant: our own kernel for the small row counts of decoding, where the product is
// bound by reading the weights. A warp owns one weight row and multiplies it against
// kRows rows of x at once (the weights are read once per kRows rows); each lane walks the
// row in 16-byte vectors at a stride fixed by k, then the warp sums with a fixed shuffle
// tree. More rows take more passes over the weights, served mostly from L2. Every output's reduction order therefore depends on k alone, never on m or on
// which other rows share the launch: a sequence's logits are the same bits whatever else
// is in the batch, which keeps greedy speculative decoding equal to plain greedy.
#include <cstring>

#include "common.cuh"

namespace specula::cuda {

namespace {

constexpr int kRows = 8;    // rows of x per warp
constexpr int kWarps = 8;   // weight rows per block

template <typename T, int V> struct Vec;  // V consecutive elements, loaded as one vector
template <> struct Vec<float, 4> {
  __device__ static void load(const float* p, float* out) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
  }
};
template <typename T> struct Vec<T, 8> {
  __device__ static void load(const T* p, float* out) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    T elements[8];
    memcpy(elements, &raw, sizeof(raw));
#pragma unroll
    for (int e = 0; e < 8; ++e) out[e] = to_float(elements[e]);
  }
};
template <typename T> struct Vec<T, 1> {
  __device__ static void load(const T* p, float* out) { out[0] = to_float(*p); }
};

template <typename T, int V>
__global__ void __launch_bounds__(kWarps * 32) gemm_invariant_kernel(const T* x, const T* w, int m,
                                                                     int n, int k, float* y, int ldy) {
  const int lane = threadIdx.x % 32;
  const int col = blockIdx.y * kWarps + threadIdx.x / 32;
  const int row0 = blockIdx.x * kRows;
  if (col >= n) return;
  const int rows = min(kRows, m - row0);
  const T* wr = w + static_cast<int64_t>(col) * k;
  float acc[kRows] = {};
  for (int base = lane * V; base < k; base += 32 * V) {
    float wv[V], xv[V];
    Vec<T, V>::load(wr + base, wv);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r < rows) {
        Vec<T, V>::load(x + static_cast<int64_t>(row0 + r) * k + base, xv);
#pragma unroll
        for (int e = 0; e < V; ++e) acc[r] += wv[e] * xv[e];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float sum = warp_sum(acc[r]);
    if (lane == 0 && r < rows) y[static_cast<int64_t>(row0 + r) * ldy + col] = sum;
  }
}

cudaDataType_t cublas_type(DType type) {
  switch (type) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

}  // namespace

void gemm(cublasHandle_t handle, GemmMode mode, const void* x, const void* w, DType type, int m,
          int n, int k, float* y, int ldy, cudaStream_t stream) {
  if (m == 0) return;
  if (mode == GemmMode::Cublas) {
    // row-major y (m, ldy) is column-major y^T (ldy, m) = w (k, n)^T * x^T (k, m); the
    // handle is bound to `stream` by its owner
    const float one = 1.0f, zero = 0.0f;
    check(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, cublas_type(type), k, x,
                       cublas_type(type), k, &zero, y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
    return;
  }
  // row groups vary fastest, so the blocks reading the same weight rows run together and
  // all but the first find them in L2
  const dim3 grid(blocks_for(m, kRows), blocks_for(n, kWarps));
  // 16-byte vectors when every row starts 16-byte aligned; the choice depends on k only
  // (device allocations are 256-byte aligned)
  const bool vectors = (static_cast<size_t>(k) * dtype_bytes(type)) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
  dispatch(type, [&](auto zero) {
    using T = decltype(zero);
    constexpr int V = 16 / sizeof(T);
    const T* xt = static_cast<const T*>(x);
    const T* wt = static_cast<const T*>(w);
    if (vectors) {
      gemm_invariant_kernel<T, V><<<grid, kWarps * 32, 0, stream>>>(xt, wt, m, n, k, y, ldy);
    } else {
      gemm_invariant_kernel<T, 1><<<grid, kWarps * 32, 0, stream>>>(xt, wt, m, n, k, y, ldy);
    }
  });
  check(cudaGetLastError(), "gemm_invariant");
}

}  // namespace specula::cuda
