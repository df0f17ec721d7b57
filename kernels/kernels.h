// Host interface of the CUDA kernels: what each launch computes and on which layouts.
//
// Activations are row-major, one row per token of the ragged batch (no padding). The
// residual stream and every product's output are fp32; the inputs of the dense products
// (normalized rows, attention output, SwiGLU output) are in the weights' type, because
// cuBLAS wants both operands of a product in one type. The KV cache is laid out by slot
// (block * block_size + offset), each slot holding kv_dim values in the cache type.
// Every launch is asynchronous on `stream`; a failed launch throws std::runtime_error.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "quant_tiles.h"

namespace specula::cuda {

enum class DType { F32, F16, BF16 };
size_t dtype_bytes(DType type);

// Sets what the kernels need set once per device (shared memory limits), before any launch
// or graph capture.
void prepare_kernels();

// Throws std::runtime_error naming `what` unless `status` is success.
void check(cudaError_t status, const char* what);
void check(cublasStatus_t status, const char* what);

// out[t][:] = table[tokens[t]][:] as fp32. Token ids are checked on the host.
void embedding(const void* table, DType type, int dim, const int32_t* tokens, int n_tokens,
               float* out, cudaStream_t stream);
struct QuantMatrix;
// The same from a quantized table: each value exactly what dequantize_row gives.
void embedding(const QuantMatrix& table, const int32_t* tokens, int n_tokens, float* out, cudaStream_t stream);

// out[r][:] = x[src][:] / rms(x[src]) * weight, src = rows ? rows[r] : r, written in out_type.
void rmsnorm(const float* x, const float* weight, const int32_t* rows, int n_rows, int dim,
             float eps, void* out, DType out_type, cudaStream_t stream);

// x[r] += y[r], then out[r] = x[r] / rms(x[r]) * weight: residual_add and rmsnorm in one pass,
// the same bits.
void residual_rmsnorm(float* x, const float* y, const float* weight, int n_rows, int dim, float eps, void* out,
                      DType out_type, cudaStream_t stream);

// Which columns of a head the rotary embedding turns together: (2i, 2i+1) or (i, i + d/2).
enum class RopeLayout { AdjacentPairs, Halves };

// Rotates pair i of each of the first n_rot_heads heads (head_dim columns each, from column
// 0) of every row of `qk` (row stride `row_stride`) by positions[t] * frequencies[i], in
// place. `frequencies` (head_dim / 2 doubles, device memory) is the model's table, scaling
// included (ModelConfig::rope_frequencies).
void rope(float* qk, int row_stride, const int32_t* positions, int n_tokens, int n_rot_heads,
          int head_dim, const double* frequencies, RopeLayout layout, cudaStream_t stream);

// rows[t][i] += bias[i] for t < n_rows, i < width (row stride `row_stride`), in place.
void add_bias(float* rows, int row_stride, int n_rows, const float* bias, int width, cudaStream_t stream);

// Each of the first n_heads heads (head_dim columns each, from column 0) of every row of `x`
// (row stride `row_stride`) becomes head / rms(head) * weight, in place (qwen3's q/k norms).
void head_rmsnorm(float* x, int row_stride, int n_rows, int n_heads, int head_dim, const float* weight, float eps,
                  cudaStream_t stream);

// rope over the q and k heads of each q|k|v row, then the kv_write of its rotated key and its
// value into its cache slot: the two launches in one, the same bits.
struct RopeKvArgs {
  float* qkv = nullptr;  // (n_tokens, row_stride): q (n_heads * head_dim), k, v (n_kv_heads * head_dim each)
  int row_stride = 0;
  int n_tokens = 0;
  const int32_t* positions = nullptr;  // (n_tokens)
  const int32_t* cache_slots = nullptr;  // (n_tokens) cache slot of each token
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  const double* frequencies = nullptr;  // (head_dim / 2) the model's rope table, as for rope
  RopeLayout layout = RopeLayout::AdjacentPairs;
  void* k_cache = nullptr;  // (slots, n_kv_heads * head_dim) in cache_type
  void* v_cache = nullptr;
  DType cache_type = DType::F32;
};
void rope_kv_write(const RopeKvArgs& args, cudaStream_t stream);

// out[t][i] = silu(gate_up[t][i]) * gate_up[t][hidden + i], written in out_type.
void swiglu(const float* gate_up, int n_tokens, int hidden, void* out, DType out_type,
            cudaStream_t stream);

// x[i] += y[i]
void residual_add(float* x, const float* y, int64_t n, cudaStream_t stream);

// k_cache[slots[t]][:] = qkv[t][k_offset + :], v_cache[slots[t]][:] = qkv[t][v_offset + :].
void kv_write(const float* qkv, int row_stride, int k_offset, int v_offset, const int32_t* slots,
              int n_tokens, int kv_dim, void* k_cache, void* v_cache, DType cache_type,
              cudaStream_t stream);

struct AttentionArgs {
  const float* qkv = nullptr;      // (n_tokens, row_stride) queries (n_heads * head_dim) at column 0, pre-RoPE'd
  int row_stride = 0;
  int n_tokens = 0;
  const void* k_cache = nullptr;   // (slots, n_kv_heads * head_dim) in cache_type
  const void* v_cache = nullptr;
  DType cache_type = DType::F32;
  const int32_t* work = nullptr;   // (n_work, 5): batch sequence, first token, query count, first task, tasks
  const int32_t* tasks = nullptr;  // (n_tasks, 4): work item, first piece, pieces, first scratch row
  int n_tasks = 0;
  const int32_t* token_work = nullptr;     // (n_tokens) work item of each token
  const int32_t* positions = nullptr;      // (n_tokens) absolute position of each token
  const int32_t* table_offsets = nullptr;  // (n_seqs + 1) into block_tables
  const int32_t* block_tables = nullptr;   // concatenated block tables
  int block_size = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int partial_rows = 0;            // scratch rows of the parallel pieces (device_plan.h)
  float* partial_values = nullptr; // (partial_rows, n_kv_heads, head_dim)
  float* partial_stats = nullptr;  // (partial_rows, n_kv_heads, 2): piece max, piece sum
  void* out = nullptr;             // (n_tokens, n_heads * head_dim) in cache_type
};
// Causal attention of every query over its sequence's cache up to its own position, split
// into pieces of attention_piece_keys() keys (see attention.cu and device_plan.h).
void paged_attention(const AttentionArgs& args, cudaStream_t stream);
// Queries of one sequence that one attention work item handles.
int attention_query_tile(int n_heads, int n_kv_heads);
// Keys per piece of split-K attention: fixed, so a query's pieces depend on its position alone.
int attention_piece_keys();

enum class GemmMode {
  Cublas,     // cublasGemmEx, fp32 accumulation; the algorithm may depend on m
  Invariant,  // own kernel: each output's reduction order depends on k alone
};
// y[i * ldy + j] = sum_l x[i][l] * w[j][l]: x (m, k) and w (n, k) row-major in `type`,
// y fp32 with row stride ldy >= n (several products fill the columns of one output).
void gemm(cublasHandle_t handle, GemmMode mode, const void* x, const void* w, DType type, int m,
          int n, int k, float* y, int ldy, cudaStream_t stream);

// A matrix kept quantized on the device, in the tiles of quant_tiles.h.
struct QuantMatrix {
  tiles::Format format = tiles::Format::Q8_0;
  const void* data = nullptr;  // tiles::Shape{format, rows, cols}.bytes() bytes
  int rows = 0;
  int cols = 0;
};
// y[i * ldy + j] = sum_l x[i][l] * w[j][l] for i < m, j < w.rows, x (m, w.cols) fp16
// row-major: tensor cores on codes decoded in registers, the weights read once (see
// qmatmul.cu). Each output's reduction order depends on w's shape and the device alone, so
// this is also the batch-invariant product. `scratch` holds quant_gemm_scratch(w, m) floats.
void quant_gemm(const QuantMatrix& w, const void* x, int m, float* y, int ldy, float* scratch, cudaStream_t stream);
size_t quant_gemm_scratch(const QuantMatrix& w, int m);
// out (n_rows, w.cols) fp16 row-major = rows [first_row, first_row + n_rows) of w, each value
// what dequantize_row gives, rounded once; first_row a multiple of 16. For prefill products
// on cuBLAS.
void dequantize_rows(const QuantMatrix& w, int first_row, int n_rows, void* out, cudaStream_t stream);

// out[r] = index of the largest logits[r][:], the lowest index on ties.
void argmax_rows(const float* logits, int n_rows, int vocab, int32_t* out, cudaStream_t stream);

// probs[r] = softmax(logits[r] / temperature[r]) with every value below the top_k[r]-th
// largest (0: off), outside the smallest set of largest values holding top_p[r] of the
// mass (1: off) and below min_p[r] * max (0: off) set to zero, renormalized, as the CPU
// sampler does. Ties at a threshold are kept.
// temperature[r] <= 0 gives the one-hot distribution on the argmax.
void sampling_probs(const float* logits, int n_rows, int vocab, const float* temperature,
                    const int32_t* top_k, const float* top_p, const float* min_p, float* probs,
                    cudaStream_t stream);

// out[r] = the first index i whose running sum of probs[r] exceeds uniforms[r] * sum.
void sample_rows(const float* probs, int n_rows, int vocab, const float* uniforms, int32_t* out,
                 cudaStream_t stream);

// The speculative accept/reject draw for draft token d = draft_tokens[r] proposed with
// draft_probs[r] against target_probs[r]: accepted[r] = u_accept[r] * q[d] < p[d], that is
// with probability min(1, p[d] / q[d]); residual[r] = a draw (u_residual[r]) from
// max(0, p - q) normalized, the token to emit when rejected.
void speculative_verify(const float* target_probs, const float* draft_probs,
                        const int32_t* draft_tokens, int n_rows, int vocab,
                        const float* u_accept, const float* u_residual, int32_t* accepted,
                        int32_t* residual, cudaStream_t stream);

// Acceptance of verification rows (acceptance_rule.h), one block per sequence.
struct AcceptArgs {
  const float* logits = nullptr;       // (n_rows, vocab), each sequence's rows consecutive
  const float* probs = nullptr;        // (n_rows, vocab) sampling_probs of the logits; unused when greedy
  const float* draft_probs = nullptr;  // rows of draft distributions, for the sequences that have them
  const int32_t* seq_rows = nullptr;   // (n_seqs + 1) first row of each sequence: its last token's
  const int32_t* draft_rows = nullptr; // (n_seqs) first row of its draft distributions, -1: one-hot
  const int32_t* tokens = nullptr;     // (n_rows) the batch tokens: row r + 1 holds draft token r
  const double* uniforms = nullptr;    // (n_seqs, stride) drawn from copies of each sequence's generator
  int stride = 0;                      // longest draft + 1
  int n_seqs = 0;
  int vocab = 0;
  int rule = 0;                        // acceptance::Rule
  int greedy_sampling = 0;             // the target's own token is an argmax (forced acceptance)
  double alpha = 0.0;                  // forced acceptance rate
  int32_t* out_tokens = nullptr;       // (n_seqs, stride + 1): tokens kept, then the tokens
  float* out_logprobs = nullptr;       // (n_seqs, stride): their log-probabilities at T = 1
};
void accept_rows(const AcceptArgs& args, cudaStream_t stream);

}  // namespace specula::cuda
