#include "decode/goodput_policy.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace specula {

namespace {

// goodput (docs/draft-policies.md). Each sequence's acceptance rate is estimated online;
// each step, every candidate draft token is worth the probability that it is accepted
// (rate(j, 1) ... rate(j, p) for the p-th token of sequence j), times its sequence's weight, and the
// step costs what the target's verification and the drafter's forwards are predicted to
// cost. The policy keeps the set of tokens that maximises (weighted tokens emitted) /
// (seconds of the step). The weight halves for every kLeadHalfLife tokens a sequence is
// ahead of the live sequence furthest behind: the N candidates are done when the last one
// is, and a sequence that is ahead ends the batch no sooner by going faster.

// Seconds of one step, built up one drafted token at a time: the target verifies every
// live sequence's last token and its drafts in one forward; a model drafter runs one
// forward per draft position, the first also feeding each drafting sequence's backlog.
// Sampled decoding also draws from rows outside the forwards: the target from one row per
// token the step emits (each kept draft token's, to judge it, and the row after the last
// kept one), a model drafter from every row it drafts.
class StepTime {
 public:
  StepTime(const StepCosts& costs, std::span<const DraftRequest> live) : costs_(costs), live_(live) { reset(); }

  // No sequence drafts.
  void reset() {
    tokens_ = static_cast<int>(live_.size());
    positions_ = 0;
    for (const DraftRequest& r : live_) positions_ += static_cast<double>(r.tokens.size());
    rounds_.assign(DraftPolicy::kMaxDraft, Round{});
    draft_seconds_ = 0;
    sampled_rows_ = static_cast<double>(live_.size());  // each sequence's next token
    draft_sampled_rows_ = 0;
  }

  // Sequence j drafts its p-th token (p = 1, 2, ... in order), kept with probability `kept`,
  // when the target draws from one row more.
  void add(size_t j, int p, double kept) {
    const double context = static_cast<double>(live_[j].tokens.size());
    ++tokens_;
    positions_ += context + p;  // the token's row attends to everything before it and itself
    sampled_rows_ += kept;
    if (!costs_.draft) return;
    ++draft_sampled_rows_;
    Round& round = rounds_[static_cast<size_t>(p - 1)];
    draft_seconds_ -= seconds(round);
    ++round.rows;
    if (p == 1) {  // the first round catches the draft cache up on the tokens it has not seen
      const double backlog = std::max(1, live_[j].backlog);
      round.tokens += static_cast<int>(backlog);
      round.positions += backlog * (context - backlog) + backlog * (backlog + 1) / 2;
    } else {
      round.tokens += 1;
      round.positions += context + p - 1;
    }
    draft_seconds_ += seconds(round);
  }

  // The target's verification alone: after reset(), the plain step's.
  double target_seconds() const {
    return std::max(costs_.target->seconds(tokens_, tokens_, positions_) * target_scale_, target_floor_);
  }
  // No verification of these sequences costs less than `seconds`.
  void set_target_floor(double seconds) { target_floor_ = seconds; }
  // Every verification of these sequences costs `scale` times the model's price.
  void set_target_scale(double scale) { target_scale_ = scale; }

  double seconds() const {
    double s = target_seconds() + draft_seconds_;
    if (costs_.sampled) {
      s += sampled_rows_ * costs_.target->sample_row_seconds;
      if (costs_.draft) s += draft_sampled_rows_ * costs_.draft->sample_row_seconds;
    }
    return s;
  }

 private:
  struct Round {
    int tokens = 0;        // fed to the draft in this forward
    int rows = 0;          // sequences drafting a token in it
    double positions = 0;  // cached positions its tokens attend to, in all
  };
  double seconds(const Round& r) const {
    return r.rows == 0 ? 0.0 : costs_.draft->seconds(r.tokens, r.rows, r.positions, costs_.draft_layers);
  }

