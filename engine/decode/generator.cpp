#include "decode/generator.h"

#include <stdexcept>

namespace specula {

LocalGenerator::LocalGenerator(std::unique_ptr<Backend> backend, std::shared_ptr<const Model> target,
                               std::shared_ptr<const Model> draft)
    : backend_(std::move(backend)), target_(std::move(target)), draft_(std::move(draft)) {
  if (!backend_ || !target_) throw std::invalid_argument("a local generator needs a backend and a target model");
}

SessionResult LocalGenerator::generate(const GenerationRequest& request, const SessionCallbacks& callbacks,
                                       const std::atomic<bool>* stop) {
  PromptCache* cache = request.cache_prompt ? prompt_cache_.get() : nullptr;
  if (request.draft.kind != "model" || request.draft.draft_model || !draft_) {
    return run_session(*backend_, *target_, request, callbacks, stop, cache);  // the drafter says what is missing
  }
  GenerationRequest with_draft = request;
  with_draft.draft.draft_model = draft_;
  return run_session(*backend_, *target_, with_draft, callbacks, stop, cache);
}

void LocalGenerator::enable_prompt_cache(int max_blocks) {
  prompt_cache_ = max_blocks > 0 ? std::make_unique<PromptCache>(max_blocks) : nullptr;
}

PromptCacheStats LocalGenerator::prompt_cache_stats() const {
  return prompt_cache_ ? prompt_cache_->stats() : PromptCacheStats{};
}

}  // namespace specula
