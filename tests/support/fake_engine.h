// A small controlled engine for the GUI tests: it streams fixed completions at a fixed
// pace and gives fixed verdicts, so that a test can stop a run midway and predict the
// ranking. It stands in for the real engine only in tests that check the window itself.
//
// Candidate i streams kCompletions[i % 4] one character per step. Its "tests" pass when
// the completion adds (contains "a + b"), time out when it loops forever, and fail otherwise.
#pragma once

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "engine_port.h"

namespace specula::test {

class FakeEngine : public ui::EnginePort {
 public:
  static constexpr const char* kMagic = "FAKE-MODEL";
  static constexpr const char* kCompletions[4] = {
      "    return a - b\n",                    // fails
      "    total = a + b\n    return total\n",  // passes, longer
      "    while True:\n        pass\n",        // times out
      "    return a + b\n",                    // passes, shortest: ranked best
  };

  explicit FakeEngine(std::chrono::milliseconds step = std::chrono::milliseconds(15)) : step_(step) {}

  ui::LoadedModels load(const ui::ModelPaths& paths, const std::function<bool(double)>& progress) override {
    std::ifstream file(paths.target, std::ios::binary);
    if (!file) throw std::runtime_error(paths.target + ": cannot open the file");
    std::string magic(std::char_traits<char>::length(kMagic), '\0');
    file.read(magic.data(), std::streamsize(magic.size()));
    for (int i = 1; i <= 4; ++i)
      if (progress && !progress(i / 4.0)) throw std::runtime_error("loading cancelled");
    if (magic != kMagic) throw std::runtime_error(paths.target + ": not a model file (unknown magic)");
    if (paths.device == DeviceChoice::Cuda) throw std::runtime_error("CUDA requested but no GPU is usable");
    return {"fake model", "fake backend", "none (fake)"};
  }

  SessionResult generate(const GenerationRequest& request, const SessionCallbacks& callbacks,
                         const std::atomic<bool>* stop) override {
    if (request.prompt.empty()) throw std::invalid_argument("empty prompt");
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
        const std::string full = kCompletions[c.index % 4];
        if (size_t(step) >= full.size() || step >= request.max_new_tokens) {
          c.finish = size_t(step) >= full.size() ? FinishReason::Eos : FinishReason::Length;
          c.seconds = seconds_since(start);
          if (callbacks.on_finished) callbacks.on_finished(c);
          continue;
        }
        running = true;
        c.text += full[size_t(step)];
        c.tokens.push_back(int(full[size_t(step)]));
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

  ui::TestOutcome test(const std::string&, const std::string& completion, const std::string&, double) override {
    if (completion.find("while True") != std::string::npos) return {ui::Verdict::Timeout, "timed out", 0.0};
    if (completion.find("a + b") != std::string::npos) return {ui::Verdict::Passed, "", 0.0};
    return {ui::Verdict::Failed, "AssertionError: add(2, 3) == 5", 0.0};
  }

  std::vector<int> rank(const std::vector<Candidate>& candidates, const std::vector<ui::TestOutcome>& outcomes) override {
    std::vector<int> order;
    for (const Candidate& c : candidates) order.push_back(c.index);
    auto passed = [&](int i) { return !outcomes.empty() && outcomes[size_t(i)].verdict == ui::Verdict::Passed; };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      if (passed(a) != passed(b)) return passed(a);
      return candidates[size_t(a)].tokens.size() < candidates[size_t(b)].tokens.size();
    });
    return order;
  }

 private:
  static double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  std::chrono::milliseconds step_;
};

}  // namespace specula::test
