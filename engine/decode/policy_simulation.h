// A decode priced by the cost model alone, for studying draft policies.
//
// No forward runs. Each step asks the policy for its draft lengths, as the decoder does,
// prices the step with predicted_step_seconds() and keeps each draft token with probability
// alpha until the first rejection (accept_forced's rule, one random stream per sequence);
// the drafter can always propose what the policy asks and catches up on nothing, as `ngram`
// and `layers:K` (a `model` drafter's prefill and backlogs are not simulated). What it
// shows: what a policy's choices cost under the cost model it decides with, free of a
// shared machine's noise, over a grid of batch sizes and acceptance rates far larger than
// timed runs can cover. Its figures are predictions; bench-spec's timed runs check them.
#pragma once

#include <cstdint>

#include "decode/draft_policy.h"

namespace specula {

struct SimulatedDecode {
  int n_seqs = 1;           // sequences decoded together, all from one prompt
  int prompt_tokens = 48;   // the prompt's length (what the first step's rows attend to)
  int max_new_tokens = 64;  // each sequence's tokens, the prefill's first included
  double alpha = 0.7;       // probability that a draft token is kept
  uint64_t seed = 1;        // sequence i draws from Rng(seed + i)
};

struct SimulatedRun {
  double seconds = 0;  // predicted time of every step after the prefill
  int steps = 0;       // verification steps
  long proposed = 0;   // draft tokens, all sequences
  long accepted = 0;   // of them kept
};

// Decodes `d` with `policy` (null: plain decoding, no drafts) under `costs` (greedy). The
// policy is told each step's predicted seconds as the time the step took (but the first
// step's, which the decoder does not time either), so its checks of the cost model find it
// right.
SimulatedRun simulate_decode(DraftPolicy* policy, const StepCosts& costs, const SimulatedDecode& d);

}  // namespace specula
