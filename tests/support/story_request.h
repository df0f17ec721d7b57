// The session the serving suites ask of stories260K: n continuations of "Once upon a time",
// drafted as their servers draft (ngram, adaptive). A remote request leaves the drafter to
// the server; locally it decides only the speed, never a greedy output.
#pragma once

#include <cstdint>

#include "decode/generator.h"

namespace specula::test {

inline GenerationRequest story_request(int n, float temperature, uint64_t seed) {
  GenerationRequest r;
  r.prompt = "Once upon a time";
  r.n_candidates = n;
  r.max_new_tokens = 60;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.draft.kind = "ngram";
  r.draft.policy = "adaptive";
  return r;
}

}  // namespace specula::test
