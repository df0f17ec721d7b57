// Naive float64 references of the CUDA kernels, one function per kernel, written straight
// from the definitions in kernels.h. The device checks compare every kernel against these.
#pragma once

#include <cstdint>
#include <vector>

namespace specula::cuda::reference {

std::vector<double> embedding(const std::vector<float>& table, int dim, const std::vector<int32_t>& tokens);
std::vector<double> rmsnorm(const std::vector<float>& x, const std::vector<float>& weight,
                            const std::vector<int32_t>& rows, int dim, float eps);
// Returns the rotated copy of qk; `halves` pairs (i, i + head_dim/2), else (2i, 2i+1).
std::vector<double> rope(const std::vector<float>& qk, int row_stride, const std::vector<int32_t>& positions,
                         int n_rot_heads, int head_dim, const std::vector<double>& frequencies, bool halves);
std::vector<double> add_bias(const std::vector<float>& rows, int row_stride, const std::vector<float>& bias);
// Returns the copy of x whose first n_heads heads of each row are normalized.
std::vector<double> head_rmsnorm(const std::vector<float>& x, int row_stride, int n_heads, int head_dim,
                                 const std::vector<float>& weight, float eps);
std::vector<double> swiglu(const std::vector<float>& gate_up, int hidden);
std::vector<double> gemm(const std::vector<float>& x, const std::vector<float>& w, int m, int n, int k);

// Causal attention of each new token over its sequence's keys 0..position, read through
// slots = block_tables[table_offsets[s] + j / block_size] * block_size + j % block_size.
struct AttentionCase {
  int n_heads = 0, n_kv_heads = 0, head_dim = 0, block_size = 0;
  std::vector<float> q;                // (n_tokens, n_heads * head_dim)
  std::vector<float> k_cache, v_cache; // (slots, n_kv_heads * head_dim)
  std::vector<int32_t> token_seq, positions, table_offsets, block_tables;
};
std::vector<double> attention(const AttentionCase& c);

int argmax(const float* row, int vocab);
std::vector<double> sampling_probs(const float* row, int vocab, float temperature, int top_k, float top_p,
                                   float min_p);
int sample(const float* probs, int vocab, float u);
struct Verdict {
  bool accepted;
  int residual;
};
Verdict verify(const float* p, const float* q, int vocab, int draft_token, float u_accept, float u_residual);

}  // namespace specula::cuda::reference
