#include "decode/decoder.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "decode/acceptance.h"

namespace specula {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Running: return "running";
    case FinishReason::Stop: return "stop";
    case FinishReason::Eos: return "eos";
    case FinishReason::Length: return "length";
    case FinishReason::Budget: return "budget";
    case FinishReason::Cancelled: return "cancelled";
  }
  return "unknown";
}

int decode_cache_tokens(int prompt_tokens, int context_length, const DecodeOptions& options, int block_size) {
  const int own = std::min(options.max_new_tokens, context_length) + DraftPolicy::kMaxDraft + 1 + block_size;
  return prompt_tokens + options.n_seqs * own + block_size;
}

namespace {

// Releases, whatever happens, every cache sequence the decoder created.
class SequenceGuard {
 public:
  explicit SequenceGuard(KvCache& cache) : cache_(cache) {}
  ~SequenceGuard() {
    for (const int id : ids_) {
      if (cache_.alive(id)) cache_.release(id);
    }
  }
  int track(int id) {
    ids_.push_back(id);
    return id;
  }

 private:
  KvCache& cache_;
  std::vector<int> ids_;
};

using Clock = std::chrono::steady_clock;

}  // namespace

DecodeResult decode(Backend& backend, const Model& target, KvCache& cache, Drafter& drafter,
                    DraftPolicy& policy, std::span<const int> prompt, const DecodeOptions& options,
                    const DecodeCallbacks& callbacks, const std::atomic<bool>* stop) {
  const int n = options.n_seqs;
  const int vocab = target.config.vocab_size;
  const int context = target.config.context_length;
  if (prompt.empty()) throw std::invalid_argument("the prompt has no tokens");
  if (static_cast<int>(prompt.size()) >= context) {
    throw std::invalid_argument("the prompt has " + std::to_string(prompt.size()) +
                                " tokens; the model's context holds " + std::to_string(context));
  }
  if (n < 1) throw std::invalid_argument("at least one sequence is needed");
  if (options.max_new_tokens < 1) throw std::invalid_argument("max new tokens must be at least 1");

  const auto start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  DecodeResult result;
  result.seqs.resize(static_cast<size_t>(n));
  DecodeStats& stats = result.stats;
  SequenceGuard guard(cache);

  std::vector<int> ids(static_cast<size_t>(n), -1);            // cache sequence of each
  std::vector<std::vector<int>> seq_tokens(static_cast<size_t>(n));  // prompt + generated
  std::vector<Rng> rngs;
  for (int i = 0; i < n; ++i) rngs.emplace_back(options.sampling.seed + static_cast<uint64_t>(i));

  const auto finish = [&](int i, FinishReason why) {
    SequenceOutput& out = result.seqs[static_cast<size_t>(i)];
    out.finish = why;
    out.seconds = elapsed();
    if (ids[static_cast<size_t>(i)] >= 0) cache.release(ids[static_cast<size_t>(i)]);
    ids[static_cast<size_t>(i)] = -1;
    drafter.finish(i);
    if (callbacks.on_finished) callbacks.on_finished(i, out);
  };
  // Appends a step's tokens to sequence i, cutting at EOS and at the length limits.
  const auto emit = [&](int i, std::span<const int> tokens, std::span<const float> logprobs) {
    SequenceOutput& out = result.seqs[static_cast<size_t>(i)];
    std::vector<int>& all = seq_tokens[static_cast<size_t>(i)];
    FinishReason why = FinishReason::Running;
    size_t kept = 0;
    for (; kept < tokens.size(); ++kept) {
      if (tokens[kept] == options.eos) {
        why = FinishReason::Eos;
        break;
      }
      out.tokens.push_back(tokens[kept]);
      out.logprobs.push_back(logprobs[kept]);
      all.push_back(tokens[kept]);
      if (static_cast<int>(out.tokens.size()) >= options.max_new_tokens ||
          static_cast<int>(all.size()) >= context) {
        why = FinishReason::Length;
        ++kept;
        break;
      }
    }
    if (kept > 0 && callbacks.on_tokens && callbacks.on_tokens(i, out, tokens.first(kept))) {
      why = FinishReason::Stop;
    }
    if (why != FinishReason::Running) finish(i, why);
  };
  const auto live_ones = [&] {
    std::vector<int> live;
    for (int i = 0; i < n; ++i) {
      if (result.seqs[static_cast<size_t>(i)].finish == FinishReason::Running) live.push_back(i);
    }
    return live;
  };
  const auto interrupted = [&]() -> FinishReason {
    if (stop && stop->load(std::memory_order_relaxed)) return FinishReason::Cancelled;
    if (options.budget_seconds > 0 && elapsed() >= options.budget_seconds) return FinishReason::Budget;
    return FinishReason::Running;
  };
  const auto sample_token = [&](int i, std::span<const float> row) {
    return sample(options.sampling, row, rngs[static_cast<size_t>(i)]);
  };

  std::vector<float> logits;
  const auto run_target = [&](const RaggedBatch& batch) {
    backend.forward(target, cache, batch, logits);
    ++stats.target_forwards;
    stats.target_tokens += batch.n_tokens();
    stats.peak_blocks = std::max(stats.peak_blocks, cache.blocks_in_use());
  };

  // prefill the prompt once; every sequence forks from it and shares its blocks
  if (const FinishReason why = interrupted(); why != FinishReason::Running) {
    for (int i = 0; i < n; ++i) finish(i, why);
    stats.wall_seconds = elapsed();
    return result;
  }
  stats.prompt_tokens = static_cast<int>(prompt.size());
  const int root = guard.track(cache.create());
  {
    RaggedBatch batch;
    batch.add(root, prompt, false);
    run_target(batch);
  }
  drafter.prepare(prompt, n);
  for (int i = 0; i < n; ++i) {
    ids[static_cast<size_t>(i)] = guard.track(cache.fork(root));
    seq_tokens[static_cast<size_t>(i)].assign(prompt.begin(), prompt.end());
  }
  cache.release(root);
  const std::span<const float> first_row(logits.data(), static_cast<size_t>(vocab));
  for (int i = 0; i < n; ++i) {
    const int t = sample_token(i, first_row);
    const float lp = token_logprob(first_row, t);
    emit(i, std::span<const int>(&t, 1), std::span<const float>(&lp, 1));
    if (result.seqs[static_cast<size_t>(i)].finish == FinishReason::Running) drafter.sync(i, seq_tokens[static_cast<size_t>(i)]);
  }

  std::vector<int> k, proposed, accepted;
  std::vector<DraftRequest> requests;
  std::vector<Draft> drafts;
  std::vector<int> step_tokens;
  std::vector<float> step_logprobs;
  for (std::vector<int> live = live_ones(); !live.empty(); live = live_ones()) {
    if (const FinishReason why = interrupted(); why != FinishReason::Running) {
      for (const int i : live) finish(i, why);
      break;
    }

    // draft lengths, clamped to what the sequence can still use
    policy.lengths(live, k);
    requests.clear();
    for (size_t j = 0; j < live.size(); ++j) {
      const int i = live[j];
      const auto& all = seq_tokens[static_cast<size_t>(i)];
      const int left = options.max_new_tokens - static_cast<int>(result.seqs[static_cast<size_t>(i)].tokens.size()) - 1;
      const int room = context - static_cast<int>(all.size());
      requests.push_back(DraftRequest{i, all, std::max(0, std::min({k[j], left, room}))});
    }
    drafter.propose(requests, drafts);

    // one ragged verification batch: [last_i, d_i...] for every live sequence, no padding
    RaggedBatch batch;
    for (size_t j = 0; j < live.size(); ++j) {
      const int i = live[j];
      auto& d = drafts[j].tokens;
      if (static_cast<int>(d.size()) > requests[j].max_tokens) throw std::logic_error("drafter proposed too many tokens");
      std::vector<int> rows{seq_tokens[static_cast<size_t>(i)].back()};
      rows.insert(rows.end(), d.begin(), d.end());
      batch.add(ids[static_cast<size_t>(i)], rows, true);
    }
    run_target(batch);
    ++stats.steps;

    proposed.assign(live.size(), 0);
    accepted.assign(live.size(), 0);
    size_t row = 0;
    for (size_t j = 0; j < live.size(); ++j) {
      const int i = live[j];
      const std::vector<int>& d = drafts[j].tokens;
      const std::span<const float> rows(logits.data() + row * static_cast<size_t>(vocab),
                                        (d.size() + 1) * static_cast<size_t>(vocab));
      row += d.size() + 1;
      Rng& rng = rngs[static_cast<size_t>(i)];
      Verdict v;
      if (options.forced_acceptance >= 0) {
        v = accept_forced(options.forced_acceptance, options.sampling, d, rows, vocab, rng);
      } else if (options.sampling.greedy()) {
        v = accept_greedy(d, rows, vocab);
      } else {
        v = accept_sampled(options.sampling, d, drafts[j].probs, rows, vocab, rng);
      }
      // the cache keeps last_i and the accepted drafts; `next` is fed at the next step
      const int len = static_cast<int>(seq_tokens[static_cast<size_t>(i)].size());
      cache.truncate(ids[static_cast<size_t>(i)], len + v.accepted);

      step_tokens.assign(d.begin(), d.begin() + v.accepted);
      step_tokens.push_back(v.next);
      step_logprobs.clear();
      for (size_t t = 0; t < step_tokens.size(); ++t) {
        const auto r = rows.subspan(t * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
        step_logprobs.push_back(token_logprob(r, step_tokens[t]));
      }
      SequenceOutput& out = result.seqs[static_cast<size_t>(i)];
      out.proposed += static_cast<int>(d.size());
      out.accepted += v.accepted;
      proposed[j] = static_cast<int>(d.size());
      accepted[j] = v.accepted;
      emit(i, step_tokens, step_logprobs);
      if (out.finish == FinishReason::Running) drafter.sync(i, seq_tokens[static_cast<size_t>(i)]);
    }
    policy.update(live, proposed, accepted);
  }
  stats.draft_forwards = drafter.forwards();
  stats.wall_seconds = elapsed();
  return result;
}

}  // namespace specula
