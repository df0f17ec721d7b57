// A generation session: one prompt, N candidates, batched speculative decoding within
// a time budget, streamed through callbacks. Backend-agnostic and free of any UI code.
// The token-level loop is decoder.h's; this layer adds text: the tokenizer, streaming
// deltas that never split a character, and stop strings.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compute/backend.h"
#include "decode/decoder.h"
#include "model/model.h"
#include "compute/sampler.h"

namespace specula {

class PromptCache;

constexpr int kMaxCandidates = 64;  // most candidates one session decodes at once

struct DraftOptions {
  std::string kind = "none";  // "none", "ngram", "layers:K", "model"
  std::shared_ptr<const Model> draft_model;  // for kind "model"
  std::string policy = "goodput";            // "goodput", "fixed:K", "bass", "adaptive"
};

struct GenerationRequest {
  std::string prompt;               // the text to continue; with a suffix, the code before the hole
  std::optional<std::string> suffix;  // set: fill in the middle, the completion goes between
                                      // prompt and suffix (which may be empty); the model
                                      // needs FIM tokens (Tokenizer::fim_prompt's layout)
  std::optional<std::string> chat_prefix;  // set: a rendered chat that the prompt follows (empty when
                                           // the prompt is the whole chat); chat_prefix + prompt is
                                           // encoded as apply_chat_template's text is (encode_chat:
                                           // special tokens' texts parsed, no BOS added). Not with a suffix.
  std::vector<int> prompt_ids;      // non-empty: the model's prompt as ids, BOS included where wanted
                                    // (prompt and suffix are then not read): a prompt laid out by
                                    // the caller, e.g. repository-level fill-in-the-middle
  bool allow_empty_prompt = false;  // generate from BOS alone (llama2.c without a prompt); a
                                    // fill-in-the-middle prompt may always be empty
  int n_candidates = 1;             // 1 .. kMaxCandidates
  SamplingParams sampling;          // candidate i uses seed sampling.seed + i
  int max_new_tokens = 256;         // 0: the prompt only, prefilled for a prompt cache to keep
  double budget_seconds = 0.0;      // 0: no budget; negative is an error
  std::vector<std::string> stop;    // stop strings; the completion is cut before them
  bool code_stops = false;          // add the default code-completion stops (code_stop_strings)
  bool token_healing = false;       // back off the prompt's last token when others extend it
                                    // (heal_prompt); not with a suffix
  DraftOptions draft;
  bool cache_prompt = false;        // start from the keys and values of earlier prompts where the
                                    // generator keeps them (LocalGenerator::enable_prompt_cache), and
                                    // keep this one's; the output is the same either way
  // Ends a candidate from its text, for rules a stop string cannot say (llama.cpp's n_indent, a
  // time limit that keeps whole lines): called after each step that added tokens to
  // candidate `index`, with its whole text so far. A position ends the candidate with
  // FinishReason::Stop, its text cut there (never before text already streamed: with a hook,
  // text streams a whole line at a time, so that a cut at the start of the line in progress
  // always holds); npos lets it go on. Runs on the session's thread.
  std::function<size_t(int index, const std::string& text)> text_end;
};

// The ids the model is given for `request`: its prompt with BOS where the vocabulary adds
// one, or, with a suffix, the fill-in-the-middle prompt in the layout of the model's family,
// or, with a chat prefix, the chat's text and the prompt as encode_chat encodes them;
// request.prompt_ids as they are when set.
// Throws std::invalid_argument when a suffix is given to a model without FIM tokens, or
// together with a chat prefix.
std::vector<int> request_prompt_ids(const Tokenizer& tokenizer, const GenerationRequest& request);

// The default stops for completing a Python function: a new top-level def, class,
// `if __name__` or print( line.
const std::vector<std::string>& code_stop_strings();

// The prompt of a code completion made to end where a body begins: its final newline added
// when missing. `def add(a, b):` without one has every candidate continue the signature line
// instead of writing the body. An empty prompt stays empty.
std::string code_prompt(std::string prompt);

// Token healing. A prompt's last token may be one the tokenizer would not have chosen had the
// text gone on ("):" where the body's first line would make it "):\n"): the model then
// continues from a split it never saw in training. When other tokens extend the last one's
// piece, the prompt is given without it, and the first token of every candidate is drawn
// from those that begin with it (itself included); the candidates' text starts after it.
struct HealedPrompt {
  std::vector<int> ids;           // the prompt, without its last token when healed
  std::string removed;            // that token's text: every candidate's first token begins with it
  std::vector<int> first_tokens;  // the tokens the first one is drawn from; empty: any (not healed)
};
// Not healed: a prompt of fewer than two tokens, a last token that is not a normal or
// user-defined one, or one that no other token extends.
HealedPrompt heal_prompt(const Tokenizer& tokenizer, std::vector<int> ids);

struct CandidateDelta {
  int index = 0;
  std::string text;      // newly final text
  int tokens = 0;        // tokens so far
  int accepted = 0;      // draft tokens accepted so far
  int proposed = 0;      // draft tokens proposed so far
};

struct Candidate {
  int index = 0;
  std::string text;                 // the completion, without the prompt, cut before a stop string
  std::vector<int> tokens;          // generated ids (EOS excluded; a stop string's tokens included);
                                    // -1 for each token of a remote server that does not say its ids
  std::vector<float> logprobs;      // target log-probability of each generated id
  FinishReason finish = FinishReason::Running;
  int accepted = 0;
  int proposed = 0;
  double seconds = 0.0;             // from the session's start to this candidate's end
  double mean_logprob() const;
};

struct SessionTotals {
  double wall_seconds = 0.0;
  int generated_tokens = 0;
  int steps = 0;                    // verification steps
  int target_forwards = 0;          // prefill included
  int target_tokens = 0;            // tokens run through the target, prompt included
  int draft_forwards = 0;
  int prompt_tokens = 0;
  int cached_tokens = 0;            // prompt tokens whose keys and values a prompt cache gave (not computed)
  int peak_blocks = 0;              // most target KV blocks in use at once
  double prefill_seconds = 0.0;     // from the start to the end of the prompt's prefill
  int kv_blocks_left = 0;           // target and draft KV blocks still held when decoding ended: 0 unless one leaked
  int accepted = 0;
  int proposed = 0;
  double tokens_per_second() const;
  double ms_per_token_per_sequence(int n_candidates) const;
  double acceptance_rate() const;
};

struct SessionCallbacks {
  std::function<void(const CandidateDelta&)> on_delta;
  std::function<void(const Candidate&)> on_finished;
};

struct SessionResult {
  std::vector<Candidate> candidates;  // (n_candidates) in index order
  SessionTotals totals;
};

// Runs the whole session on `backend`. Throws std::invalid_argument for a bad request
// (empty prompt, N out of range, incompatible draft, ...). Setting `*stop` from another
// thread ends every candidate with FinishReason::Cancelled within one decoding step.
// Callbacks run on the calling thread. With a `prompt_cache` the session runs in its target
// cache and starts from the longest prompt start it keeps (request.cache_prompt aside).
SessionResult run_session(Backend& backend, const Model& target, const GenerationRequest& request,
                          const SessionCallbacks& callbacks = {},
                          const std::atomic<bool>* stop = nullptr, PromptCache* prompt_cache = nullptr);

}  // namespace specula