  const StepCosts& costs_;
  std::span<const DraftRequest> live_;
  int tokens_ = 0;                // verified by the target
  double positions_ = 0;          // attended to by the target's rows, in all
  double target_floor_ = 0;       // the least a verification costs (set_target_floor)
  double target_scale_ = 1;       // verifications' price over the model's (set_target_scale)
  std::vector<Round> rounds_;     // (kMaxDraft) the drafter's forwards
  double draft_seconds_ = 0;      // of all rounds
  double sampled_rows_ = 0;       // the target's rows drawn from, expected: the tokens the step emits
  int draft_sampled_rows_ = 0;    // the drafter's
};

// Everything GoodputPolicy knows and decides; its header keeps the interface.
class GoodputImpl {
 public:
  static constexpr double kPrior = 0.5;         // acceptance assumed before any evidence
  static constexpr double kPriorWeight = 2.0;   // worth that many observed tokens
  static constexpr double kDecay = 0.9;         // per drafted step: recent steps count more
  static constexpr double kIdleDecay = 0.98;    // per step without a draft: old evidence fades, so a sequence tries again
  static constexpr double kOptimism = 1.0;      // standard deviations added to the estimate without evidence
  static constexpr double kMaxAcceptance = 0.99;
  static constexpr double kMinGain = 1.05;      // draft only when predicted this much faster than not drafting
  static constexpr double kTimingPriorWeight = 0.5;  // steps of "the cost model is right" before any timing
  static constexpr double kPlainEvidence = 0.5;      // once steps are timed, a plain step whenever the
                                                     // timing of plain steps has faded below this
  static constexpr double kLeadHalfLife = 4.0;  // tokens of lead that halve a sequence's weight:
                                                // about what one step's acceptance varies by, so
                                                // that chance leads count for little

  GoodputImpl(int n_seqs, StepCosts costs) : costs_(std::move(costs)), counts_(static_cast<size_t>(n_seqs)) {
    if (!costs_.target) throw std::invalid_argument("draft policy 'goodput' needs the cost of the target's forwards");
  }
  void lengths(std::span<const DraftRequest> live, std::vector<int>& k) {
    estimate_.clear();
    probe_.clear();
    for (const DraftRequest& r : live) {
      estimate_.push_back(acceptance(r.seq));
      probe_.push_back(probe_length(r.seq));
    }
    weigh_leads(live);
    StepTime time(costs_, live);
    const double none = sure_tokens() / time.seconds();
    // The lengths are weighed on verifications priced as plain steps are seen to take: for
    // a target that streams its weights from memory, a batch of a few tokens costs what the
    // cost model says, but never less than the plain step's forward as timed. Where memory
    // runs slower than while the model was measured (the phases of a shared machine: one
    // token of the 1.1B Q8_0 file measured at 24.4 ms, then taking 32-35), the plain step's
    // forward is slower while the compute of a few more tokens hides under the longer wait,
    // so verifying 3 tokens cost 1.06x a plain step where the model said 1.52x; without the
    // floor goodput drafted half as much at N = 1 and a third as much or nothing at N = 2
    // (docs/draft-policies.md). Where memory runs faster than measured, the floor is below
    // the model and changes nothing. A model in the cache has no wait to hide compute
    // under: what its plain steps take beyond the model is work around the forward, which
    // verifications pay as well (stories260K drafted under the floor and read 0.97x).
    // A mixture of experts has no such wait to hide under: each token a verification adds
    // reads experts of its own, from the same slower memory, so every verification is
    // scaled as the plain step is seen to be. (With the floor, the random qwen3moe-1.3b
    // file's plain steps, timed at 1.5x the model on a loaded machine, lifted one token's
    // price to near two tokens' unfloored one, and goodput drafted at N = 1-4 and lost up
    // to 0.6x.)
    StepTime seen(costs_, live);
    if (costs_.target->streams_weights && costs_.target->n_experts > 0) {
      seen.set_target_scale(plain_steps_.scale());
    } else if (costs_.target->streams_weights) {
      seen.set_target_floor(seen.target_seconds() * plain_steps_.scale());
    }
    const double best = best_threshold(live, seen, sure_tokens() / seen.seconds(), k);
    if (costs_.draft) refine(live, seen, best, k);
    // With the lengths chosen, what steps were seen to take decides whether to draft, each
    // kind against the cost model's own prediction for it. That needs some steps without
    // drafts to compare with: the first after timing starts, then one whenever their
    // evidence has faded (every ~35 steps while drafting). Until drafted steps have been
    // timed, a drafted step is expected to take what the plain steps' timing prices it at
    // (`seen`), not the model's own price: judged at the model's price against plain steps
    // at their seen one, a mixture whose plain steps ran 1.23x the model (a loaded machine)
    // drafted at N = 2 where the model itself said not to (116.6 against 119.7 weighted
    // tokens per second), and every such step lost.
    const double refined = goodput(live, time, k);
    const double model_seconds = time.seconds();
    goodput(live, seen, k);
    const double seen_over_model = model_seconds > 0 ? seen.seconds() / model_seconds : 1.0;
    const bool time_plain = drafted_steps_.steps > 0 && plain_steps_.steps < kPlainEvidence;
    const double drafting = refined / drafted_steps_.scale(seen_over_model), plain = none / plain_steps_.scale();
    if (time_plain || drafting < kMinGain * plain || !repays_setup(live, plain, drafting)) k.assign(live.size(), 0);
  }

