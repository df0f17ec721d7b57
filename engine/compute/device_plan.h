// Host-side preparation for a device backend: how a batch's attention is split into work
// items and key ranges, the batch metadata packed for one upload, the device layout of every
// weight matrix and the conversion into it in upload-sized pieces, and the bytes a step
// reads. Plain C++, built and tested on every machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "compute/batch.h"
#include "model/model.h"
#include "model/tensor.h"

namespace specula::tiles {
enum class Format : int;  // kernels/quant_tiles.h
}

namespace specula {

// Up to `query_tile` consecutive new tokens of one batch sequence: the queries one attention
// block loads (for one KV head).
struct AttentionWork {
  int32_t seq = 0;          // batch sequence index
  int32_t first_token = 0;  // index into the batch's tokens
  int32_t n_queries = 0;    // 1 .. query_tile
};

// Splits every sequence's new tokens into items of at most `query_tile`, in token order,
// so a decoding sequence is one item and a verified draft of d tokens is ceil((d+1)/tile).
std::vector<AttentionWork> partition_attention(const BatchPlan& plan, int query_tile);

// Split-K attention. A work item's context (keys 0 .. position of its last query) is cut into
// pieces of `split_keys` keys at fixed positions (piece p: keys p * split_keys ..). A piece
// gives each query its partial softmax (max, sum, weighted values); a query's result is its
// non-empty pieces folded in piece order, so it depends on the query's position alone, never
// on the batch, its item or how its sequence's tokens were split across calls.
// A task is one block: all of an item's pieces in turn (prefill items), or one piece whose
// partial results go to rows of a scratch buffer that a second kernel folds (decode and
// verification items: few queries, so the pieces run in parallel). Both fold the same
// numbers in the same order: the same bits.
struct AttentionTask {
  int32_t work = 0;         // work item index
  int32_t first_piece = 0;
  int32_t n_pieces = 0;     // all of the item's pieces, or 1
  int32_t partial_row = 0;  // when 1 of several: its first scratch row (one per query vector)
};
struct AttentionTasks {
  std::vector<AttentionTask> tasks;
  std::vector<int32_t> first_task;  // (n_work + 1) where each item's tasks start
  int32_t partial_rows = 0;         // scratch rows the parallel pieces need
};
// Items of at most `parallel_queries` tokens with more than one piece run their pieces in
// parallel; every other item is one task. `group` query vectors per token (n_heads / n_kv_heads).
AttentionTasks plan_attention_tasks(const BatchPlan& plan, const std::vector<AttentionWork>& work, int split_keys,
                                    int parallel_queries, int group);

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
  size_t work = 0;           // (n_work, 5) seq, first token, query count, first task, task count
  size_t tasks = 0;          // (n_tasks, 4) AttentionTask
  size_t token_work = 0;     // (n_tokens) the work item holding each token
  int n_work = 0;
  int n_tasks = 0;
  int partial_rows = 0;
};
// How a device cuts attention: pieces of split_keys keys; items of at most parallel_queries
// tokens run their pieces in parallel; `group` query vectors per token.
struct AttentionShape {
  int query_tile = 16;
  int split_keys = 128;
  int parallel_queries = 8;
  int group = 1;
};
PackedPlan pack_plan(const BatchPlan& plan, const std::vector<int32_t>& tokens, const AttentionShape& shape);

// The capacities a step's metadata is packed at. A captured CUDA graph bakes in its grid
// sizes and the offsets of the metadata, so steps share a graph when they share a bucket:
// every count rounded up to a power of two (step_bucket), the padding inert: tokens with
// token id 0 at position 0 writing to `trash_slot`, no queries of their own, logit rows
// repeating row 0, empty work items and tasks.
struct StepBucket {
  int tokens = 0;        // new tokens (and product rows)
  int rows = 0;          // logit rows
  int seqs = 0;          // batch sequences
  int blocks = 0;        // block table entries
  int work = 0;          // attention work items, one of them spare for the padding
  int tasks = 0;         // attention tasks
  int partial_rows = 0;  // scratch rows of parallel pieces
  auto operator<=>(const StepBucket&) const = default;
};
// The exact counts of a packed plan.
StepBucket exact_bucket(const PackedPlan& packed, const BatchPlan& plan);
// Every count of `exact` rounded up to a power of two (and one spare work item).
StepBucket step_bucket(const StepBucket& exact);
// pack_plan at the bucket's capacities: the same entries as pack_plan for the plan's tokens,
// rows, sequences, items and tasks, at offsets fixed by the bucket, the rest inert padding.
PackedPlan pack_plan(const BatchPlan& plan, const std::vector<int32_t>& tokens, const AttentionShape& shape,
                     const StepBucket& bucket, int32_t trash_slot);

// ---- weights on the device ----

// The type a device computes a model in: its activations, KV cache and dense matrices. F32
// when every matrix is F32, BF16 when every one is BF16, otherwise F16.
TensorType device_compute_type(const Weights& weights);

