// The most likely tokens at each position of a generated sequence, for OpenAI's
// top_logprobs. The decoder keeps only the sampled tokens' log-probabilities (verifying k
// drafts a step, it does not sort the vocabulary at each row), so the alternatives come from
// one more forward pass of the target over the prompt and the generated tokens, on its own
// cache: a sequence's logits do not depend on how it was batched (backend.h), so these are
// the distributions the tokens were chosen from.
#pragma once

#include <span>
#include <vector>

#include "compute/backend.h"
#include "model/model.h"

namespace specula {

struct TokenLogprob {
  int token = 0;
  float logprob = 0.0f;  // log softmax of the target's logits (T = 1)
};

// For each of `tokens` (generated after `prompt_ids`, which must not be empty), the `k` most
// likely tokens at its position, most likely first. Throws std::invalid_argument for an
// empty prompt, k < 1, or a sequence longer than the model's context.
std::vector<std::vector<TokenLogprob>> top_logprobs(Backend& backend, const Model& model, std::span<const int> prompt_ids,
                                                    std::span<const int> tokens, int k);

}  // namespace specula
