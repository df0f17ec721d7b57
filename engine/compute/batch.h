// A ragged batch: several sequences, each with its own number of new tokens, no padding.
//
// Sequence i contributes tokens[offsets[i] .. offsets[i+1]), appended to its cache at
// positions length_i, length_i + 1, ... (EMS-SD's "unpad" layout). BatchPlan turns a
// batch and a cache into the flat metadata every backend consumes; it is host code
// shared by the CPU and CUDA backends.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace specula {

class KvCache;

struct RaggedBatch {
  std::vector<int32_t> seqs;         // (n_seqs) cache sequence id of each batch sequence
  std::vector<int32_t> offsets{0};   // (n_seqs + 1) start of each sequence's tokens
  std::vector<int32_t> tokens;       // (n_tokens)
  std::vector<uint8_t> want_logits;  // (n_tokens) 1 where the caller wants that row's logits

  // Adds a sequence's new tokens; logits for all of them, or only for the last.
  void add(int32_t seq, std::span<const int32_t> new_tokens, bool logits_for_all);
  int n_seqs() const { return static_cast<int>(seqs.size()); }
  int n_tokens() const { return static_cast<int>(tokens.size()); }
  int n_logit_rows() const;
  bool empty() const { return tokens.empty(); }
};

struct BatchPlan {
  int n_seqs = 0;
  int n_tokens = 0;
  int max_context = 0;                  // longest context_lengths entry
  std::vector<int32_t> token_seq;       // (n_tokens) batch sequence index of each token
  std::vector<int32_t> positions;       // (n_tokens) absolute position of each token
  std::vector<int32_t> cache_slots;     // (n_tokens) cache slot the token's key/value go to
  std::vector<int32_t> seq_offsets;     // (n_seqs + 1) = batch.offsets
  std::vector<int32_t> context_lengths; // (n_seqs) cache length after this batch
  std::vector<int32_t> table_offsets;   // (n_seqs + 1) into block_tables
  std::vector<int32_t> block_tables;    // concatenated block tables, after extension
  std::vector<int32_t> logit_rows;      // token indices whose logits are returned, in order
};

// Extends every sequence of `batch` in `cache` by its number of tokens and describes
// where everything goes. Throws std::invalid_argument for malformed batches (unknown or
// repeated sequence, empty sequence, context beyond `max_positions`) and
// std::runtime_error when the cache is full; the cache is unchanged on error.
BatchPlan plan_batch(KvCache& cache, const RaggedBatch& batch, int max_positions);

// One step's extension of the cache: plans the batch (extending every sequence) and, unless
// the step commits, truncates each sequence back to where it started when it goes out of
// scope. A step that fails after planning (out of device memory, a failed launch) thus
// leaves no sequence longer than the keys and values it holds.
class PlannedBatch {
 public:
  PlannedBatch(KvCache& cache, const RaggedBatch& batch, int max_positions);
  ~PlannedBatch();
  PlannedBatch(const PlannedBatch&) = delete;
  PlannedBatch& operator=(const PlannedBatch&) = delete;

  const BatchPlan& plan() const { return plan_; }
  void commit() { committed_ = true; }  // the step wrote every new key and value

 private:
  KvCache& cache_;
  const RaggedBatch& batch_;
  BatchPlan plan_;
  bool committed_ = false;
};

}  // namespace specula
