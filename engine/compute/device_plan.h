// Host-side preparation for a device backend: how a batch's attention is split into work
// items, the batch metadata packed for one upload, and weights converted to the element
// type the device computes in. Plain C++, built and tested on every machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compute/batch.h"
#include "model/model.h"
#include "model/tensor.h"

namespace specula {

// Up to `query_tile` consecutive new tokens of one batch sequence: the unit of work of the
// ragged attention kernel (one block per item and KV head).
struct AttentionWork {
  int32_t seq = 0;          // batch sequence index
  int32_t first_token = 0;  // index into the batch's tokens
  int32_t n_queries = 0;    // 1 .. query_tile
};

// Splits every sequence's new tokens into items of at most `query_tile`, in token order,
// so a decoding sequence is one item and a verified draft of d tokens is ceil((d+1)/tile).
std::vector<AttentionWork> partition_attention(const BatchPlan& plan, int query_tile);

// Everything a device forward needs from the host, in one int32 buffer; each field is the
// offset of its array in `data`.
struct PackedPlan {
  std::vector<int32_t> data;
  size_t tokens = 0;         // (n_tokens) token ids
  size_t positions = 0;      // (n_tokens)
  size_t cache_slots = 0;    // (n_tokens)
  size_t table_offsets = 0;  // (n_seqs + 1)
  size_t block_tables = 0;   // (table_offsets[n_seqs])
  size_t logit_rows = 0;     // (n_logit_rows)
  size_t work = 0;           // (n_work, 3) seq, first token, query count
  int n_work = 0;
};
PackedPlan pack_plan(const BatchPlan& plan, const std::vector<int32_t>& tokens,
                     const std::vector<AttentionWork>& work);

// The type a device keeps a model's matrices in: F32 when every matrix is F32, BF16 when
// every one is BF16, otherwise F16 (quantized matrices are expanded to fp16, which costs
// 2 bytes per weight instead of about 0.56 for Q4_K).
TensorType device_matrix_type(const Weights& weights);
// Converts a whole matrix to `type` (F32, F16 or BF16), rows * cols elements into `dst`.
void convert_matrix(const TensorView& src, TensorType type, void* dst);
// Bytes of the device copy of the weights: matrices in device_matrix_type, norms and
// biases in f32, the output matrix once more unless tied.
size_t device_weight_bytes(const Model& model);
// A layer's q, k and v biases as one f32 row laid out as its stacked wq|wk|wv rows (zeros
// for a part the model lacks), added to the fused product's output; empty when it has none.
std::vector<float> qkv_bias_row(const LayerWeights& layer);

}  // namespace specula
