// The distribution a sampled step draws from, computed where the logits are: softmax at the
// row's temperature, then the top-k, top-p and min-p filters, renormalized.
//
// One block per row. Top-k and top-p need a threshold, not a sort: a probability is a
// non-negative float, so its bit pattern orders like the value, and a bisection on the
// bits (31 steps, each one block-wide count or sum) finds the k-th largest value and the
// nucleus boundary exactly. Everything at a threshold is kept, so ties never depend on
// the order of the vocabulary (the CPU sampler keeps the lower ids of a tie instead; the
// two differ only when logits tie exactly at a threshold).
#include "common.cuh"

namespace specula::cuda {

// one block per row; the launch bound keeps the compiler within 64 registers a thread
constexpr int kThreads = 1024;

namespace {

// Largest bit pattern t in [0, +inf) with measure(t) >= goal, for a measure that does not
// grow with t.
template <typename F>
__device__ uint32_t bisect_threshold(F measure, float goal) {
  uint32_t lo = 0, hi = 0x7f800000u;  // lo = 0 is the answer when even t = 0 falls short
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (measure(mid) >= goal) lo = mid; else hi = mid;
  }
  return lo;
}

__global__ void __launch_bounds__(kThreads)
    sampling_probs_kernel(const float* logits, int vocab, const float* temperature, const int32_t* top_k,
                          const float* top_p, const float* min_p, float* probs) {
  __shared__ float scratch[32];
  __shared__ int scratch_i[32];
  const int r = blockIdx.x;
  const float* row = logits + static_cast<int64_t>(r) * vocab;
  float* p = probs + static_cast<int64_t>(r) * vocab;
  if (temperature[r] <= 0.0f) {
    const int best = block_argmax([&](int i) { return row[i]; }, vocab, scratch, scratch_i);
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) p[i] = i == best ? 1.0f : 0.0f;
    return;
  }
  // unnormalized softmax: the largest entry is exactly 1
  float m = -INFINITY;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) m = fmaxf(m, row[i]);
  m = block_max(m, scratch);
  const float inv_t = 1.0f / temperature[r];
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) p[i] = expf((row[i] - m) * inv_t);
  __syncthreads();

  uint32_t keep_from = 0;  // bit pattern of the smallest kept value
  const auto bits = [&](int i) { return __float_as_uint(p[i]); };
  if (top_k[r] > 0 && top_k[r] < vocab) {
    keep_from = bisect_threshold(
        [&](uint32_t t) {
          float count = 0.0f;
          for (int i = threadIdx.x; i < vocab; i += blockDim.x) count += bits(i) >= t ? 1.0f : 0.0f;
          return block_sum(count, scratch);
        },
        static_cast<float>(top_k[r]));
  }
  if (top_p[r] < 1.0f) {
    const auto mass_from = [&](uint32_t t) {
      float sum = 0.0f;
      for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
        if (bits(i) >= t && bits(i) >= keep_from) sum += p[i];
      }
      return block_sum(sum, scratch);
    };
    // the nucleus is measured against the whole distribution, as the CPU sampler does; when
    // the top-k set holds less than top_p of it, no threshold above 0 qualifies and the
    // top-k set stays
    float total = 0.0f;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) total += p[i];
    const float goal = fmaxf(top_p[r] * block_sum(total, scratch), FLT_MIN);
    keep_from = max(keep_from, bisect_threshold(mass_from, goal));
  }
  if (min_p[r] > 0.0f) keep_from = max(keep_from, __float_as_uint(min_p[r]));  // max is 1

  float kept = 0.0f;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) kept += bits(i) >= keep_from ? p[i] : 0.0f;
  kept = block_sum(kept, scratch);
  const float inv_kept = 1.0f / kept;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) p[i] = bits(i) >= keep_from ? p[i] * inv_kept : 0.0f;
}

}  // namespace

void sampling_probs(const float* logits, int n_rows, int vocab, const float* temperature,
                    const int32_t* top_k, const float* top_p, const float* min_p, float* probs,
                    cudaStream_t stream) {
  if (n_rows == 0) return;
  sampling_probs_kernel<<<n_rows, kThreads, 0, stream>>>(logits, vocab, temperature, top_k, top_p,
                                                      min_p, probs);
  check(cudaGetLastError(), "sampling_probs");
}

}  // namespace specula::cuda
