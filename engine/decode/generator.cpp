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
  if (request.draft.kind != "model" || request.draft.draft_model || !draft_) {
    return run_session(*backend_, *target_, request, callbacks, stop);  // the drafter says what is missing
  }
  GenerationRequest with_draft = request;
  with_draft.draft.draft_model = draft_;
  return run_session(*backend_, *target_, with_draft, callbacks, stop);
}

}  // namespace specula
