// Running a candidate's unit tests in the sandbox and turning the run into a verdict.
//
// The program is HumanEval's: code prefix + completion (+ the code after the hole, for
// fill in the middle) + "\n" + test + "\n" + "check(entry_point)". A harness (Python,
// engine/eval/harness.py, run first inside the sandbox) checks the candidate's own lines (they parse and compile, running them neither
// raises nor exits, the prompt's function exists), on request calls that function on
// inputs derived from the prompt and runs the docstring's examples, then runs the tests,
// counting each top-level assert separately so that partial passes can rank, and writes a
// completion mark after the program returns: a program that exits early (e.g. sys.exit(0)
// before the asserts) never passes. A worker pool runs programs concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "eval/sandbox.h"
#include "eval/warm_sandbox.h"

namespace specula {

// Untested: there was nothing to test (no tests, no docstring examples) and the checks passed.
// NotTested: the budget ended before the candidate's test did (it never began, or was cut):
// the budget's verdict, not the candidate's; it ranks as a failure that passed nothing.
enum class Verdict { Passed, Failed, Timeout, Crashed, Memory, Error, Untested, NotTested };
const char* verdict_name(Verdict verdict);  // "passed", "failed", "timeout", ..., "untested", "not tested"

// The source to run, where its tests begin (asserts before that line are the completion's
// own and are not counted), and what to do besides the tests.
struct TestProgram {
  std::string source;
  int test_first_line = 1;       // 1-based line of `source` where the tests start
  std::string entry_point;       // the function the prompt defines; "" when unknown (not checked)
  int prompt_lines = 0;          // the first lines of `source` that are the prompt: its function's
                                 // docstring and signature are read there
  bool run_examples = false;     // the docstring's >>> examples run as tests too
  bool probe_behaviour = false;  // the function is called on inputs derived from the prompt
};

// HumanEval's program: code_prefix + completion + code_suffix + "\n" + test + "\n" +
// "check(entry)", the last part only when the tests define check() and an entry point is
// known. `code_suffix` is the code after the hole of a fill-in-the-middle problem (empty
// otherwise), placed as HumanEval infilling's harness places it.
// `test` may be empty: then the run checks the candidate (and does what the flags ask) only.
TestProgram make_test_program(const std::string& code_prefix, const std::string& completion,
                              const std::string& code_suffix, const std::string& test,
                              const std::string& entry_point);

// The checks that need no tests, in the order the harness makes them.
enum class CheckFailure {
  None,        // every check made passed
  NotRun,      // no run reported on the checks (not tested, or the harness did not start)
  Syntax,      // the prompt and completion do not parse or compile on their own
  Import,      // running them as a module raises, exits or does not finish
  EntryPoint,  // they define no function of the name the prompt gives
};
const char* check_name(CheckFailure failure);  // "passed", "not run", "syntax", "import", "entry point"

struct CandidateChecks {
  CheckFailure failure = CheckFailure::NotRun;
  std::string reason;  // for a failure, e.g. "does not parse: SyntaxError: invalid syntax (line 3)"
  bool passed() const { return failure == CheckFailure::None; }
};

// One call of the behaviour probe: the prompt's function on one derived input.
struct ProbeCall {
  std::string input;    // the call as Python, e.g. "add(2, 3)"
  std::string outcome;  // "value", "none", "raise", "timeout" (its CPU time ran out), "skipped"
                        // (the probe's time ran out); "" when the run ended before the call
  std::string key;      // equal for outcomes tests would find equal: a hash of the value's
                        // canonical text, the exception's type name, "-" otherwise
  std::string shown;    // the outcome for people, at most 200 characters: "5", "raises TypeError: ..."
  std::string printed;  // what the call printed, at most 400 characters; "" when nothing
};

struct TestResult {
  Verdict verdict = Verdict::Error;
  std::string detail;        // failed: failed examples, last traceback lines; others: what happened
  int asserts_passed = 0;    // of the tests' top-level asserts that ran
  int asserts_total = 0;     // top-level asserts in the tests (0: not a list of asserts)
  int examples_passed = 0;   // of the docstring's examples that ran (TestProgram::run_examples)
  int examples_total = 0;    // the docstring's examples, skipped ones (doctest: +SKIP) left out
  std::vector<std::string> failed_examples;  // "add(2, 3): expected 5, got 6", one per failure
  CandidateChecks checks;
  std::vector<ProbeCall> behaviour;  // one per probe input (TestProgram::probe_behaviour); empty
                                     // when not asked, or the function could not be called
  double seconds = 0.0;      // wall time of the run
  Isolation isolation = Isolation::Full;
};

// Classifies a finished sandbox run of the harness.
TestResult classify_run(const SandboxRun& run);

// The harness source (main.py in the work directory), engine/eval/harness.py.
const std::string& test_harness_source();

// What the harness is asked besides the tests (probe.json in the work directory): the
// entry point, the prompt's lines, the flags, and the CPU-time limits of the probe.
std::string probe_options_json(const TestProgram& program);

using TestClock = std::chrono::steady_clock;

// A test that must end by `deadline` (the budget's end): `run` gets the seconds left, at
// most `limit_seconds`, or is not called when none are left. A run that never began, or that
// the deadline cut before its own limit would have, is NotTested with the checks it reported:
// the budget ended it, not the candidate.
TestResult run_until(TestClock::time_point deadline, double limit_seconds,
                     const std::function<TestResult(double wall_seconds)>& run);

// How TestRunner runs programs unless told: warm (about 15 times faster per program, and the
// sandbox suites pass in both modes, see docs/sandbox.md). Cold remains a choice.
inline constexpr SandboxMode kDefaultSandboxMode = SandboxMode::Warm;

class TestRunner {
 public:
  // jobs <= 0: one worker per hardware thread. The sandbox must outlive the runner. Warm:
  // every run at a time gets a warm process of its own (warm_sandbox.h), started on first
  // use and kept until the runner ends.
  TestRunner(const Sandbox& sandbox, SandboxLimits limits, int jobs = 0, SandboxMode mode = kDefaultSandboxMode);
  ~TestRunner();
  TestRunner(const TestRunner&) = delete;
  TestRunner& operator=(const TestRunner&) = delete;

