#include "compute/batch.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "compute/kv_cache.h"

namespace specula {

void RaggedBatch::add(int32_t seq, std::span<const int32_t> new_tokens, bool logits_for_all) {
  seqs.push_back(seq);
  tokens.insert(tokens.end(), new_tokens.begin(), new_tokens.end());
  for (size_t i = 0; i < new_tokens.size(); ++i) {
    want_logits.push_back(logits_for_all || i + 1 == new_tokens.size() ? 1 : 0);
  }
  offsets.push_back(static_cast<int32_t>(tokens.size()));
}

int RaggedBatch::n_logit_rows() const {
  return static_cast<int>(std::count(want_logits.begin(), want_logits.end(), uint8_t{1}));
}

namespace {

void check_shape(const KvCache& cache, const RaggedBatch& batch, int max_positions) {
  const size_t n_seqs = batch.seqs.size();
  if (batch.offsets.size() != n_seqs + 1 || batch.offsets.front() != 0 ||
      batch.offsets.back() != static_cast<int32_t>(batch.tokens.size()) ||
      batch.want_logits.size() != batch.tokens.size()) {
    throw std::invalid_argument("malformed ragged batch: offsets, tokens and logit flags disagree");
  }
  std::unordered_set<int32_t> seen;
  for (size_t i = 0; i < n_seqs; ++i) {
    const int32_t seq = batch.seqs[i];
    if (!cache.alive(seq)) throw std::invalid_argument("batch names unknown sequence " + std::to_string(seq));
    if (!seen.insert(seq).second) throw std::invalid_argument("batch names sequence " + std::to_string(seq) + " twice");
    const int n = batch.offsets[i + 1] - batch.offsets[i];
    if (n <= 0) throw std::invalid_argument("batch sequence " + std::to_string(seq) + " has no tokens");
    if (cache.length(seq) + n > max_positions) {
      throw std::invalid_argument("sequence " + std::to_string(seq) + " would reach " +
                                  std::to_string(cache.length(seq) + n) +
                                  " positions, beyond the model's context of " +
                                  std::to_string(max_positions));
    }
  }
}

}  // namespace

BatchPlan plan_batch(KvCache& cache, const RaggedBatch& batch, int max_positions) {
  check_shape(cache, batch, max_positions);

  BatchPlan plan;
  plan.n_seqs = batch.n_seqs();
  plan.n_tokens = batch.n_tokens();
  plan.seq_offsets = batch.offsets;

  // extend every sequence; undo the lengths if the cache runs out part way
  std::vector<int> starts;
  starts.reserve(batch.seqs.size());
  try {
    for (int i = 0; i < plan.n_seqs; ++i) {
      starts.push_back(cache.extend(batch.seqs[i], batch.offsets[i + 1] - batch.offsets[i]));
    }
  } catch (...) {
    for (size_t i = 0; i < starts.size(); ++i) cache.truncate(batch.seqs[i], starts[i]);
    throw;
  }

  plan.token_seq.resize(static_cast<size_t>(plan.n_tokens));
  plan.positions.resize(static_cast<size_t>(plan.n_tokens));
  plan.cache_slots.resize(static_cast<size_t>(plan.n_tokens));
  plan.context_lengths.resize(static_cast<size_t>(plan.n_seqs));
  plan.table_offsets.assign(1, 0);
  for (int i = 0; i < plan.n_seqs; ++i) {
    const int32_t seq = batch.seqs[i];
    for (int t = batch.offsets[i]; t < batch.offsets[i + 1]; ++t) {
      const int position = starts[i] + (t - batch.offsets[i]);
      plan.token_seq[t] = i;
      plan.positions[t] = position;
      plan.cache_slots[t] = cache.slot(seq, position);
    }
    plan.context_lengths[i] = cache.length(seq);
    plan.max_context = std::max(plan.max_context, plan.context_lengths[i]);
    const auto table = cache.block_table(seq);
    plan.block_tables.insert(plan.block_tables.end(), table.begin(), table.end());
    plan.table_offsets.push_back(static_cast<int32_t>(plan.block_tables.size()));
  }
  for (int t = 0; t < plan.n_tokens; ++t) {
    if (batch.want_logits[t]) plan.logit_rows.push_back(t);
  }
  return plan;
}

PlannedBatch::PlannedBatch(KvCache& cache, const RaggedBatch& batch, int max_positions)
    : cache_(cache), batch_(batch), plan_(plan_batch(cache, batch, max_positions)) {}

PlannedBatch::~PlannedBatch() {
  if (committed_) return;
  for (int i = 0; i < plan_.n_seqs; ++i) {
    const int32_t seq = batch_.seqs[static_cast<size_t>(i)];
    if (cache_.alive(seq)) cache_.truncate(seq, plan_.positions[static_cast<size_t>(plan_.seq_offsets[i])]);
  }
}

}  // namespace specula
