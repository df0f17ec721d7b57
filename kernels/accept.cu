// Acceptance on the device: each sequence's verification rows decided where the logits are,
// so a step copies back a few numbers per sequence (what it keeps and their log-probabilities)
// instead of every row of logits.
//
// One block per sequence runs acceptance_rule.h's decide() with block-wide argmax and
// inverse-CDF draws over its rows (the uniforms come from the host, drawn from copies of the
// sequences' own generators), then the T = 1 log-probability of every kept token, its sum of
// exponentials in double as the host's token_logprob takes it.
#include "acceptance_rule.h"
#include "common.cuh"

namespace specula::cuda {

namespace {

// one block per sequence; the launch bound keeps the compiler within 64 registers a thread
constexpr int kThreads = 1024;

struct Scratch {
  float values[32];
  int indices[32];
  double sums[kThreads + 1];
  int result[2];
};

// Verification row j of one sequence, as decide() asks for it.
struct DeviceRows {
  const AcceptArgs& a;
  int row0;           // the sequence's first row
  const int* draft;   // its draft tokens
  const float* draft_q;  // its draft distributions, or null for one-hot drafts
  Scratch& s;

  __device__ const float* logits(int j) const { return a.logits + static_cast<int64_t>(row0 + j) * a.vocab; }
  __device__ const float* probs(int j) const { return a.probs + static_cast<int64_t>(row0 + j) * a.vocab; }
  __device__ int argmax(int j) {
    const float* row = logits(j);
    return block_argmax([&](int i) { return row[i]; }, a.vocab, s.values, s.indices);
  }
  __device__ float p(int j, int t) const { return probs(j)[t]; }
  __device__ float q(int j, int t) const {
    return draft_q ? draft_q[static_cast<int64_t>(j) * a.vocab + t] : (t == draft[j] ? 1.0f : 0.0f);
  }
  __device__ int draw(int j, double u) {
    const float* row = probs(j);
    return max(block_draw([&](int i) { return row[i]; }, a.vocab, u, s.sums, s.result), 0);
  }
  __device__ int draw_residual(int j, double u) {
    const float* row = probs(j);
    const int drawn = block_draw([&](int i) { return fmaxf(row[i] - q(j, i), 0.0f); }, a.vocab, u, s.sums, s.result);
    return drawn >= 0 ? drawn : draw(j, u);  // p == q: p itself is the law
  }
};

__global__ void __launch_bounds__(kThreads) accept_kernel(AcceptArgs a) {
  __shared__ Scratch s;
  const int seq = blockIdx.x;
  const int row0 = a.seq_rows[seq], d = a.seq_rows[seq + 1] - row0 - 1;
  const int* draft = a.tokens + row0 + 1;
  const float* q = a.draft_rows[seq] >= 0 ? a.draft_probs + static_cast<int64_t>(a.draft_rows[seq]) * a.vocab : nullptr;
  DeviceRows rows{a, row0, draft, q, s};
  const acceptance::Decision v = acceptance::decide(static_cast<acceptance::Rule>(a.rule), a.greedy_sampling != 0,
                                                    a.alpha, d, draft, a.uniforms + seq * a.stride, rows);
  int32_t* out = a.out_tokens + seq * (a.stride + 1);
  if (threadIdx.x == 0) out[0] = v.accepted;
  for (int r = 0; r <= v.accepted; ++r) {
    const int token = r < v.accepted ? draft[r] : v.next;
    const float* row = rows.logits(r);
    float m = -INFINITY;
    for (int i = threadIdx.x; i < a.vocab; i += blockDim.x) m = fmaxf(m, row[i]);
    m = block_max(m, s.values);
    double sum = 0.0;
    for (int i = threadIdx.x; i < a.vocab; i += blockDim.x) sum += exp(static_cast<double>(row[i]) - m);
    sum = block_sum_double(sum, s.sums);
    if (threadIdx.x == 0) {
      out[1 + r] = token;
      a.out_logprobs[seq * a.stride + r] = static_cast<float>(static_cast<double>(row[token]) - m - log(sum));
    }
    __syncthreads();  // the scratch is reused by the next row
  }
}

}  // namespace

void accept_rows(const AcceptArgs& args, cudaStream_t stream) {
  if (args.n_seqs == 0) return;
  accept_kernel<<<static_cast<unsigned>(args.n_seqs), kThreads, 0, stream>>>(args);
  check(cudaGetLastError(), "accept_rows");
}

}  // namespace specula::cuda
