// Where a session runs: here, on this process's backend and models (LocalGenerator), or on
// an OpenAI-compatible server (serve/remote_generator.h). The app and the commands that
// generate (`specula-cli generate`, `eval`) hold a Generator and never ask which one it is:
// streaming, the sandbox, ranking, the budget and pass@k work the same on both.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "compute/backend.h"
#include "decode/prompt_cache.h"
#include "decode/session.h"
#include "decode/top_logprobs.h"
#include "model/model.h"

namespace specula {

class Generator {
 public:
  virtual ~Generator() = default;

  // run_session's contract: request.n_candidates completions of request.prompt, streamed
  // through `callbacks` on the calling thread, within request.budget_seconds; setting
  // `*stop` ends every candidate with FinishReason::Cancelled. Throws std::invalid_argument
  // for a bad request and std::runtime_error, with a readable message, when generation
  // cannot run.
  virtual SessionResult generate(const GenerationRequest& request, const SessionCallbacks& callbacks = {},
                                 const std::atomic<bool>* stop = nullptr) = 0;

  // One line naming where generation runs: the backend, or the server and its model.
  virtual std::string describe() const = 0;
};

// run_session on a backend of this process. A request for the "model" drafter gets this
// generator's draft model unless it names its own.
class LocalGenerator final : public Generator {
 public:
  // `draft` may be null: the "model" drafter then says it needs one.
  LocalGenerator(std::unique_ptr<Backend> backend, std::shared_ptr<const Model> target,
                 std::shared_ptr<const Model> draft = nullptr);

  SessionResult generate(const GenerationRequest& request, const SessionCallbacks& callbacks = {},
                         const std::atomic<bool>* stop = nullptr) override;
  std::string describe() const override { return backend_->name(); }

  // Keeps the keys and values of recent prompts, at most `max_blocks` KV blocks, for the
  // requests that ask for it (GenerationRequest::cache_prompt); 0 turns it off. Call it before
  // generating, from the thread that generates.
  void enable_prompt_cache(int max_blocks);
  // What the prompt cache holds (all 0 without one); any thread.
  PromptCacheStats prompt_cache_stats() const;

  const Model& target() const { return *target_; }
  // The k most likely tokens at each of `tokens`' positions after `prompt_ids`
  // (top_logprobs.h), on this generator's backend: not while it generates.
  std::vector<std::vector<TokenLogprob>> top_logprobs(std::span<const int> prompt_ids, std::span<const int> tokens,
                                                      int k) {
    return specula::top_logprobs(*backend_, *target_, prompt_ids, tokens, k);
  }
  // The negative log-likelihood of each of `ids` after the first, and with k > 0 the k most
  // likely tokens at its position (top_logprobs.h), on this generator's backend: not while it
  // generates.
  TokenScores score_tokens(std::span<const int> ids, int k) { return specula::score_tokens(*backend_, *target_, ids, k); }
  const std::shared_ptr<const Model>& draft() const { return draft_; }

 private:
  std::unique_ptr<Backend> backend_;
  std::shared_ptr<const Model> target_;
  std::shared_ptr<const Model> draft_;
  std::unique_ptr<PromptCache> prompt_cache_;
};

}  // namespace specula
