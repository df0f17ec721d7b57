// Kernels of the CPU backend: y = x · Wᵀ for a batch of activation rows, and attention over
// the paged cache.
//
// Every weight matrix is repacked once (pack_matrix) into panels that a tile reads as one
// contiguous stream. Float weights (F32, F16, BF16) lie in panels of 3 or 4 rows,
// interleaved one vector of each row at a time, and meet f32 activations. Quantized weights
// (Q8_0, Q4_0, Q4_K, Q6_K) lie in panels of as many rows as the SIMD level has 32-bit lanes,
// interleaved so that one vector load holds 4 consecutive values of every row of the panel;
// they meet activations quantized to 8 bits
// (per 32 values for Q8_0 / Q4_0, per 256 with 16- and 32-value sums for the K-quants),
// with exact integer dot products inside each block and one float update per block, row
// lane and token. docs/cpu_backend.md describes the layouts.
//
// Batch invariance: each output element y[t][r] is computed by one fixed sequence of
// operations, whatever the number of tokens in the call, the tile it falls in, the split
// of the rows across threads and the thread count. Tiles (several rows × several tokens)
// only share loaded weights and activations between accumulators; they never change the
// order of operations of any one of them.
//
// SIMD is chosen at run time; each variant is compiled for its own instruction set in its
// own translation unit, so the binary runs on any x86-64.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "compute/simd_level.h"
#include "model/tensor.h"

namespace specula {

class ThreadPool;

// A weight matrix in the form the kernels of one SIMD level read.
struct PackedMatrix {
  TensorType type = TensorType::F32;
  int64_t rows = 0;          // output rows
  int64_t cols = 0;          // values per row (the reduction length)
  SimdLevel level = SimdLevel::Portable;
  int panel_rows = 1;        // rows per panel: 3 or 4 for float types, the level's lanes for quantized ones (16 for Q4_K on AVX2)
  size_t panel_bytes = 0;    // bytes from one panel to the next
  // Whether a tile of one token prefetches the weight stream ahead of itself, or leaves it to
  // the hardware prefetchers: set by packed_layout for the processor and type (which is
  // faster depends on both; cpu_kernel_templates.h, prefetch_ahead). Tiles of several tokens
  // always prefetch. Either way every output bit is the same.
  bool one_token_prefetch = true;
  std::shared_ptr<uint8_t[]> owned;   // the panels
  size_t owned_bytes = 0;             // size of `owned`

