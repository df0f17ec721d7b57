// The most likely tokens at each position of a generated sequence, for OpenAI's
// top_logprobs. The decoder keeps only the sampled tokens' log-probabilities (verifying k
// drafts a step, it does not sort the vocabulary at each row), so the alternatives come from
// one more forward pass of the target over the prompt and the generated tokens, on its own
// cache: a sequence's logits do not depend on how it was batched (backend.h), so these are
// the distributions the tokens were chosen from.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "compute/backend.h"
#include "model/model.h"

namespace specula {

struct TokenLogprob {
  int token = 0;
  float logprob = 0.0f;  // log softmax of the target's logits (T = 1)
};

// The `k` most likely tokens of one row of logits, most likely first (ties: the lower id).
std::vector<TokenLogprob> most_likely(std::span<const float> logits, int k);

// What one pass of the target over `ids` says of each token after the first (a prompt scored
// whole, as a perplexity window or OpenAI's `echo`): its negative log-likelihood, in double
// precision, and with k > 0 the k most likely tokens at its position.
struct TokenScores {
  std::vector<double> nll;                     // (ids.size() - 1) -log p(ids[i] | ids[..i]), i >= 1
  std::vector<std::vector<TokenLogprob>> top;  // (ids.size() - 1) × k; empty when k is 0
  bool stopped = false;                        // `advanced` said stop: the vectors cover the rows done
};
// `rows_per_forward` positions go through each forward; after each, advanced(positions done)
// may say stop (false). Throws std::invalid_argument for fewer than 2 ids or more than the
// model's context, and k < 0.
TokenScores score_tokens(Backend& backend, const Model& model, std::span<const int> ids, int k,
                         const std::function<bool(long)>& advanced = {}, int rows_per_forward = 64);

// For each of `tokens` (generated after `prompt_ids`, which must not be empty), the `k` most
// likely tokens at its position, most likely first. Throws std::invalid_argument for an
// empty prompt, k < 1, or a sequence longer than the model's context.
std::vector<std::vector<TokenLogprob>> top_logprobs(Backend& backend, const Model& model, std::span<const int> prompt_ids,
                                                    std::span<const int> tokens, int k);

}  // namespace specula
