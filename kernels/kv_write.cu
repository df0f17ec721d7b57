// Writes each new token's key and value into its cache slot (block * block_size + offset,
// given by the host plan), converting to the cache type. One thread per value; the slot
// indirection is what lets forked sequences share blocks and roll back by truncation.
#include "common.cuh"

namespace specula::cuda {

template <typename T>
__global__ void kv_write_kernel(const float* qkv, int row_stride, int k_offset, int v_offset,
                                const int32_t* slots, int n_tokens, int kv_dim, T* k_cache,
                                T* v_cache) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(n_tokens) * kv_dim) return;
  const int64_t t = i / kv_dim, c = i % kv_dim;
  const int64_t dst = static_cast<int64_t>(slots[t]) * kv_dim + c;
  k_cache[dst] = from_float<T>(qkv[t * row_stride + k_offset + c]);
  v_cache[dst] = from_float<T>(qkv[t * row_stride + v_offset + c]);
}

void kv_write(const float* qkv, int row_stride, int k_offset, int v_offset, const int32_t* slots,
              int n_tokens, int kv_dim, void* k_cache, void* v_cache, DType cache_type,
              cudaStream_t stream) {
  if (n_tokens == 0) return;
  dispatch(cache_type, [&](auto zero) {
    using T = decltype(zero);
    kv_write_kernel<T><<<blocks_for(static_cast<int64_t>(n_tokens) * kv_dim, 256), 256, 0, stream>>>(
        qkv, row_stride, k_offset, v_offset, slots, n_tokens, kv_dim, static_cast<T*>(k_cache),
        static_cast<T*>(v_cache));
  });
  check(cudaGetLastError(), "kv_write");
}

}  // namespace specula::cuda
