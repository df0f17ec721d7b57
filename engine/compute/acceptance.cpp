#include "compute/acceptance.h"

#include <algorithm>
#include <stdexcept>

namespace specula {

namespace {

std::span<const float> row(std::span<const float> rows, int j, int vocab) {
  return rows.subspan(static_cast<size_t>(j) * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
}

void check_rows(std::span<const int> draft, std::span<const float> target_logits, int vocab) {
  if (vocab <= 0 || target_logits.size() != (draft.size() + 1) * static_cast<size_t>(vocab)) {
    throw std::invalid_argument("verification needs one row of target logits per draft token plus one");
  }
}

}  // namespace

Acceptance accept_greedy(std::span<const int> draft, std::span<const float> target_logits, int vocab) {
  check_rows(draft, target_logits, vocab);
  Acceptance v;
  for (const int d : draft) {
    const int best = argmax(row(target_logits, v.accepted, vocab));
    if (d != best) {
      v.next = best;
      return v;
    }
    ++v.accepted;
  }
  v.next = argmax(row(target_logits, v.accepted, vocab));
  return v;
}

Acceptance accept_sampled(const SamplingParams& params, std::span<const int> draft,
                       std::span<const float> draft_probs, std::span<const float> target_logits,
                       int vocab, Rng& rng) {
  check_rows(draft, target_logits, vocab);
  const bool one_hot = draft_probs.empty();
  if (!one_hot && draft_probs.size() != draft.size() * static_cast<size_t>(vocab)) {
    throw std::invalid_argument("draft distributions must have one row per draft token");
  }
  std::vector<float> p;
  Acceptance v;
  for (size_t j = 0; j < draft.size(); ++j) {
    sampling_distribution(params, row(target_logits, static_cast<int>(j), vocab), p);
    const int d = draft[j];
    const double q_d = one_hot ? 1.0 : row(draft_probs, static_cast<int>(j), vocab)[static_cast<size_t>(d)];
    const double p_d = p[static_cast<size_t>(d)];
    // u < p/q  <=>  u * q < p, which also keeps a token the draft gave zero mass
    if (rng.uniform() * q_d < p_d) {
      ++v.accepted;
      continue;
    }
    // rejected: draw from the part of p that q did not cover
    double residual_mass = 0.0;
    for (int t = 0; t < vocab; ++t) {
      const float q_t = one_hot ? (t == d ? 1.0f : 0.0f) : row(draft_probs, static_cast<int>(j), vocab)[static_cast<size_t>(t)];
      p[static_cast<size_t>(t)] = std::max(p[static_cast<size_t>(t)] - q_t, 0.0f);
      residual_mass += p[static_cast<size_t>(t)];
    }
    if (residual_mass <= 0.0) {
      // p == q up to rounding: rejection had probability ~0; p itself is the right law
      sampling_distribution(params, row(target_logits, static_cast<int>(j), vocab), p);
    }
    v.next = sample_from(p, rng);
    return v;
  }
  sampling_distribution(params, row(target_logits, v.accepted, vocab), p);
  v.next = sample_from(p, rng);
  return v;
}

Acceptance accept_forced(double alpha, const SamplingParams& params, std::span<const int> draft,
                      std::span<const float> target_logits, int vocab, Rng& rng) {
  check_rows(draft, target_logits, vocab);
  Acceptance v;
  while (v.accepted < static_cast<int>(draft.size()) && rng.uniform() < alpha) ++v.accepted;
  v.next = sample(params, row(target_logits, v.accepted, vocab), rng);
  return v;
}

}  // namespace specula
