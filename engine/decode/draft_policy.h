// How many tokens to draft for each live sequence at each step.
//   fixed:K   always K.
//   bass      one length for the whole batch, BASS's Algorithm 1 (docs/draft-policies.md):
//             start at 7; +2 (up to 32) when some sequence accepted its whole draft;
//             otherwise shrink by ceil(l/10) (and by one more after a previous shrink),
//             never below the longest accepted run nor below 1.
//   adaptive  one length per sequence: +2 after a fully accepted draft (up to 32), -1
//             after a rejection, floor 1.
//   goodput   one length per sequence, 0 included, chosen every step to maximise the
//             batch's expected tokens per second: each sequence's online acceptance
//             estimate against the measured cost of the target's verification and of the
//             drafter's own forwards (compute/cost_model.h), corrected by what steps
//             with and without drafts were seen to take (for a target streaming its
//             weights from memory, a verification is priced no lower than plain steps
//             are seen to cost). Where verifying more tokens
//             costs little it drafts long; where it costs what the tokens are worth, nothing.
//             A sequence ahead of the batch's slowest counts its tokens for less: the
//             batch is done when its last sequence is. A model drafter's prefill of the
//             prompt is paid only once the run is expected to last long enough to repay it.
//             Without evidence it probes: optimism counts for a draft's first tokens only,
//             one more for each token kept.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compute/backend.h"
#include "compute/cost_model.h"
#include "decode/drafter.h"
#include "model/model.h"

namespace specula {

// What a step costs, for the policies that weigh it (goodput).
struct StepCosts {
  std::shared_ptr<const ForwardCost> target;  // the target's forwards (verification)
  std::shared_ptr<const ForwardCost> draft;   // the drafter's forwards; null when it runs none (none, ngram)
  int draft_layers = -1;                      // layers one draft forward runs (K of layers:K; -1: all)
  bool timed = true;                          // check the predictions against the steps' wall time
                                              // (false where the costs are made up for a fake backend)
  bool sampled = false;                       // drawn at a temperature: each row the target samples from
                                              // costs target->sample_row_seconds, each row a model
                                              // drafter draws from draft->sample_row_seconds
};

// The costs of a step with this drafter on this backend, for a session sampling with
// `sampling` (measured or read from the cost cache the first time a model is seen:
// Backend::forward_cost).
StepCosts step_costs(Backend& backend, const Model& target, const Drafter& drafter, const SamplingParams& sampling);

// Predicted seconds of one greedy step in which live sequence j drafts k[j] tokens: the
// target's verification of every live sequence and the drafter's forwards. What goodput
// checks against the steps' wall time, and what a simulated decode (policy_simulation.h)
// adds up.
double predicted_step_seconds(const StepCosts& costs, std::span<const DraftRequest> live, std::span<const int> k);

class DraftPolicy {
 public:
  static constexpr int kMaxDraft = 32;  // no policy drafts more than this per step

  virtual ~DraftPolicy() = default;
  virtual std::string name() const = 0;
  // Draft length for each live sequence: live[j] is its request as the decoder will send
  // it to the drafter, with max_tokens the most it can still use and the drafter can
  // propose (lengths beyond are cut).
  virtual void lengths(std::span<const DraftRequest> live, std::vector<int>& k) = 0;
  // After verification: sequence live[j] was proposed proposed[j] draft tokens and
  // accepted[j] of them were accepted; the step's drafting and verification took `seconds`
  // of wall time (0: not timed). Only goodput uses the time, to check its predictions.
  virtual void update(std::span<const DraftRequest> live, std::span<const int> proposed,
                      std::span<const int> accepted, double seconds) = 0;
};

// "fixed:K" (1 <= K <= 32), "bass", "adaptive" or "goodput" (which needs costs.target),
// for `n_seqs` sequences. Throws std::invalid_argument with a clear message otherwise.
std::unique_ptr<DraftPolicy> create_draft_policy(const std::string& spec, int n_seqs,
                                                 const StepCosts& costs = {});
// The same for decoding `target` with `drafter` on `backend`, sampling with `sampling`:
// goodput gets step_costs().
std::unique_ptr<DraftPolicy> create_draft_policy(const std::string& spec, int n_seqs, Backend& backend,
                                                 const Model& target, const Drafter& drafter,
                                                 const SamplingParams& sampling);

}  // namespace specula