  void update(std::span<const DraftRequest> live, std::span<const int> proposed, std::span<const int> accepted,
              double seconds) {
    if (costs_.timed && seconds > 0) learn_timing(live, proposed, seconds);
    for (size_t j = 0; j < live.size(); ++j) {
      Counts& c = counts_.at(static_cast<size_t>(live[j].seq));
      if (proposed[j] == 0) {
        c.accepted *= kIdleDecay;
        c.rejected *= kIdleDecay;
        continue;
      }
      c.accepted = kDecay * c.accepted + accepted[j];
      c.rejected = kDecay * c.rejected + (accepted[j] < proposed[j] ? 1 : 0);
    }
  }

  // A sequence's acceptance rate: the evidence's mean, and that raised to explore.
  struct Estimate {
    double mean, optimistic;
  };
  Estimate acceptance(int seq) const;

 private:
  // Accepted draft tokens and rejections (drafts cut short), decayed: under "each token is
  // kept with probability α until the first rejection", accepted / (accepted + rejected)
  // is the most likely α.
  struct Counts {
    double accepted = 0, rejected = 0;
  };
  // How far off the cost model's predictions were for one kind of step (with drafts, or
  // without): decayed sums of log(seen / predicted) over steps, shrunk toward a prior
  // ("right", or what plain steps' timing says) by kTimingPriorWeight steps. A step's time
  // is noisy (other programs, the caches), a model's error steady (work around the forwards
  // it does not see, a measurement taken on a crowded machine): the mean over recent steps
  // tells the second apart.
  struct Timing {
    double log_ratio = 0, steps = 0;
    void add(double log_seen_over_predicted) {
      log_ratio = kDecay * log_ratio + log_seen_over_predicted;
      steps = kDecay * steps + 1;
    }
    void fade(double decay) {
      log_ratio *= decay;
      steps *= decay;
    }
    double scale(double prior = 1.0) const {
      return std::exp((log_ratio + kTimingPriorWeight * std::log(prior)) / (steps + kTimingPriorWeight));
    }
  };
  struct Candidate {
    double value;    // probability that the token is accepted, times its sequence's weight
    size_t j;        // live sequence
    int p;           // its position in the draft, from 1
    double kept;     // probability that the token is kept: rate(j, 1) ... rate(j, p)
  };

  // The optimism explores, and a probe need not be long to learn: a draft's first token
  // tells about the rate as much as a long draft does, for a fraction of its cost. So only
  // a sequence's first probe_length() positions are valued at the optimistic estimate, the
  // rest at the evidence's mean; the probe grows as drafts are kept (1 + the decayed count
  // of accepted tokens: 1, 2, 3, 6, ... when all are) and is soon longer than any draft the
  // policy would choose. Without it every sequence's first draft was as long as the prior's
  // 0.79 made worth it (2 tokens each for 4 sequences of the 1.1B shape, a step of twice a
  // plain one's cost), lost at a low rate: some 3 % of a 32-token run at N = 2 to 8.
  // Where drafts cost next to nothing (the n-gram drafter, a flat forward) the positions
  // past the probe still pay at the mean, and drafts stay long.
  int probe_length(int seq) const { return 1 + static_cast<int>(counts_.at(static_cast<size_t>(seq)).accepted); }
  // The probability that live sequence j's p-th draft token is kept, given the (p-1)-th is.
  double rate(size_t j, int p) const { return p <= probe_[j] ? estimate_[j].optimistic : estimate_[j].mean; }

  // Each live sequence's weight: 2^(-lead / kLeadHalfLife), its lead being how many tokens
  // longer it is than the shortest live sequence (all continue one prompt).
  void weigh_leads(std::span<const DraftRequest> live) {
    size_t shortest = live.empty() ? 0 : live[0].tokens.size();
    for (const DraftRequest& r : live) shortest = std::min(shortest, r.tokens.size());
    weight_.clear();
    for (const DraftRequest& r : live) {
      weight_.push_back(std::exp2(-static_cast<double>(r.tokens.size() - shortest) / kLeadHalfLife));
    }
  }
  // What a step without drafts emits: one token per live sequence, weighted.
  double sure_tokens() const {
    double tokens = 0;
    for (const double w : weight_) tokens += w;
    return tokens;
  }

