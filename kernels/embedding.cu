// Embedding gather: copies each token's row of the embedding table into the fp32 residual
// stream. One thread per output element, so rows of any width stay coalesced; a quantized
// table is decoded value by value (a few rows per step, so the simple decoder will do).
#include "common.cuh"

namespace specula::cuda {

template <typename T>
__global__ void embedding_kernel(const T* table, int dim, const int32_t* tokens, int n_tokens,
                                 float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(n_tokens) * dim) return;
  const int64_t t = i / dim, c = i % dim;
  out[i] = to_float(table[static_cast<int64_t>(tokens[t]) * dim + c]);
}

__global__ void embedding_tiles_kernel(tiles::Shape shape, const uint8_t* table, const int32_t* tokens, int n_tokens,
                                       float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_tokens * shape.cols) return;
  const int64_t t = i / shape.cols, c = i % shape.cols;
  out[i] = tiles::element(shape, table, tokens[t], c);
}

void embedding(const QuantMatrix& table, const int32_t* tokens, int n_tokens, float* out, cudaStream_t stream) {
  if (n_tokens == 0) return;
  const tiles::Shape shape{table.format, table.rows, table.cols};
  embedding_tiles_kernel<<<blocks_for(static_cast<int64_t>(n_tokens) * table.cols, 256), 256, 0, stream>>>(
      shape, static_cast<const uint8_t*>(table.data), tokens, n_tokens, out);
  check(cudaGetLastError(), "embedding");
}

void embedding(const void* table, DType type, int dim, const int32_t* tokens, int n_tokens,
               float* out, cudaStream_t stream) {
  if (n_tokens == 0) return;
  dispatch(type, [&](auto zero) {
    using T = decltype(zero);
    embedding_kernel<T><<<blocks_for(static_cast<int64_t>(n_tokens) * dim, 256), 256, 0, stream>>>(
        static_cast<const T*>(table), dim, tokens, n_tokens, out);
  });
  check(cudaGetLastError(), "embedding");
}

}  // namespace specula::cuda
