// Verifying draft tokens against the target: the step that makes speculative decoding exact.
//
// A drafter proposed tokens d_1..d_k for a sequence; the target scored the verification
// rows [last, d_1..d_k] in one pass, giving k + 1 rows of logits: row j is the target's
// prediction for the token after d_j (row 0: after `last`). Every function here returns how
// many draft tokens survive and the one token the target adds after them, so each step
// yields accepted + 1 tokens.
#pragma once

#include <span>
#include <vector>

#include "compute/sampler.h"

namespace specula {

// What a verification row decides for one sequence's draft.
struct Acceptance {
  int accepted = 0;  // draft tokens kept, a prefix of the draft
  int next = -1;     // the target's token after them: its correction, or the bonus token
};

// Greedy: keep draft tokens while each equals the target's argmax; then take the argmax.
// `target_logits` holds (draft.size() + 1, vocab) rows.
Acceptance accept_greedy(std::span<const int> draft, std::span<const float> target_logits, int vocab);

// Speculative rejection sampling (Leviathan et al., Chen et al.): draft token d_j, drawn from
// q_j, is kept with probability min(1, p_j(d_j) / q_j(d_j)); at the first rejection the
// token is drawn from normalize(max(p_j - q_j, 0)); when all are kept a bonus token is drawn
// from p_{k+1}. The output then follows the target distribution p exactly, whatever q is.
// p_j = sampling_distribution(params, target row j): temperature and filters apply to the
// target exactly as they applied to the draft. `draft_probs` holds the (k, vocab) rows q_j
// the draft tokens were drawn from; empty means a deterministic drafter (q_j one-hot at d_j).
Acceptance accept_sampled(const SamplingParams& params, std::span<const int> draft,
                       std::span<const float> draft_probs, std::span<const float> target_logits,
                       int vocab, Rng& rng);

// BENCHMARK ONLY, not a decoding method: keeps each draft token with probability `alpha`
// whatever the models say, then takes the target's own token (argmax when greedy, else
// drawn from p). It lets a benchmark measure the system at a known acceptance rate with
// random-weights models whose own acceptance means nothing. Its output is not the model's.
Acceptance accept_forced(double alpha, const SamplingParams& params, std::span<const int> draft,
                      std::span<const float> target_logits, int vocab, Rng& rng);

}  // namespace specula