// How one matrix (or several stacked row-wise) lives in device memory: quantized matrices
// (Q8_0, Q4_0, Q4_1, Q5_1, Q4_K, Q5_K, Q2_K, Q6_K, IQ4_XS; Q5_0 re-encoded as Q8_0
// (device_tiled_type), IQ4_NL and MXFP4 in Q8_0's tiles and Q3_K in Q6_K's) stay quantized, in
// the tiles of kernels/quant_tiles.h; the others are row-major in the compute
// type. Either way the image is `units` pieces of `unit_rows`
// rows (a tile row of 16, or one row), the granularity of conversion and upload.
struct DeviceMatrixLayout {
  TensorType type = TensorType::F16;  // F32, F16, BF16 (dense) or a tiled type
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t unit_rows = 1;   // 16 when tiled, else 1
  int64_t units = 0;       // ceil(rows / unit_rows)
  size_t unit_bytes = 0;   // bytes of one unit (a panel of tiles, or a row)

  bool tiled() const { return unit_rows > 1; }
  size_t bytes() const { return static_cast<size_t>(units) * unit_bytes; }
};
bool is_tiled_type(TensorType type);  // kept quantized on the device
// The type a tiled type's tiles hold: the type itself, but Q8_0 for Q5_0, which the device
// kernels have no tiles for (its values re-encoded exactly: convert_row_exact). The CPU
// kernels read Q5_0 as it is.
TensorType device_tiled_type(TensorType type);
// The tile format of a tiled type; std::invalid_argument for the others.
tiles::Format device_tile_format(TensorType type);
// The layout of a (rows, cols) matrix stored as `stored` on a device computing in `compute`.
DeviceMatrixLayout device_layout(TensorType stored, TensorType compute, int64_t rows, int64_t cols);

// Parts that are stacked into one device matrix: consecutive parts of one type share a
// product (wq|wk|wv, w_gate|w_up), a change of type starts a new group.
std::vector<std::vector<const TensorView*>> stack_by_type(std::span<const TensorView* const> parts);

// Writes units [first_unit, first_unit + n_units) of the device image of `parts` stacked
// row-wise (one type, one column count) into `dst` (n_units * layout.unit_bytes bytes).
// Rows past the last part are zero.
void write_device_units(std::span<const TensorView* const> parts, const DeviceMatrixLayout& layout,
                        int64_t first_unit, int64_t n_units, void* dst);
// The float the device reads at (row, col) of an image (for checks): for tiled layouts what
// dequantize_row gives, for dense ones the stored element.
float device_element(const DeviceMatrixLayout& layout, const void* image, int64_t row, int64_t col);

// A piece of an upload: whole units, at most `max_bytes` unless one unit is larger.
struct UploadChunk {
  int64_t first_unit = 0;
  int64_t n_units = 0;
  size_t offset = 0;  // bytes into the image
  size_t bytes = 0;
};
std::vector<UploadChunk> plan_upload(const DeviceMatrixLayout& layout, size_t max_bytes);

// Every matrix of a model in the device layouts, as a backend uploads them.
struct DeviceMatrixPlan {
  std::vector<const TensorView*> parts;  // stacked row-wise
  DeviceMatrixLayout layout;
};
struct DeviceLayerPlan {
  std::vector<DeviceMatrixPlan> qkv;      // wq|wk|wv, one matrix per run of equal types
  DeviceMatrixPlan wo;
  std::vector<DeviceMatrixPlan> gate_up;  // w_gate|w_up, likewise
  DeviceMatrixPlan down;
  size_t vector_bytes = 0;                // its norms, biases and q/k norms, f32
};
struct DeviceModelPlan {
  TensorType compute = TensorType::F16;
  DeviceMatrixPlan embedding;
  std::vector<DeviceLayerPlan> layers;
  DeviceMatrixPlan output;  // the embedding's when tied
  size_t final_norm_bytes = 0;  // f32
};
DeviceModelPlan plan_device_model(const Model& model);

// Why a device backend cannot run `model`, naming every stage of its forward the device
// kernels lack (gemma3's sliding-window attention, post-norms, GELU-tanh, scaled embedding,
// query scale; qwen3moe's experts; gpt-oss's sinks, YaRN and clamped SwiGLU), or "" when they run all
// of it: a device refuses such a model (ModelError)
// rather than compute a different one.
std::string device_refusal(const Model& model);

// Bytes of the device copy of the weights: every matrix in its device layout (a tied output
// once), norms, biases and q/k norms in f32.
size_t device_weight_bytes(const Model& model);
// Weight bytes one forward through the first `n_layers` layers (all when -1; then also the
// final norm and the output matrix) reads: every layer matrix, norm and bias once, the output
// matrix once (the embedding's when tied). Not the embedding rows gathered: a few per step.
size_t step_weight_bytes(const Model& model, int n_layers = -1);
// Key and value bytes attention reads for sequences of these context lengths (positions
// after the step), through `n_layers` layers, in the compute type.
size_t step_kv_bytes(const ModelConfig& config, TensorType compute, std::span<const int> contexts, int n_layers = -1);
// A layer's q, k and v biases as one f32 row laid out as its stacked wq|wk|wv rows (zeros
// for a part the model lacks), added to the fused product's output; empty when it has none.
std::vector<float> qkv_bias_row(const LayerWeights& layer);

}  // namespace specula
