// The narrow surface through which the engine worker drives an engine: load models or connect
// to a server, run a generation session, test one candidate, evaluate a problem within its budget.
//
// The application uses the real engine (engine_adapter.cpp); the GUI tests substitute a
// small controlled engine so that timing and verdicts are predictable. Everything here is
// called on the worker thread only, except test(), which may run on a pool thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compute/backend.h"
#include "eval/evaluation.h"
#include "eval/problems.h"
#include "decode/session.h"
#include "eval/test_runner.h"
#include "model/model_chat.h"
#include "serve/remote_generator.h"

namespace specula::ui {

struct ModelPaths {
  std::string target;     // GGUF, llama2.c checkpoint or Hugging Face directory
  std::string tokenizer;  // for checkpoints without a vocabulary; may be empty
  std::string draft;      // draft model for the "model" drafter; may be empty
  DeviceChoice device = DeviceChoice::Auto;
};

struct LoadedModels {
  std::string summary;    // one line naming the model(s): "stories260K (llama, 5 layers, dim 64)"
  std::string backend;    // Backend::name()
  std::string isolation;  // how candidate tests are confined: "bubblewrap sandbox", ...
  bool fill_in_middle = false;  // the target's vocabulary has FIM tokens (prefix, suffix, middle):
                                // a GenerationRequest may carry a suffix
  std::optional<ModelChatTemplate> chat_template;  // the target's chat template, for the chat
                                                   // prompt style; none for a server (prompted raw)
};

class EnginePort {
 public:
  virtual ~EnginePort() = default;

  // Loads the models and creates the backend. `progress` gets a fraction in [0, 1] and
  // returns false to cancel. Throws std::exception with a readable message on failure.
  virtual LoadedModels load(const ModelPaths& paths, const std::function<bool(double)>& progress) = 0;

  // Generates on an OpenAI-compatible server from now on, once probe() says it answers;
  // candidates are still tested here. Throws std::exception with a readable message.
  virtual LoadedModels connect(const serve::RemoteOptions& server) = 0;

  // The connection test: what `server` answers (its model), without switching to it.
  // Throws std::exception with a readable message.
  virtual std::string probe(const serve::RemoteOptions& server) = 0;

  // Runs one session with the loaded models or on the server (run_session's contract, draft model filled in).
  virtual SessionResult generate(const GenerationRequest& request, const SessionCallbacks& callbacks,
                                 const std::atomic<bool>* stop) = 0;

  // Runs candidate.program (the evaluation's choice: the problem's tests with the checks, the
  // docstring's examples and the behaviour probe, for the window's runs) in the sandbox
  // within `timeout_seconds` (0: the sandbox's own limit). Thread-safe: evaluate_problem's
  // test threads call it.
  virtual TestResult test(const CandidateTest& candidate, double timeout_seconds) = 0;

  // Generates request.n_candidates completions of `problem` and tests each as it finishes,
  // all within request.budget_seconds (evaluate_problem's contract); `stop` ends it early.
  virtual ProblemEvaluation evaluate(const Problem& problem, const GenerationRequest& request,
                                     const std::atomic<bool>* stop) = 0;
};

// The real engine: load_model, create_backend, a Generator (local or remote) and the sandboxed test runner.
std::unique_ptr<EnginePort> make_engine();

}  // namespace specula::ui
