// The goodput draft-length policy (docs/draft-policies.md): each step, the lengths that the
// measured cost of a forward says are fastest, none where speculation would not pay.
//
// Each sequence's acceptance rate is estimated online; every candidate draft token is worth
// the probability that it is kept, times its sequence's weight (a sequence ahead of the
// batch's slowest counts for less), and a step costs what the target's verification and the
// drafter's forwards are predicted to cost (compute/cost_model.h), corrected by what steps
// with and without drafts were seen to take. The policy keeps the set of tokens that
// maximises weighted tokens per second of the step.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "decode/draft_policy.h"

namespace specula {

class GoodputPolicy final : public DraftPolicy {
 public:
  // Throws std::invalid_argument when `costs` has no cost of the target's forwards.
  GoodputPolicy(int n_seqs, StepCosts costs);
  ~GoodputPolicy() override;

  std::string name() const override { return "goodput"; }
  void lengths(std::span<const DraftRequest> live, std::vector<int>& k) override;
  void update(std::span<const DraftRequest> live, std::span<const int> proposed, std::span<const int> accepted,
              double seconds) override;

  // What the policy believes of sequence `seq`'s acceptance rate now: the evidence's mean
  // (shrunk toward the batch's, and that toward the prior 0.5), and the optimistic rate it
  // explores with while the evidence is thin.
  struct AcceptanceEstimate {
    double mean;
    double optimistic;
  };
  AcceptanceEstimate acceptance(int seq) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace specula
