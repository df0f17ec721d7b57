#include "decode/policy_simulation.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "compute/sampler.h"

namespace specula {

SimulatedRun simulate_decode(DraftPolicy* policy, const StepCosts& costs, const SimulatedDecode& d) {
  if (!costs.target) throw std::invalid_argument("a simulated decode needs the cost of the target's forwards");
  if (d.n_seqs < 1 || d.prompt_tokens < 1 || d.max_new_tokens < 1) {
    throw std::invalid_argument("a simulated decode needs a sequence, a prompt and a token to generate");
  }
  const size_t n = static_cast<size_t>(d.n_seqs);
  // the prefill gives every sequence its first token; the content of the tokens does not matter
  std::vector<std::vector<int>> tokens(n, std::vector<int>(static_cast<size_t>(d.prompt_tokens) + 1, 0));
  std::vector<Rng> rngs;
  for (size_t i = 0; i < n; ++i) rngs.emplace_back(d.seed + i);
  SimulatedRun run;
  std::vector<DraftRequest> live;
  std::vector<int> k, accepted;
  for (;;) {
    live.clear();
    for (size_t i = 0; i < n; ++i) {
      const int generated = static_cast<int>(tokens[i].size()) - d.prompt_tokens;
      if (generated >= d.max_new_tokens) continue;
      const int left = d.max_new_tokens - generated - 1;  // the target's own token comes after the drafts
      live.push_back(DraftRequest{static_cast<int>(i), tokens[i], left, 0, static_cast<int>(i), generated,
                                  d.max_new_tokens - generated, 0});
    }
    if (live.empty()) return run;
    k.assign(live.size(), 0);
    if (policy) policy->lengths(live, k);
    for (size_t j = 0; j < live.size(); ++j) {
      k[j] = std::clamp(k[j], 0, live[j].max_tokens);
      live[j].max_tokens = k[j];  // as the decoder cuts the requests to the lengths
    }
    const double seconds = predicted_step_seconds(costs, live, k);
    accepted.assign(live.size(), 0);
    for (size_t j = 0; j < live.size(); ++j) {
      Rng& rng = rngs[static_cast<size_t>(live[j].seq)];
      while (accepted[j] < k[j] && rng.uniform() < d.alpha) ++accepted[j];
      run.proposed += k[j];
      run.accepted += accepted[j];
    }
    if (policy) policy->update(live, k, accepted, run.steps == 0 ? 0.0 : seconds);  // the decoder times no first step
    // the spans in `live` are not read again: the sequences may grow now
    for (size_t j = 0; j < live.size(); ++j) {
      tokens[static_cast<size_t>(live[j].seq)].resize(tokens[static_cast<size_t>(live[j].seq)].size() +
                                                      static_cast<size_t>(accepted[j]) + 1, 0);
    }
    run.seconds += seconds;
    ++run.steps;
  }
}

}  // namespace specula
