#include "decode/decoder.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

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

using Clock = std::chrono::steady_clock;

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

// Everything one decode() call works on; the functions below read top to bottom as the
// loop of docs/architecture.md.
struct Run {
  Backend& backend;
  const Model& target;
  KvCache& cache;
  Drafter& drafter;
  DraftPolicy& policy;
  const DecodeOptions& options;
  const DecodeCallbacks& callbacks;
  const std::atomic<bool>* stop;
  Clock::time_point start = Clock::now();
  SequenceGuard guard{cache};
  DecodeResult result;
  std::vector<int> ids;                      // (n_seqs) cache sequence of each; -1 once finished
  std::vector<std::vector<int>> tokens;      // (n_seqs) prompt + generated
  std::vector<Rng> rngs;                     // (n_seqs) sequence i draws with seed + i
  std::vector<float> logits;                 // (rows, vocab) of the last run_target() forward (the prefill)

  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start).count(); }
  SequenceOutput& out(int i) { return result.seqs[static_cast<size_t>(i)]; }
  std::vector<int>& all(int i) { return tokens[static_cast<size_t>(i)]; }
};

// Whether `token` ends a sequence (and is not kept).
bool ends_generation(const DecodeOptions& options, int token) {
  return std::find(options.eos.begin(), options.eos.end(), token) != options.eos.end();
}

void finish(Run& run, int i, FinishReason why) {
  SequenceOutput& out = run.out(i);
  out.finish = why;
  out.seconds = run.elapsed();
  int& id = run.ids[static_cast<size_t>(i)];
  if (id >= 0) run.cache.release(id);
  id = -1;
  run.drafter.finish(i);
  if (run.callbacks.on_finished) run.callbacks.on_finished(i, out);
}

// Appends a step's tokens to sequence i, cutting at the end of generation and at the
// length limits, then lets the drafter see what the sequence now reads.
void emit(Run& run, int i, std::span<const int> tokens, std::span<const float> logprobs) {
  SequenceOutput& out = run.out(i);
  std::vector<int>& all = run.all(i);
  FinishReason why = FinishReason::Running;
  size_t kept = 0;
  for (; kept < tokens.size(); ++kept) {
    if (ends_generation(run.options, tokens[kept])) {
      why = FinishReason::Eos;
      break;
    }
    out.tokens.push_back(tokens[kept]);
    out.logprobs.push_back(logprobs[kept]);
    all.push_back(tokens[kept]);
    if (static_cast<int>(out.tokens.size()) >= run.options.max_new_tokens ||
        static_cast<int>(all.size()) >= run.target.config.context_length) {
      why = FinishReason::Length;
      ++kept;
      break;
    }
  }
  if (kept > 0 && run.callbacks.on_tokens && run.callbacks.on_tokens(i, out, tokens.first(kept))) {
    why = FinishReason::Stop;
  }
  if (why != FinishReason::Running) {
    finish(run, i, why);
  } else {
    run.drafter.sync(i, all);
  }
}

std::vector<int> live_sequences(Run& run) {
  std::vector<int> live;
  for (int i = 0; i < run.options.n_seqs; ++i) {
    if (run.out(i).finish == FinishReason::Running) live.push_back(i);
  }
  return live;
}

FinishReason interruption(const Run& run) {
  if (run.stop && run.stop->load(std::memory_order_relaxed)) return FinishReason::Cancelled;
  if (run.options.budget_seconds > 0 && run.elapsed() >= run.options.budget_seconds) return FinishReason::Budget;
  return FinishReason::Running;
}

// Counts a target forward over `batch` in the statistics.
void count_target_forward(Run& run, const RaggedBatch& batch) {
  DecodeStats& stats = run.result.stats;
  ++stats.target_forwards;
  stats.target_tokens += batch.n_tokens();
  stats.peak_blocks = std::max(stats.peak_blocks, run.cache.blocks_in_use());
}

void run_target(Run& run, const RaggedBatch& batch) {
  run.backend.forward(run.target, run.cache, batch, run.logits);
  count_target_forward(run, batch);
}