  int jobs() const { return static_cast<int>(workers_.size()); }
  const SandboxLimits& limits() const { return limits_; }
  SandboxMode mode() const { return mode_; }
  // Warm processes started so far, and runs they handed to the cold path (see
  // warm_sandbox.h); both 0 in cold mode. Counted over the runs that have finished.
  int warm_starts() const;
  int cold_fallbacks() const;
  // Why warm runs went cold here ("" when none did for want of a warm process).
  std::string warm_note() const;

  // Warm: each worker starts a warm process now (concurrently), so that the first runs
  // within a budget do not pay for starting them; nothing in cold mode. Returns when they
  // have started or failed to (then runs go cold, and warm_note() says why).
  void warm_up();

  // Queues a program; wall_seconds > 0 overrides the limit for this run only. `on_done`
  // (optional) is called on the worker thread with the result before the future is ready.
  // A `deadline` (a budget's end) bounds the run as run_until says, however long it queued.
  std::future<TestResult> submit(TestProgram program, double wall_seconds = 0.0,
                                 std::function<void(const TestResult&)> on_done = {},
                                 std::optional<TestClock::time_point> deadline = {});
  // Runs one program on the calling thread.
  TestResult run(const TestProgram& program, double wall_seconds = 0.0) const;
  // Runs all, concurrently, results in input order.
  std::vector<TestResult> run_all(const std::vector<TestProgram>& programs);

 private:
  struct Job {
    TestProgram program;
    double wall_seconds;
    std::function<void(const TestResult&)> on_done;
    std::optional<TestClock::time_point> deadline;
    std::promise<TestResult> result;
  };
  void work();
  void warm_one() const;
  SandboxRun run_program(const std::vector<SandboxFile>& files, const std::vector<std::string>& args,
                         const SandboxLimits& limits) const;

  const Sandbox& sandbox_;
  SandboxLimits limits_;
  SandboxMode mode_;
  mutable std::mutex warm_mutex_;
  mutable std::vector<std::unique_ptr<WarmSandbox>> idle_warm_;  // warm processes no run holds
  mutable std::size_t warm_starting_ = 0;                         // being started by warm_up
  std::vector<std::thread> workers_;
  std::deque<Job> queue_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool closing_ = false;
  int warm_round_ = 0;  // warm_up calls so far: each worker takes part in each once
  int warming_ = 0;     // workers still starting their warm process for the current round
  std::condition_variable warmed_;
};

}  // namespace specula
