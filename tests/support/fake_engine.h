// A small controlled engine for the GUI tests: it streams fixed completions at a fixed
// pace and gives fixed verdicts, so that a test can stop a run midway and predict the
// ranking. It stands in for the real engine only in tests that check the window itself.
//
// Candidate i streams kCompletions[i % 4] one character per step (so candidates 4 to 7
// repeat the texts of 0 to 3). Its "tests" pass when the completion adds (contains "a + b"),
// time out when it loops forever, and fail otherwise; its checks pass, and its behaviour
// probe is one call, add(2, 3), that gives 5 when it adds, -1 when it subtracts, and no
// result when it loops. Grouping, ranking and pass@k are the engine's real functions.
// A model file that goes on after the magic with kFimMarker has FIM tokens; a suffix given
// to any other is refused, as the real engine refuses it. One that contains kChatMarker
// carries kChatTemplate, a ChatML template as instruct models have.
#pragma once

#include <chrono>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine_port.h"

namespace specula::test {

class FakeEngine : public ui::EnginePort {
 public:
  static constexpr const char* kMagic = "FAKE-MODEL";
  static constexpr const char* kFimMarker = "+FIM";
  static constexpr const char* kChatMarker = "+CHAT";
  static constexpr const char* kChatTemplate =
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
  static constexpr const char* kCompletions[4] = {
      "    return a - b\n",                    // fails
      "    total = a + b\n    return total\n",  // passes, longer
      "    while True:\n        pass\n",        // times out
      "    return a + b\n",                    // passes, shortest: ranked best
  };

  // `step`: time per generated character; `load_step`: time per quarter of a model load.
  // `completions`: the texts candidate i streams, completions[i % size] (kCompletions when empty).
  explicit FakeEngine(std::chrono::milliseconds step = std::chrono::milliseconds(15),
                      std::chrono::milliseconds load_step = std::chrono::milliseconds(0),
                      std::vector<std::string> completions = {})
      : step_(step), load_step_(load_step), completions_(std::move(completions)) {
    if (completions_.empty()) completions_.assign(std::begin(kCompletions), std::end(kCompletions));
  }

