#include "decode/draft_policy.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "decode/goodput_policy.h"

namespace specula {

namespace {

class FixedPolicy : public DraftPolicy {
 public:
  explicit FixedPolicy(int k) : k_(k) {}
  std::string name() const override { return "fixed:" + std::to_string(k_); }
  void lengths(std::span<const DraftRequest> live, std::vector<int>& k) override { k.assign(live.size(), k_); }
  void update(std::span<const DraftRequest>, std::span<const int>, std::span<const int>, double) override {}

 private:
  int k_;
};

// BASS (arXiv 2404.15778), Algorithm 1: one draft length l for the batch, because the
// batch's step time is set by its longest draft. Reading of the paper's rule:
//   if max_i x_i == l:  l = min(l + l_incre, l_limit); s = 0
//   else:               l = l - ceil(l / l_mod) - s; l = max(1, max_i x_i, l); s = 1
// with l = 7, l_incre = 2, l_mod = 10, l_limit = 32, x_i the accepted count of sequence i.
// s makes consecutive shrinks steeper; the floor max_i x_i keeps the length that the best
// sequence just proved useful.
class BassPolicy : public DraftPolicy {
 public:
  static constexpr int kStart = 7, kIncrement = 2, kMod = 10, kLimit = kMaxDraft;

  std::string name() const override { return "bass"; }
  void lengths(std::span<const DraftRequest> live, std::vector<int>& k) override { k.assign(live.size(), l_); }
  void update(std::span<const DraftRequest>, std::span<const int> proposed, std::span<const int> accepted,
              double) override {
    int best = 0;
    bool drafted = false;
    for (size_t j = 0; j < accepted.size(); ++j) {
      if (proposed[j] == 0) continue;  // a sequence the drafter had nothing for says nothing about l
      drafted = true;
      best = std::max(best, accepted[j]);
    }
    if (!drafted) return;
    if (best >= l_) {
      l_ = std::min(l_ + kIncrement, kLimit);
      shrunk_ = 0;
    } else {
      l_ = l_ - (l_ + kMod - 1) / kMod - shrunk_;
      l_ = std::max({1, best, l_});
      shrunk_ = 1;
    }
  }

 private:
  int l_ = kStart;
  int shrunk_ = 0;  // the paper's s
};

class AdaptivePolicy : public DraftPolicy {
 public:
  static constexpr int kStart = 4;

  explicit AdaptivePolicy(int n_seqs) : k_(static_cast<size_t>(n_seqs), kStart) {}
  std::string name() const override { return "adaptive"; }
  void lengths(std::span<const DraftRequest> live, std::vector<int>& k) override {
    k.clear();
    for (const DraftRequest& r : live) k.push_back(k_.at(static_cast<size_t>(r.seq)));
  }
  void update(std::span<const DraftRequest> live, std::span<const int> proposed, std::span<const int> accepted,
              double) override {
    for (size_t j = 0; j < live.size(); ++j) {
      if (proposed[j] == 0) continue;
      int& k = k_.at(static_cast<size_t>(live[j].seq));
      k = accepted[j] == proposed[j] ? std::min(k + 2, kMaxDraft) : std::max(k - 1, 1);
    }
  }

 private:
  std::vector<int> k_;  // (n_seqs) current length per sequence
};

}  // namespace

StepCosts step_costs(Backend& backend, const Model& target, const Drafter& drafter, const SamplingParams& sampling) {
  StepCosts costs;
  costs.sampled = !sampling.greedy();
  costs.target = backend.forward_cost(target);
  if (const Model* model = drafter.forward_model()) {
    costs.draft = model == &target ? costs.target : backend.forward_cost(*model);
    costs.draft_layers = drafter.forward_layers();
  }
  return costs;
}

std::unique_ptr<DraftPolicy> create_draft_policy(const std::string& spec, int n_seqs, Backend& backend,
                                                 const Model& target, const Drafter& drafter,
                                                 const SamplingParams& sampling) {
  return create_draft_policy(spec, n_seqs, spec == "goodput" ? step_costs(backend, target, drafter, sampling) : StepCosts{});
}

std::unique_ptr<DraftPolicy> create_draft_policy(const std::string& spec, int n_seqs, const StepCosts& costs) {
  if (spec == "goodput") return std::make_unique<GoodputPolicy>(n_seqs, costs);
  if (spec == "bass") return std::make_unique<BassPolicy>();
  if (spec == "adaptive") return std::make_unique<AdaptivePolicy>(n_seqs);
  if (spec.starts_with("fixed:")) {
    const std::string_view digits = std::string_view(spec).substr(6);
    int k = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
    if (ec != std::errc() || end != digits.data() + digits.size() || k < 1 || k > DraftPolicy::kMaxDraft) {
      throw std::invalid_argument("draft policy '" + spec + "': K must be a whole number from 1 to " +
                                  std::to_string(DraftPolicy::kMaxDraft));
    }
    return std::make_unique<FixedPolicy>(k);
  }
  throw std::invalid_argument("unknown draft policy '" + spec + "': use goodput, fixed:K, bass or adaptive");
}

}  // namespace specula
