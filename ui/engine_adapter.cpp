// The real engine behind the window: load_model + create_backend or a server, a Generator,
// and the sandboxed test runner. A thin layer: every decision lives in the engine.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "decode/generator.h"
#include "engine_port.h"
#include "eval/evaluation.h"
#include "eval/problems.h"
#include "eval/sandbox.h"
#include "eval/test_runner.h"
#include "model/gguf.h"
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

// A file named *.gguf that does not start with GGUF's magic (a text file, a download that
// was an error page) gets GGUF's own message, as `specula-cli models` gives it, rather than
// the message of the format the loader tries for anything else (llama2.c's).
void check_gguf_name(const std::string& path) {
  std::string lower = path;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (!lower.ends_with(".gguf")) return;
  char magic[4] = {};
  std::ifstream(path, std::ios::binary).read(magic, sizeof magic);
  if (std::string_view(magic, sizeof magic) != "GGUF") GgufFile::read_header(path);  // throws its message
}

class SpeculaEngine final : public EnginePort {
 public:
  LoadedModels load(const ModelPaths& paths, const std::function<bool(double)>& progress) override {
    std::string note;
    std::unique_ptr<Backend> backend = create_backend(paths.device, &note);
    const double target_share = paths.draft.empty() ? 1.0 : 0.8;  // the draft is the small one
    // reading and preparing the weights take the bar to 90 %, measuring what a forward costs
    // the rest (seconds for a large model, when no cost file holds it yet)
    constexpr double kWeightsShare = 0.9;
    const auto weights_progress = [&](double f) { return progress(kWeightsShare * f); };
    // a GPU backend spends half of each model's share copying its weights to the device
    const double read_share = backend->uploads_weights() ? 0.5 : 1.0;
    const auto read = [&](const std::string& path, double from, double share) {
      check_gguf_name(path);
      LoadOptions options;
      options.tokenizer_path = paths.tokenizer;
      options.progress = [&](double f) { return weights_progress(from + f * share * read_share); };
      return load_model(path, options);
    };
    const auto upload = [&](const Model& model, double from, double share) {
      backend->prepare(model, [&](double f) { return weights_progress(from + share * (read_share + f * (1.0 - read_share))); });
    };
    std::shared_ptr<const Model> target = read(paths.target, 0.0, target_share);
    if (!target->tokenizer)
      throw ModelError(paths.target + " has no vocabulary: choose its tokenizer file too");
    upload(*target, 0.0, target_share);
    std::shared_ptr<const Model> draft;
    if (!paths.draft.empty()) {
      draft = read(paths.draft, target_share, 1.0 - target_share);
      upload(*draft, target_share, 1.0 - target_share);
    }
    // the goodput policy's cost model: measured now (or read from the cost cache) rather
    // than at the first generation
    const auto cost_progress = [&](double from, double share) {
      return [&progress, from, share](double f) { progress(kWeightsShare + (1.0 - kWeightsShare) * (from + share * f)); };
    };
    backend->forward_cost(*target, cost_progress(0.0, target_share));
    if (draft) backend->forward_cost(*draft, cost_progress(target_share, 1.0 - target_share));
    std::string summary = describe(*target);
    if (draft) summary += "; draft " + describe(*draft);
    const bool fills_middle = target->tokenizer->fim().complete();
    generator_ = std::make_unique<LocalGenerator>(std::move(backend), std::move(target), std::move(draft));
    return {.summary = summary, .backend = generator_->describe(), .isolation = open_sandbox(), .fill_in_middle = fills_middle};
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

  TestResult test(const Problem& problem, const std::string& completion, double timeout_seconds) override {
    return runner().submit(ranking_program(problem, completion, true), timeout_seconds).get();
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