  // Tries every probability threshold: drafting exactly the tokens more likely than it.
  // For a drafter that costs nothing this is the best choice there is, since the step's
  // cost then depends only on how many tokens are verified. Returns the best goodput.
  //
  // The candidates come most likely first (value, then sequence, then position) from a
  // merge of the sequences' own lists, which fall with p. The scan stops once no threshold
  // further on can win: a step never gets cheaper as tokens are added (the cost curves
  // never fall), so nothing beyond can reach more than (tokens + all values not yet taken) /
  // (this step's seconds). It thus makes the choice the full scan would make, at a few
  // candidates' cost where drafting does not pay, instead of sorting and pricing all
  // N × kMaxDraft of them each step: for 16 sequences of a small model, 512 candidates cost
  // some 4 % of a step's time.
  double best_threshold(std::span<const DraftRequest> live, StepTime& time, double none, std::vector<int>& k) {
    const auto later = [](const Candidate& a, const Candidate& b) {  // heap order: a comes after b
      return a.value != b.value ? a.value < b.value : (a.j != b.j ? a.j > b.j : a.p > b.p);
    };
    heads_.clear();
    double untaken = 0;  // the value of every candidate not yet taken
    for (size_t j = 0; j < live.size(); ++j) {
      if (limit(live[j]) == 0) continue;
      heads_.push_back({weight_[j] * rate(j, 1), j, 1, rate(j, 1)});
      double value = weight_[j];
      for (int p = 1; p <= limit(live[j]); ++p) {
        value *= rate(j, p);
        untaken += value;
      }
    }
    std::make_heap(heads_.begin(), heads_.end(), later);
    taken_.clear();
    double tokens = sure_tokens(), best = none;
    size_t best_count = 0;
    while (!heads_.empty()) {
      std::pop_heap(heads_.begin(), heads_.end(), later);
      const Candidate c = heads_.back();
      heads_.pop_back();
      taken_.push_back(c);
      time.add(c.j, c.p, c.kept);
      tokens += c.value;
      untaken -= c.value;
      const double seconds = time.seconds();
      if (tokens / seconds > best) {
        best = tokens / seconds;
        best_count = taken_.size();
      }
      if ((tokens + std::max(0.0, untaken)) * (1 + 1e-9) < best * seconds) break;  // margin: rounding
      if (c.p < limit(live[c.j])) {
        heads_.push_back({c.value * rate(c.j, c.p + 1), c.j, c.p + 1, c.kept * rate(c.j, c.p + 1)});
        std::push_heap(heads_.begin(), heads_.end(), later);
      }
    }
    k.assign(live.size(), 0);
    for (size_t c = 0; c < best_count; ++c) k[taken_[c].j] = taken_[c].p;
    return best;
  }

  static int limit(const DraftRequest& r) { return std::min(r.max_tokens, DraftPolicy::kMaxDraft); }

  // A drafter's one-time work before its first proposal (a model drafter's prefill of the
  // prompt) is an investment: it pays only if the run lasts long enough for the drafts'
  // gain, (1/plain - 1/drafting) seconds per weighted token, to earn it back. How long a
  // run lasts is not known (candidates end at their own stop); the estimate is that each
  // sequence generates as many more tokens as it has so far, within its length limit (a
  // run that has lasted t lasts t again, at the median, when nothing else is known), and
  // the batch lasts as long as the longest of these. A short completion thus never pays a
  // prefill that would cost it more than its drafts can save.
  bool repays_setup(std::span<const DraftRequest> live, double plain, double drafting) const {
    const int setup = live.empty() ? 0 : live[0].setup;
    if (setup == 0 || !costs_.draft) return true;
    double steps = 0;
    for (const DraftRequest& r : live) steps = std::max(steps, static_cast<double>(std::min(r.generated, r.remaining)));
    const double tokens = steps * sure_tokens();
    const double n = setup;
    const double prefill = costs_.draft->seconds(setup, 1, n * (n + 1) / 2, costs_.draft_layers);
    return tokens * (1 / plain - 1 / drafting) >= prefill;
  }

  // What the step that drafted `proposed` was predicted to take, against what it took.
  void learn_timing(std::span<const DraftRequest> live, std::span<const int> proposed, double seconds) {
    const bool drafted = std::any_of(proposed.begin(), proposed.end(), [](int k) { return k > 0; });
    (drafted ? drafted_steps_ : plain_steps_).add(std::log(seconds / predicted_step_seconds(costs_, live, proposed)));
    (drafted ? plain_steps_ : drafted_steps_).fade(kIdleDecay);
  }

  double goodput(std::span<const DraftRequest> live, StepTime& time, const std::vector<int>& k) const {
    time.reset();
    double tokens = sure_tokens();
    for (size_t j = 0; j < live.size(); ++j) {
      double kept = 1.0;
      for (int p = 1; p <= k[j]; ++p) {
        kept *= rate(j, p);
        tokens += weight_[j] * kept;
        time.add(j, p, kept);
      }
    }
    return tokens / time.seconds();
  }