// Runs the prompt through the target once; every sequence forks from it, sharing its
// blocks, and samples its first token from the prompt's last row.
void prefill(Run& run, std::span<const int> prompt) {
  const int n = run.options.n_seqs;
  run.result.stats.prompt_tokens = static_cast<int>(prompt.size());
  PromptReuse* reuse = run.options.reuse;
  const PromptReuse::Start start = reuse ? reuse->begin(run.cache, prompt) : PromptReuse::Start{run.cache.create(), 0};
  const int root = run.guard.track(start.seq);
  run.result.stats.cached_tokens = start.cached;
  RaggedBatch batch;
  batch.add(root, prompt.subspan(static_cast<size_t>(start.cached)), false);
  run_target(run, batch);
  if (reuse) reuse->keep(run.cache, root, prompt);
  if (run.options.max_new_tokens == 0) {  // the prompt only: prefilled for the prompt cache to keep
    run.cache.release(root);
    for (int i = 0; i < n; ++i) finish(run, i, FinishReason::Length);
    return;
  }
  run.drafter.prepare(prompt, n, run.cache);
  for (int i = 0; i < n; ++i) {
    run.ids[static_cast<size_t>(i)] = run.guard.track(run.cache.fork(root));
    run.all(i).assign(prompt.begin(), prompt.end());
  }
  run.cache.release(root);
  const std::span<const float> row(run.logits.data(), static_cast<size_t>(run.target.config.vocab_size));
  std::vector<float> allowed;  // the row with every token but the first_tokens ruled out
  if (!run.options.first_tokens.empty()) {
    allowed.assign(row.size(), -INFINITY);
    for (const int t : run.options.first_tokens)
      if (t >= 0 && t < static_cast<int>(row.size())) allowed[static_cast<size_t>(t)] = row[static_cast<size_t>(t)];
  }
  for (int i = 0; i < n; ++i) {
    const int t = sample(run.options.sampling, allowed.empty() ? row : std::span<const float>(allowed),
                         run.rngs[static_cast<size_t>(i)]);
    const float lp = token_logprob(row, t);
    emit(run, i, std::span<const int>(&t, 1), std::span<const float>(&lp, 1));
  }
}

// What each live sequence asks the drafter for: the policy's length, cut to what the
// sequence can still use (its length limit, the context) and the drafter can propose.
std::vector<DraftRequest> draft_requests(Run& run, std::span<const int> live) {
  std::vector<DraftRequest> requests;
  const int setup = run.drafter.setup_tokens();
  for (const int i : live) {
    const std::vector<int>& all = run.all(i);
    const int generated = static_cast<int>(run.out(i).tokens.size());
    const int room = run.target.config.context_length - static_cast<int>(all.size());
    const int left = run.options.max_new_tokens - generated - 1;  // the target's own token comes after the drafts
    const int most = run.drafter.proposable(i, all, std::max(0, std::min(left, room)));
    const int remaining = std::min(run.options.max_new_tokens - generated, room);
    requests.push_back(DraftRequest{i, all, most, run.drafter.backlog(i, all), run.ids[static_cast<size_t>(i)],
                                    generated, remaining, setup});
  }
  std::vector<int> k;
  run.policy.lengths(requests, k);
  for (size_t j = 0; j < requests.size(); ++j) requests[j].max_tokens = std::clamp(k[j], 0, requests[j].max_tokens);
  return requests;
}

// One ragged verification batch: [last_i, d_i...] for every live sequence, no padding.
RaggedBatch verification_batch(Run& run, std::span<const DraftRequest> requests, std::span<const Draft> drafts) {
  RaggedBatch batch;
  for (size_t j = 0; j < requests.size(); ++j) {
    const std::vector<int>& d = drafts[j].tokens;
    if (static_cast<int>(d.size()) > requests[j].max_tokens) throw std::logic_error("drafter proposed too many tokens");
    std::vector<int> rows{requests[j].tokens.back()};
    rows.insert(rows.end(), d.begin(), d.end());
    batch.add(run.ids[static_cast<size_t>(requests[j].seq)], rows, true);
  }
  return batch;
}

// The target scores every row of the verification batch and judges each live sequence's
// draft: how much of it is kept and the target's token after it, with the log-probability of
// each. A device backend decides where the logits are; the rule is the sampler's either way.
std::vector<AcceptedRows> judge(Run& run, std::span<const int> live, const RaggedBatch& batch,
                                std::span<const Draft> drafts) {
  const AcceptanceRule rule{run.options.sampling, run.options.forced_acceptance};
  std::vector<DraftRows> rows;
  for (size_t j = 0; j < live.size(); ++j) rows.push_back({drafts[j].probs, &run.rngs[static_cast<size_t>(live[j])]});
  std::vector<AcceptedRows> kept;
  run.backend.forward_accept(run.target, run.cache, batch, rule, rows, kept);
  count_target_forward(run, batch);
  return kept;
}

