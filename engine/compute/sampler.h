// Sampling from logits: greedy, temperature, top-k, top-p, min-p, one seeded RNG per
// sequence so that every candidate is reproducible.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace specula {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax)
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0f; }
};

// Small, fast, reproducible generator (xoshiro256**, seeded through splitmix64).
class Rng {
 public:
  explicit Rng(uint64_t seed = 0);
  uint64_t next();
  double uniform();  // [0, 1)

 private:
  uint64_t s_[4];
};

// Index of the largest logit; the lowest index wins ties.
int argmax(std::span<const float> logits);

// The distribution that sampling draws from: softmax(logits / T), then top-k, top-p and
// min-p filters, renormalized. `probs` gets (vocab) entries, zeros where filtered.
// Greedy parameters give a one-hot distribution on the argmax.
void sampling_distribution(const SamplingParams& params, std::span<const float> logits,
                           std::vector<float>& probs);

// Draws an index from a normalized distribution.
int sample_from(std::span<const float> probs, Rng& rng);
// The same draw with the uniform `u` in [0, 1) given: the first index whose running sum
// exceeds u times the sum (sample_from(probs, rng) is sample_at(probs, rng.uniform())).
int sample_at(std::span<const float> probs, double u);

// Draws the next token: argmax when greedy, else from sampling_distribution.
int sample(const SamplingParams& params, std::span<const float> logits, Rng& rng);

// log softmax(logits)[token] at temperature 1: the model's own log-probability.
float token_logprob(std::span<const float> logits, int token);

}  // namespace specula
