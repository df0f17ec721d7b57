// Shared by the kernels: element conversions, block reductions, type dispatch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <cmath>

#include "kernels.h"

namespace specula::cuda {

template <typename T> __device__ __forceinline__ float to_float(T v);
template <> __device__ __forceinline__ float to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Sum / max over the block, in a fixed order (warp shuffles, then warp 0); every thread gets
// the result. `scratch` holds 32 floats. blockDim.x is a multiple of 32.
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < n_warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < n_warps ? scratch[lane] : -FLT_MAX;
  return warp_max(v);
}

// The same in double, for sums that must match the host's double sums.
__device__ __forceinline__ double block_sum_double(double v, double* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < n_warps ? scratch[lane] : 0.0;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// (best, index) of the warp's largest value, the lowest index on ties, in every lane.
__device__ inline void warp_argmax(float& best, int& index) {
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, best, o);
    const int other_index = __shfl_xor_sync(0xffffffffu, index, o);
    if (other > best || (other == best && other_index < index)) {
      best = other;
      index = other_index;
    }
  }
}

// Index of the largest of f(0..n-1) over the block, the lowest index on ties; every thread
// gets it. `scratch_v` and `scratch_i` hold 32 entries each.
template <typename F>
__device__ int block_argmax(F value, int n, float* scratch_v, int* scratch_i) {
  float best = -INFINITY;
  int index = n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = value(i);
    if (v > best || (v == best && i < index)) {
      best = v;
      index = i;
    }
  }
  warp_argmax(best, index);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) {
    scratch_v[warp] = best;
    scratch_i[warp] = index;
  }
  __syncthreads();
  if (warp == 0) {
    best = lane < static_cast<int>(blockDim.x / 32) ? scratch_v[lane] : -INFINITY;
    index = lane < static_cast<int>(blockDim.x / 32) ? scratch_i[lane] : n;
    warp_argmax(best, index);
    if (lane == 0) scratch_i[0] = index;
  }
  __syncthreads();
  return scratch_i[0] < n ? scratch_i[0] : 0;  // all -inf or NaN: index 0
}

// Inverse-CDF draw over f(0..n-1) >= 0: the first index whose running sum exceeds
// u * total, or -1 when the total is zero. Thread t sums its own contiguous chunk; thread 0
// scans the chunk sums; the thread whose chunk holds the target walks it. Deterministic.
// The sums are in double, as the CPU sampler's are: in float their rounding (about 1e-7 of
// the total) would move the draw to a neighbouring token whenever the target falls that
// close to a boundary. `sums` holds blockDim.x + 1 doubles, `result` 2 ints.
template <typename F>
__device__ int block_draw(F value, int n, double u, double* sums, int* result) {
  const int chunk = (n + blockDim.x - 1) / blockDim.x;
  const int begin = min(n, static_cast<int>(threadIdx.x) * chunk), end = min(n, begin + chunk);
  double local = 0.0;
  int last_nonzero = -1;
  for (int i = begin; i < end; ++i) {
    const float v = value(i);
    local += v;
    if (v > 0.0f) last_nonzero = i;
  }
  sums[threadIdx.x] = local;
  if (threadIdx.x == 0) {
    result[0] = -1;  // the draw
    result[1] = -1;  // the last index with a nonzero value
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double running = 0.0;
    for (unsigned t = 0; t < blockDim.x; ++t) {
      const double s = sums[t];
      sums[t] = running;
      running += s;
    }
    sums[blockDim.x] = running;
  }
  __syncthreads();
  atomicMax(&result[1], last_nonzero);
  const double total = sums[blockDim.x];
  const double target = u * total;
  const double before = sums[threadIdx.x];
  if (local > 0.0 && target >= before && target < before + local) {
    double running = before;
    int pick = last_nonzero;
    for (int i = begin; i < end; ++i) {
      running += value(i);
      if (target < running) {
        pick = i;
        break;
      }
    }
    result[0] = pick;
  }
  __syncthreads();
  const int drawn = total > 0.0 ? (result[0] >= 0 ? result[0] : result[1]) : -1;
  __syncthreads();  // result may be reused by the caller
  return drawn;
}

// Calls f(T{}) with T the C++ type of `type`.
template <typename F> void dispatch(DType type, F&& f) {
  switch (type) {
    case DType::F32: f(float{}); return;
    case DType::F16: f(__half{}); return;
    case DType::BF16: f(__nv_bfloat16{}); return;
  }
}

inline unsigned blocks_for(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace specula::cuda