  ui::LoadedModels load(const ui::ModelPaths& paths, const std::function<bool(double)>& progress) override {
    std::ifstream file(paths.target, std::ios::binary);
    if (!file) throw std::runtime_error(paths.target + ": cannot open the file");
    std::string magic(std::char_traits<char>::length(kMagic), '\0');
    file.read(magic.data(), std::streamsize(magic.size()));
    for (int i = 1; i <= 4; ++i) {
      std::this_thread::sleep_for(load_step_);
      if (progress && !progress(i / 4.0)) throw std::runtime_error("loading cancelled");
    }
    if (magic != kMagic) throw std::runtime_error(paths.target + ": not a model file (unknown magic)");
    if (paths.device == DeviceChoice::Cuda) throw std::runtime_error("CUDA requested but no GPU is usable");
    const std::string rest((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    fill_in_middle_ = rest.starts_with(kFimMarker);
    std::optional<ModelChatTemplate> chat;
    if (rest.find(kChatMarker) != std::string::npos) chat = ModelChatTemplate{.source = kChatTemplate};
    return {"fake model", "fake backend", "none (fake)", fill_in_middle_, chat};
  }

  // A server whose URL names the fake ("http://fake...") answers; any other is refused.
  ui::LoadedModels connect(const serve::RemoteOptions& server) override {
    probe(server);
    return {"fake model at " + server.url, "server " + server.url, "none (fake)"};
  }
  std::string probe(const serve::RemoteOptions& server) override {
    if (server.url.rfind("http://fake", 0) != 0) throw std::runtime_error("cannot connect to " + server.url);
    return server.url + " answers; it serves fake";
  }

  SessionResult generate(const GenerationRequest& request, const SessionCallbacks& callbacks,
                         const std::atomic<bool>* stop) override {
    if (request.prompt.empty()) throw std::invalid_argument("empty prompt");
    if (request.suffix && !fill_in_middle_) throw std::invalid_argument("the model has no fill-in-the-middle tokens");
    if (request.n_candidates > 8) throw std::invalid_argument("the fake engine runs at most 8 candidates");
    const auto start = std::chrono::steady_clock::now();
    SessionResult result;
    for (int i = 0; i < request.n_candidates; ++i) {
      Candidate c;
      c.index = i;
      result.candidates.push_back(c);
    }
    for (int step = 0;; ++step) {
      bool running = false;
      for (Candidate& c : result.candidates) {
        if (c.finish != FinishReason::Running) continue;
        const std::string& full = completions_[size_t(c.index) % completions_.size()];
        if (size_t(step) >= full.size() || step >= request.max_new_tokens) {
          c.finish = size_t(step) >= full.size() ? FinishReason::Eos : FinishReason::Length;
          c.seconds = seconds_since(start);
          if (callbacks.on_finished) callbacks.on_finished(c);
          continue;
        }
        running = true;
        c.text += full[size_t(step)];
        c.tokens.push_back(int(full[size_t(step)]));
        c.logprobs.push_back(-1.0f);
        c.proposed += 2;
        c.accepted += 1;
        if (callbacks.on_delta)
          callbacks.on_delta({c.index, std::string(1, full[size_t(step)]), int(c.tokens.size()), c.accepted, c.proposed});
      }
      if (!running) break;
      std::this_thread::sleep_for(step_);
      const bool stopped = stop && stop->load();
      const bool over_budget = request.budget_seconds > 0 && seconds_since(start) > request.budget_seconds;
      if (stopped || over_budget) {
        for (Candidate& c : result.candidates) {
          if (c.finish != FinishReason::Running) continue;
          c.finish = stopped ? FinishReason::Cancelled : FinishReason::Budget;
          c.seconds = seconds_since(start);
          if (callbacks.on_finished) callbacks.on_finished(c);
        }
        break;
      }
    }
    return result;
  }

  TestResult test(const CandidateTest& candidate, double) override {
    const std::string& completion = candidate.completion;
    TestResult result;
    result.verdict = completion.find("while True") != std::string::npos ? Verdict::Timeout
                     : completion.find("a + b") != std::string::npos    ? Verdict::Passed
                                                                        : Verdict::Failed;
    if (result.verdict == Verdict::Failed) result.detail = "AssertionError: add(2, 3) == 5";
    result.checks.failure = CheckFailure::None;
    const bool adds = result.verdict == Verdict::Passed;
    result.behaviour = {result.verdict == Verdict::Timeout
                            ? ProbeCall{"add(2, 3)", "timeout", "-", "no result within 0.25 s of CPU time", ""}
                            : ProbeCall{"add(2, 3)", "value", adds ? "5" : "-1", adds ? "5" : "-1", ""}};
    return result;
  }

  // Every candidate tested after generation; ranking and pass@k by the engine's own functions.
  ProblemEvaluation evaluate(const Problem& problem, const GenerationRequest& request,
                             const std::atomic<bool>* stop) override {
    const SessionResult session = generate(request, {}, stop);
    ProblemEvaluation evaluation;
    evaluation.task_id = problem.task_id;
    std::vector<RankEntry> entries;
    for (const Candidate& c : session.candidates) {
      EvaluatedCandidate e{c.index, c.text, 0.0, c.seconds, c.finish == FinishReason::Eos, {}};
      e.result = test({.problem = problem, .completion = c.text, .program = {}}, 0.0);
      entries.push_back({e.result, 0.0, c.seconds});
      evaluation.n += e.in_budget;
      evaluation.c += e.in_budget && e.result.verdict == Verdict::Passed;
      evaluation.candidates.push_back(e);
    }
    evaluation.ranking = rank_candidates(entries);
    evaluation.pass_all = evaluation.c > 0;
    evaluation.pass_first = !evaluation.candidates.empty() && evaluation.candidates.front().result.verdict == Verdict::Passed;
    if (evaluation.n > 0) evaluation.pass_at_k = pass_at_ks(evaluation.n, evaluation.c);
    return evaluation;
  }

 private:
  static double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  std::chrono::milliseconds step_;
  std::chrono::milliseconds load_step_;
  std::vector<std::string> completions_;
  bool fill_in_middle_ = false;  // the loaded model has FIM tokens; set by load() on the worker thread
};

}  // namespace specula::test