// Keeps sequence i's accepted prefix and the target's next token: the cache is cut back
// to last_i and the accepted drafts (the target's token is fed at the next step).
void apply_verdict(Run& run, int i, const Draft& draft, const AcceptedRows& verdict) {
  run.cache.truncate(run.ids[static_cast<size_t>(i)], static_cast<int>(run.all(i).size()) + verdict.accepted);
  SequenceOutput& out = run.out(i);
  out.proposed += static_cast<int>(draft.tokens.size());
  out.accepted += verdict.accepted;
  emit(run, i, verdict.tokens, verdict.logprobs);
}

// One speculative step over the live sequences: lengths, drafts, one target forward,
// acceptance, and what the policy learns from it.
void step(Run& run, std::span<const int> live) {
  const double start = run.elapsed() - run.drafter.setup_seconds();
  const std::vector<DraftRequest> requests = draft_requests(run, live);
  std::vector<Draft> drafts;
  run.drafter.propose(requests, drafts);
  const std::vector<AcceptedRows> verdicts = judge(run, live, verification_batch(run, requests, drafts), drafts);
  const double seconds = run.elapsed() - run.drafter.setup_seconds() - start;  // the step's own work
  const bool first = run.result.stats.steps == 0;
  ++run.result.stats.steps;

  std::vector<int> proposed(live.size()), accepted(live.size());
  for (size_t j = 0; j < live.size(); ++j) {
    proposed[j] = static_cast<int>(drafts[j].tokens.size());
    accepted[j] = verdicts[j].accepted;
    apply_verdict(run, live[j], drafts[j], verdicts[j]);
  }
  // A sampled run's tokens depend on its draft lengths, and its seed must reproduce it (a
  // server must give what the local engine gives): only a greedy run, whose tokens never
  // depend on them, lets the policy learn from the wall clock. Not from its first step,
  // which runs on cold state (the cache's fresh pages, the backend's threads waking: 2.7
  // times a plain step of the demo pair in a new process) and says little of the steps to
  // come; taken as evidence, it made plain decoding look twice as slow as it is, and a run
  // drafted at a loss until its evidence faded.
  const bool timed = run.options.sampling.greedy() && !first;
  run.policy.update(requests, proposed, accepted, timed ? seconds : 0.0);
}

void validate(const Model& target, std::span<const int> prompt, const DecodeOptions& options) {
  const int context = target.config.context_length;
  if (prompt.empty()) throw std::invalid_argument("the prompt has no tokens");
  if (static_cast<int>(prompt.size()) >= context) {
    throw std::invalid_argument("the prompt has " + std::to_string(prompt.size()) +
                                " tokens; the model's context holds " + std::to_string(context));
  }
  if (options.n_seqs < 1) throw std::invalid_argument("at least one sequence is needed");
  if (options.max_new_tokens < 0) throw std::invalid_argument("max new tokens cannot be negative");
}

}  // namespace

DecodeResult decode(Backend& backend, const Model& target, KvCache& cache, Drafter& drafter,
                    DraftPolicy& policy, std::span<const int> prompt, const DecodeOptions& options,
                    const DecodeCallbacks& callbacks, const std::atomic<bool>* stop) {
  validate(target, prompt, options);
  Run run{backend, target, cache, drafter, policy, options, callbacks, stop};
  const size_t n = static_cast<size_t>(options.n_seqs);
  run.result.seqs.resize(n);
  run.ids.assign(n, -1);
  run.tokens.resize(n);
  for (size_t i = 0; i < n; ++i) run.rngs.emplace_back(options.sampling.seed + i);

  DecodeStats& stats = run.result.stats;
  if (const FinishReason why = interruption(run); why != FinishReason::Running) {
    for (int i = 0; i < options.n_seqs; ++i) finish(run, i, why);
  } else {
    prefill(run, prompt);
    stats.prefill_seconds = run.elapsed();
  }
  for (std::vector<int> live = live_sequences(run); !live.empty(); live = live_sequences(run)) {
    if (const FinishReason why = interruption(run); why != FinishReason::Running) {
      for (const int i : live) finish(run, i, why);
      break;
    }
    step(run, live);
  }
  stats.draft_forwards = drafter.forwards();
  stats.wall_seconds = run.elapsed();
  return std::move(run.result);
}

}  // namespace specula
