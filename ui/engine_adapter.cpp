// The real engine behind the window: load_model + create_backend or a server, a Generator,
// and the sandboxed test runner. A thin layer: every decision lives in the engine.
#include <memory>
#include <stdexcept>

#include "decode/generator.h"
#include "decode/model_set.h"
#include "engine_port.h"
#include "eval/evaluation.h"
#include "eval/problems.h"
#include "eval/sandbox.h"
#include "eval/test_runner.h"
#include "model/model_chat.h"
#include "model/tokenizer.h"

namespace specula::ui {

namespace {

constexpr int kTestJobs = 2;  // sandboxes at once; the machine also decodes meanwhile

std::string describe(const Model& model) {
  const ModelConfig& c = model.config;
  std::string name = c.name.empty() ? model.path.substr(model.path.find_last_of('/') + 1) : c.name;
  return name + " (" + c.architecture + ", " + std::to_string(c.n_layers) + " layers, dim " +
         std::to_string(c.dim) + ", vocab " + std::to_string(c.vocab_size) + ", " + model.format + ")";
}

class SpeculaEngine final : public EnginePort {
 public:
  LoadedModels load(const ModelPaths& paths, const std::function<bool(double)>& progress) override {
    std::string note;
    // the drafter is chosen per run, so every forward's cost is measured now (or read from
    // the cost cache) rather than at the first generation; a layers:K draft is narrowed then
    ModelSet set = load_model_set(create_backend(paths.device, &note),
                                  {.target = paths.target,
                                   .tokenizer = paths.tokenizer,
                                   .draft_model = paths.draft,
                                   .measure_cost = true},
                                  [&progress](const std::string&, double, double overall) { return progress(overall); });
    std::shared_ptr<const Model> target = std::move(set.target);
    std::shared_ptr<const Model> draft = std::move(set.draft);
    std::unique_ptr<Backend> backend = std::move(set.backend);
    std::string summary = describe(*target);
    if (draft) summary += "; draft " + describe(*draft);
    const bool fills_middle = target->tokenizer->fim().complete();
    std::optional<ModelChatTemplate> chat = model_chat_template(*target);  // metadata only
    generator_ = std::make_unique<LocalGenerator>(std::move(backend), std::move(target), std::move(draft));
    return {.summary = summary,
            .backend = generator_->describe(),
            .isolation = open_sandbox(),
            .fill_in_middle = fills_middle,
            .chat_template = std::move(chat)};
  }

  LoadedModels connect(const serve::RemoteOptions& server) override {
    auto remote = std::make_unique<serve::RemoteGenerator>(server);
    const serve::ServerInfo info = remote->probe();
    generator_ = std::move(remote);
    // whether the server's model takes a suffix is not known before asking: a server refuses
    // one it cannot fill with a message
    return {.summary = info.summary, .backend = generator_->describe(), .isolation = open_sandbox(), .fill_in_middle = false};
  }

  std::string probe(const serve::RemoteOptions& server) override {
    const serve::ServerInfo info = serve::RemoteGenerator(server).probe();
    std::string models;
    for (const std::string& m : info.models) models += (models.empty() ? "" : ", ") + m;
    return info.url + " answers; it serves " + models;
  }

  SessionResult generate(const GenerationRequest& request, const SessionCallbacks& callbacks,
                         const std::atomic<bool>* stop) override {
    if (!generator_) throw std::invalid_argument("no model is loaded");
    return generator_->generate(request, callbacks, stop);
  }

  TestResult test(const CandidateTest& candidate, double timeout_seconds) override {
    return runner().submit(candidate.program, timeout_seconds).get();
  }

  ProblemEvaluation evaluate(const Problem& problem, const GenerationRequest& request,
                             const std::atomic<bool>* stop) override {
    // the generator keeps the budget itself, so the user's stop flag is the only one it needs.
    const CandidateGenerator generate = [&](const Problem& p, double budget_seconds, const CandidateSink& emit,
                                            const std::atomic<bool>&) {
      GenerationRequest r = request;
      r.prompt = p.prompt;
      r.suffix = p.suffix;
      r.budget_seconds = budget_seconds;
      SessionCallbacks callbacks;
      callbacks.on_finished = [&](const Candidate& c) {
        if (c.finish != FinishReason::Cancelled) emit({c.index, c.text, c.mean_logprob()});
      };
      this->generate(r, callbacks, stop);
    };
    return evaluate_problem(problem, generate, runner(), request.budget_seconds);
  }

 private:
  // The sandbox, opened once; returns how candidate tests are confined, or why there are none.
  std::string open_sandbox() {
    if (!runner_) {
      try {
        sandbox_ = std::make_unique<Sandbox>();
        runner_ = std::make_unique<TestRunner>(*sandbox_, SandboxLimits{}, kTestJobs);
        runner_->warm_up();  // with the model's load, not within the first run's budget
      } catch (const SandboxError& e) {
        isolation_ = std::string("no tests: ") + e.what();
      }
    }
    if (sandbox_) {
      isolation_ = std::string("isolation: ") + isolation_name(sandbox_->isolation());
      if (!sandbox_->isolation_note().empty()) isolation_ += " (" + sandbox_->isolation_note() + ")";
    }
    return isolation_;
  }
  TestRunner& runner() {
    if (!runner_) throw SandboxError(isolation_);
    return *runner_;
  }

  std::unique_ptr<Generator> generator_;
  std::unique_ptr<Sandbox> sandbox_;
  std::unique_ptr<TestRunner> runner_;
  std::string isolation_;
};

}  // namespace

std::unique_ptr<EnginePort> make_engine() { return std::make_unique<SpeculaEngine>(); }

}  // namespace specula::ui
