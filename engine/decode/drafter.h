// Drafters propose the next few tokens of every live sequence; the target then verifies them
// all in one ragged pass. One interface, four kinds, chosen per run:
//   none      proposes nothing: plain batched decoding, the baseline.
//   ngram     prompt/context lookup: finds the latest earlier occurrence of the sequence's
//             last 1-3 tokens and proposes what followed it. No model; strong on code.
//   layers:K  self-speculation: the target's own first K layers + final norm + output matrix,
//             over the target's own KV cache (no cache of its own); matrices the target
//             stores wider than 4.5 bits are read from a 4-bit copy (model/model_prefix.h).
//   model     a separate, smaller draft model with its own KV cache; every id both
//             vocabularies have must be the same piece (one may have more rows: padding),
//             and the draft never proposes an id the target has no row for.
// The decoder never knows which kind it drives.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compute/backend.h"
#include "model/model.h"
#include "compute/sampler.h"

namespace specula {

// One live sequence asking for a draft.
struct DraftRequest {
  int seq = 0;                   // candidate index, 0 .. n_seqs-1
  std::span<const int> tokens;   // the sequence so far: prompt and generated tokens
  int max_tokens = 0;            // propose at most this many (0: none this step)
  int backlog = 0;               // tokens the drafter must feed before its first proposal (Drafter::backlog)
  int cache_seq = -1;            // the sequence's id in the target's KV cache, which holds all its tokens but the last
  int generated = 0;             // new tokens the sequence has so far
  int remaining = 0;             // new tokens it may still generate (its length limit, the context)
  int setup = 0;                 // tokens the drafter must run once, for all sequences together, before
                                 // it can propose at all (Drafter::setup_tokens); the same in every request
};

struct Draft {
  std::vector<int> tokens;   // (d) proposed tokens, d <= max_tokens
  std::vector<float> probs;  // (d, vocab) distributions they were drawn from; empty: one-hot
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;
  // Once, before decoding: the prompt every one of `n_seqs` sequences starts from, and the
  // target's KV cache the decoder verifies through (layers:K drafts through it). A model
  // drafter runs the prompt through its model only when a first draft is asked for.
  virtual void prepare(std::span<const int> prompt, int n_seqs, KvCache& target_cache) = 0;
  // Fills drafts[r] for requests[r] (drafts is resized to requests.size()).
  virtual void propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) = 0;
  // Sequence `seq` now reads `tokens` after verification: forget what was assumed beyond.
  virtual void sync(int seq, std::span<const int> tokens) = 0;
  // Sequence `seq` is finished: free what it holds.
  virtual void finish(int seq) = 0;

  // Tokens of `tokens` (the sequence so far) that a proposal must first run through the
  // drafter's model, which has not seen them: at least 1 for model drafters (the last
  // token, and every token generated while the sequence drafted nothing), 0 for the others.
  virtual int backlog(int /*seq*/, std::span<const int> /*tokens*/) const { return 0; }
  // Tokens a first proposal must run through the drafter's model once, for every sequence
  // together, before any sequence's backlog: a model drafter's prompt until a first draft
  // is asked for (its prefill, the run's setup), 0 after it and for the other drafters.
  virtual int setup_tokens() const { return 0; }
  // The most tokens a proposal for sequence `seq` after `tokens` (the sequence so far)
  // could hold, up to `most`: what a policy may usefully ask for. A model drafter proposes
  // `most` while its context has room; the n-gram drafter only what follows its match, and
  // nothing without one, so that a policy does not count on drafts that cannot come.
  virtual int proposable(int /*seq*/, std::span<const int> /*tokens*/, int most) const { return most; }
  // The model the drafter's forwards run, through its first forward_layers() layers (-1:
  // all); null for drafters that run no forward.
  virtual const Model* forward_model() const { return nullptr; }
  virtual int forward_layers() const { return -1; }
  // Seconds spent so far on work done once per run rather than per step (a model
  // drafter's prefill of the prompt): what a step took, less this, is the step's cost.
  virtual double setup_seconds() const { return 0.0; }

  int forwards() const { return forwards_; }  // draft forward passes run
  // Draft KV blocks in use (0 for drafters without a cache); for leak checks.
  virtual int blocks_in_use() const { return 0; }

 protected:
  int forwards_ = 0;
};

// The model of its own that a drafter of `kind` runs for `target` on `backend`: a layers:K
// draft's narrowed weights (Backend::self_draft_model), made now, so that a loader can
// prepare and measure them before the first generation; null for the other kinds, for a K
// outside the model (create_drafter says why) and for a draft that reads the target's own.
const Model* self_draft_weights(Backend& backend, const Model& target, std::string_view kind);

// "none", "ngram", "layers:K" or "model" (with `draft_model`). `sampling` is the session's:
// model drafters draw their tokens with it (candidate i's draft RNG is seeded from
// sampling.seed + i), so temperature and filters shape draft and target alike. `max_tokens`
// sizes a draft cache. Throws std::invalid_argument with a clear message for an unknown
// kind, K outside 1..n_layers, a missing draft model or one whose tokenizer differs.
std::unique_ptr<Drafter> create_drafter(const std::string& kind, Backend& backend,
                                        const Model& target,
                                        std::shared_ptr<const Model> draft_model,
                                        const SamplingParams& sampling, int n_seqs,
                                        int max_tokens);

}  // namespace specula