  const uint8_t* data() const { return owned.get(); }  // the first panel
  int64_t panels() const { return (rows + panel_rows - 1) / panel_rows; }
};

// The layout pack_matrix gives `w` at `level`: every field but `owned`, so owned_bytes is what
// packing will allocate. Throws std::invalid_argument when w.cols is not a whole number of
// blocks or the processor cannot run `level`.
PackedMatrix packed_layout(const TensorView& w, SimdLevel level);
// `w` in the layout of `level`, repacked by `pool`'s threads into panels the result owns.
// Throws as packed_layout does.
PackedMatrix pack_matrix(const TensorView& w, SimdLevel level, ThreadPool& pool);

// y (n, w.rows) = x (n, w.cols) · wᵀ with the kernels of w.level. `x` and `y` are row-major.
void matmul(const PackedMatrix& w, const float* x, int n, float* y, ThreadPool& pool);

// Several products of one input: y_i = x · w_iᵀ for matrices of the same column count (a
// layer's q, k and v; its gate and up), in one job of the pool over all their panels, with
// x quantized once for each format the matrices read. Each y_i holds the bits matmul()
// gives it; what the group saves is the hand-offs: one start and one wait where separate
// products pay one each, and no thread idles at one product's end while the next waits.
// Throws std::invalid_argument when the column counts differ.
struct MatrixProduct {
  const PackedMatrix* w;
  float* y;  // (n, w->rows)
};
void matmul_shared_input(std::span<const MatrixProduct> products, const float* x, int n, ThreadPool& pool);

// Activations for Q8_0 and Q4_0 weights (the kernels' input format, public for tests). A row
// of n values becomes n int8 values q (value ≈ scale · q, q in [-127, 127]), then one float
// scale per 32-value block, then one int32 offset per block: -bias · (sum of the block's q),
// which turns a dot product with unsigned weights (w + bias) into the signed one.
struct Q8Row {
  const int8_t* values;    // (n)
  const float* scales;     // (n / 32)
  const int32_t* offsets;  // (n / 32)
};
inline size_t q8_row_bytes(int64_t n) { return static_cast<size_t>(n + n / 32 * 8); }
inline Q8Row q8_row(const uint8_t* row, int64_t n) {
  return {reinterpret_cast<const int8_t*>(row), reinterpret_cast<const float*>(row + n),
          reinterpret_cast<const int32_t*>(row + n + n / 32 * 4)};
}
void quantize_activations_q8(const float* x, uint8_t* out, int64_t n, int32_t bias,
                             SimdLevel level = SimdLevel::Portable);

struct BlockQ8K {      // 256 activations for Q4_K and Q6_K weights
  float d;             // scale: value ≈ d · q
  int16_t sums16[16];  // sum of q over each 16 values (Q6_K's offsets)
  int16_t sums32[8];   // sum of q over each 32 values (Q4_K's minimums)
  int8_t q[256];       // quantized values in [-127, 127]
};
void quantize_activations_q8k(const float* x, BlockQ8K* out, int64_t n,
                              SimdLevel level = SimdLevel::Portable);

// One token's attention for the query heads that share one KV head, over positions
// 0 .. length-1 of its sequence in the paged cache: out_h = Σ_p softmax_p(q_h·k_p · scale) v_p.
// With sinks (gpt-oss), each head's softmax has one more logit, sink_h, in its denominator:
// exp(s_p) / (Σ exp(s_p') + exp(sink_h)), a share of the attention that goes to no value.
struct AttentionArgs {
  const float* q = nullptr;              // (heads, head_dim): the group's query heads
  const float* keys = nullptr;           // the layer's cache keys: (slots, kv_dim)
  const float* values = nullptr;         // the layer's cache values: (slots, kv_dim)
  int kv_dim = 0;                        // floats per cache slot
  int kv_offset = 0;                     // the KV head's first float within a slot
  const int32_t* block_table = nullptr;  // the sequence's cache blocks (position / block_size)
  int block_size = 0;                    // positions per cache block
  int start = 0;                         // first position attended (a sliding window's oldest key)
  int length = 0;                        // positions [start, length) are attended
  int heads = 0;                         // query heads sharing the KV head
  int head_dim = 0;                      // floats per head
  float scale = 0.0f;                    // score scale, 1 / sqrt(head_dim)
  const float* sinks = nullptr;          // (heads) sink logits, or null for none
  float* scores = nullptr;               // scratch of heads · (length - start) floats
  const float** rows = nullptr;          // scratch of 2 · (length - start) pointers
  float* out = nullptr;                  // (heads, head_dim) results
};
void attend(const AttentionArgs& args, SimdLevel level);

// log Σ_i exp(x_i) over n values (n ≥ 1; the normaliser of a log-softmax), with the
// vector exp of `level` (relative error of each term about 1e-7, the sum kept in double).
double log_sum_exp(const float* x, int64_t n, SimdLevel level);

// Multiply-adds per second one core sustains for the arithmetic of `type`'s kernel at
// `level` with every operand in registers (the kernel's instruction mix, without its
// loads): the peak its many-token tiles can approach. Runs for about `seconds` of CPU time.
double peak_multiply_adds_per_second(TensorType type, SimdLevel level, double seconds = 0.2);

// Multiply-adds per second one core sustains through `w`'s kernel at `level` for `tokens`
// tokens with the weights in its cache: the first whole panels of `w` that fit in
// `cache_bytes`, multiplied by the same activations (quantized once) over and over, for
// about `seconds` of CPU time. Against the peak it says how close the tile's own work comes
// to the limit; against a forward streaming the weights from memory, how much of that
// forward waits for them.
double in_cache_multiply_adds_per_second(const TensorView& w, SimdLevel level, int tokens,
                                         size_t cache_bytes = size_t{256} << 10, double seconds = 0.05);

}  // namespace specula
