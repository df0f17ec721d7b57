// SwiGLU: silu(gate) * up from the fused gate|up product, written in the type of w_down so
// the next product reads it directly. One thread per output element.
#include "common.cuh"

namespace specula::cuda {

template <typename T>
__global__ void swiglu_kernel(const float* gate_up, int n_tokens, int hidden, T* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(n_tokens) * hidden) return;
  const int64_t t = i / hidden, c = i % hidden;
  const float g = gate_up[t * 2 * hidden + c];
  const float u = gate_up[t * 2 * hidden + hidden + c];
  out[i] = from_float<T>(g / (1.0f + expf(-g)) * u);
}

void swiglu(const float* gate_up, int n_tokens, int hidden, void* out, DType out_type,
            cudaStream_t stream) {
  if (n_tokens == 0) return;
  dispatch(out_type, [&](auto zero) {
    using T = decltype(zero);
    swiglu_kernel<T><<<blocks_for(static_cast<int64_t>(n_tokens) * hidden, 256), 256, 0, stream>>>(
        gate_up, n_tokens, hidden, static_cast<T*>(out));
  });
  check(cudaGetLastError(), "swiglu");
}

}  // namespace specula::cuda
