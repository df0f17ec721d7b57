// Batched speculative decoding at the level of token ids (BASS + EMS-SD).
//
// The prompt is prefilled once; N sequences fork from it and share its KV blocks. Each step
// asks the policy for draft lengths, the drafter for drafts, and runs ONE target forward
// over a ragged batch holding, for every live sequence, its last token and its own draft
// tokens, concatenated with no padding. Each sequence then keeps its accepted prefix plus one
// target token, its cache is truncated to match, and finished sequences leave the batch.
// Text (tokenizer, stop strings, streaming deltas) is session.h's business, on top of this.
#pragma once

#include <atomic>
#include <functional>
#include <span>
#include <vector>

#include "compute/backend.h"
#include "decode/drafter.h"
#include "decode/draft_policy.h"
#include "compute/kv_cache.h"
#include "model/model.h"
#include "compute/sampler.h"

namespace specula {

enum class FinishReason { Running, Stop, Eos, Length, Budget, Cancelled };

// Keys and values of earlier prompts that a decode may start from (decode/prompt_cache.h):
// decode() asks it for a sequence already holding the start of its prompt, prefills only
// the rest, and offers it the prefilled prompt to keep for later decodes.
class PromptReuse {
 public:
  virtual ~PromptReuse() = default;
  struct Start {
    int seq = -1;     // a new sequence of the cache, holding positions [0, cached)
    int cached = 0;   // prompt tokens whose keys and values it holds; less than the prompt's length
  };
  // A new sequence of `cache` holding the keys and values of the longest start of `prompt`
  // that is kept (an empty one when none is), never the whole prompt: its last token's
  // logits are computed.
  virtual Start begin(KvCache& cache, std::span<const int> prompt) = 0;
  // `seq` now holds the whole prompt: keep what is wanted of it (sharing its blocks; the
  // sequence itself stays the decoder's).
  virtual void keep(KvCache& cache, int seq, std::span<const int> prompt) = 0;
};
const char* finish_reason_name(FinishReason reason);  // "running", "stop", "eos", "length", ...

struct DecodeOptions {
  int n_seqs = 1;
  SamplingParams sampling;          // sequence i draws with seed sampling.seed + i
  int max_new_tokens = 256;         // per sequence; 0: the prompt is prefilled (for options.reuse) and nothing more
  double budget_seconds = 0.0;      // wall clock from the start; 0: none
  std::vector<int> eos;             // tokens that end a sequence (not kept): the tokenizer's
                                    // end_of_generation(); empty: none
  // BENCHMARK ONLY (see accept_forced): keep each draft token with this probability
  // whatever the models say. Negative: off, the real acceptance rule is used.
  double forced_acceptance = -1.0;
  // The tokens every sequence's first token is drawn from (token healing, see heal_prompt);
  // empty: any. Its log-probability stays the model's own, over the whole vocabulary.
  std::vector<int> first_tokens;
  // Not null: the prompt's prefill starts from the keys and values it keeps, and it keeps
  // this prompt's. The output is the same either way: a forward's rows do not depend on how
  // a sequence's tokens were split across calls (Backend::forward).
  PromptReuse* reuse = nullptr;
};

struct SequenceOutput {
  std::vector<int> tokens;        // generated ids (EOS not included)
  std::vector<float> logprobs;    // target log-probability (T = 1) of each generated id
  FinishReason finish = FinishReason::Running;
  int accepted = 0;               // draft tokens accepted
  int proposed = 0;               // draft tokens proposed
  double seconds = 0.0;           // from the start to this sequence's end
};

struct DecodeStats {
  int steps = 0;                  // verification steps (prefill not counted)
  int target_forwards = 0;        // prefill included
  int target_tokens = 0;          // tokens run through the target, prompt included
  int draft_forwards = 0;
  int prompt_tokens = 0;
  int cached_tokens = 0;          // prompt tokens whose keys and values came from options.reuse (not computed)
  int peak_blocks = 0;            // most target KV blocks in use at once
  double prefill_seconds = 0.0;   // from the start to the end of the prefill (the first tokens sampled)
  double wall_seconds = 0.0;      // from the start to the end, prefill included
};

struct DecodeCallbacks {
  // Sequence `seq` gained `tokens` this step (already appended to `out`). Returning true
  // stops it (FinishReason::Stop), e.g. because its text now holds a stop string.
  std::function<bool(int seq, const SequenceOutput& out, std::span<const int> tokens)> on_tokens;
  // Sequence `seq` ended with `out.finish`.
  std::function<void(int seq, const SequenceOutput& out)> on_finished;
};

struct DecodeResult {
  std::vector<SequenceOutput> seqs;  // (n_seqs)
  DecodeStats stats;
};

// Decodes options.n_seqs continuations of `prompt` (ids, BOS included). `cache` is the
// target's (from backend.create_cache); every sequence this call creates in it is released
// before it returns or throws. Setting `*stop` ends all live sequences with Cancelled at the
// next step. Throws std::invalid_argument for a bad prompt (empty, beyond the context).
DecodeResult decode(Backend& backend, const Model& target, KvCache& cache, Drafter& drafter,
                    DraftPolicy& policy, std::span<const int> prompt, const DecodeOptions& options,
                    const DecodeCallbacks& callbacks = {}, const std::atomic<bool>* stop = nullptr);

// KV positions a decode() needs in the target cache (and in a draft cache): the shared
// prompt, each sequence's own tokens and drafts, and a block of slack per sequence.
int decode_cache_tokens(int prompt_tokens, int context_length, const DecodeOptions& options,
                        int block_size = 16);

}  // namespace specula