  // A model drafter's cost is not a function of the token count alone (each draft
  // position is a forward of its own, and a sequence's first draft token also pays its
  // backlog): from the threshold's choice, moves of one sequence at a time (no draft, one
  // token less, one more) while one helps.
  void refine(std::span<const DraftRequest> live, StepTime& time, double best, std::vector<int>& k) const {
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t j = 0; j < live.size(); ++j) {
        const int from = k[j];
        for (const int trial : {0, from - 1, from + 1}) {
          if (trial < 0 || trial == k[j] || trial > limit(live[j])) continue;
          const int keep = k[j];
          k[j] = trial;
          if (const double g = goodput(live, time, k); g > best * (1 + 1e-12)) {
            best = g;
            moved = true;
          } else {
            k[j] = keep;
          }
        }
      }
    }
  }

  StepCosts costs_;
  std::vector<Counts> counts_;          // (n_seqs)
  Timing plain_steps_, drafted_steps_;  // the cost model's error on each kind of step
  std::vector<Estimate> estimate_;      // (live) this step's acceptance estimates
  std::vector<double> weight_;          // (live) this step's weights, 1 for the shortest
  std::vector<int> probe_;              // (live) draft positions valued optimistically
  std::vector<Candidate> heads_;        // scratch: each sequence's next candidate, a heap
  std::vector<Candidate> taken_;        // scratch: the candidates scanned, in order
};

// A sequence's own evidence, shrunk toward the batch's (all candidates continue one
// prompt), which is shrunk toward the prior; then raised by up to kOptimism standard
// deviations of that estimate (a Beta posterior's, counting the sequence's own evidence
// or the batch's mean per sequence, whichever is more). Without the optimism one early
// rejection, likely at any rate, would stop a sequence's drafting until its evidence had
// faded (some 70 steps); with it, thin evidence keeps drafting while repeated rejections
// stop it. The optimism is for exploring, so it fades as evidence grows (by
// kPriorWeight / (kPriorWeight + evidence)): the decayed counts never hold more than some
// ten steps, and a whole deviation added to those made drafts that pay only at a rate
// above the evidence's look worth it, for good (the demo pair at N = 1 drafted at
// acceptance 0.7, where its drafted steps lose).
GoodputImpl::Estimate GoodputImpl::acceptance(int seq) const {
  double accepted = 0, rejected = 0;
  for (const Counts& c : counts_) {
    accepted += c.accepted;
    rejected += c.rejected;
  }
  const double batch = (accepted + kPriorWeight * kPrior) / (accepted + rejected + kPriorWeight);
  const Counts& own = counts_.at(static_cast<size_t>(seq));
  const double mean = (own.accepted + kPriorWeight * batch) / (own.accepted + own.rejected + kPriorWeight);
  const double weight = std::max(own.accepted + own.rejected, (accepted + rejected) / static_cast<double>(counts_.size()));
  const double deviation = std::sqrt(mean * (1 - mean) / (weight + kPriorWeight + 1));
  const double exploring = kPriorWeight / (kPriorWeight + weight);  // 1 without evidence
  return {std::min(mean, kMaxAcceptance), std::min(mean + kOptimism * exploring * deviation, kMaxAcceptance)};
}

}  // namespace

double predicted_step_seconds(const StepCosts& costs, std::span<const DraftRequest> live, std::span<const int> k) {
  StepTime time(costs, live);
  for (size_t j = 0; j < live.size(); ++j) {
    for (int p = 1; p <= k[j]; ++p) time.add(j, p, 0.0);  // greedy: no rows drawn
  }
  return time.seconds();
}

struct GoodputPolicy::Impl : GoodputImpl {
  using GoodputImpl::GoodputImpl;
};

GoodputPolicy::GoodputPolicy(int n_seqs, StepCosts costs) : impl_(std::make_unique<Impl>(n_seqs, std::move(costs))) {}
GoodputPolicy::~GoodputPolicy() = default;

void GoodputPolicy::lengths(std::span<const DraftRequest> live, std::vector<int>& k) { impl_->lengths(live, k); }

void GoodputPolicy::update(std::span<const DraftRequest> live, std::span<const int> proposed,
                           std::span<const int> accepted, double seconds) {
  impl_->update(live, proposed, accepted, seconds);
}

GoodputPolicy::AcceptanceEstimate GoodputPolicy::acceptance(int seq) const {
  const GoodputImpl::Estimate e = impl_->acceptance(seq);
  return {e.mean, e.optimistic};
}

}  // namespace specula
