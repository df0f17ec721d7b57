// Running a candidate's unit tests in the sandbox and turning the run into a verdict.
//
// The program is HumanEval's: code prefix + completion + "\n" + test + "\n" +
// "check(entry_point)". A small harness (Python, run first inside the sandbox) executes it,
// counts each top-level assert of the tests separately so that partial passes can rank, and
// writes a completion mark after the program returns: a program that exits early (e.g.
// sys.exit(0) before the asserts) never passes. A worker pool runs programs concurrently.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "eval/sandbox.h"

namespace specula {

enum class Verdict { Passed, Failed, Timeout, Crashed, Memory, Error };
const char* verdict_name(Verdict verdict);  // "passed", "failed", "timeout", ...

// The source to run and where its tests begin (asserts before that line are the
// completion's own and are not counted).
struct TestProgram {
  std::string source;
  int test_first_line = 1;  // 1-based line of `source` where the tests start
};

// HumanEval's program: code_prefix + completion + "\n" + test + "\n" + "check(entry)",
// the last part only when the tests define check() and an entry point is known.
TestProgram make_test_program(const std::string& code_prefix, const std::string& completion,
                              const std::string& test, const std::string& entry_point);

struct TestResult {
  Verdict verdict = Verdict::Error;
  std::string detail;        // failed: last traceback lines; others: what happened
  int asserts_passed = 0;    // of the tests' top-level asserts that ran
  int asserts_total = 0;     // top-level asserts in the tests (0: not a list of asserts)
  double seconds = 0.0;      // wall time of the run
  Isolation isolation = Isolation::Full;
};

// Classifies a finished sandbox run of the harness.
TestResult classify_run(const SandboxRun& run);

// The harness source (main.py in the work directory).
const std::string& test_harness_source();

class TestRunner {
 public:
  // jobs <= 0: one worker per hardware thread. The sandbox must outlive the runner.
  TestRunner(const Sandbox& sandbox, SandboxLimits limits, int jobs = 0);
  ~TestRunner();
  TestRunner(const TestRunner&) = delete;
  TestRunner& operator=(const TestRunner&) = delete;

  int jobs() const { return static_cast<int>(workers_.size()); }
  const SandboxLimits& limits() const { return limits_; }

  // Queues a program; wall_seconds > 0 overrides the limit for this run only. `on_done`
  // (optional) is called on the worker thread with the result before the future is ready.
  std::future<TestResult> submit(TestProgram program, double wall_seconds = 0.0,
                                 std::function<void(const TestResult&)> on_done = {});
  // Runs one program on the calling thread.
  TestResult run(const TestProgram& program, double wall_seconds = 0.0) const;
  // Runs all, concurrently, results in input order.
  std::vector<TestResult> run_all(const std::vector<TestProgram>& programs);

 private:
  struct Job {
    TestProgram program;
    double wall_seconds;
    std::function<void(const TestResult&)> on_done;
    std::promise<TestResult> result;
  };
  void work();

  const Sandbox& sandbox_;
  SandboxLimits limits_;
  std::vector<std::thread> workers_;
  std::deque<Job> queue_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool closing_ = false;
};

}  // namespace specula
