// Test programs, the harness that runs them, verdicts and the worker pool.
#include "eval/test_runner.h"

#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

// engine/eval/harness.py, compiled in by CMake (eval/python_source.cpp.in).
extern const char specula_harness_py[];
extern const std::size_t specula_harness_py_size;

namespace specula {

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::Passed: return "passed";
    case Verdict::Failed: return "failed";
    case Verdict::Timeout: return "timeout";
    case Verdict::Crashed: return "crashed";
    case Verdict::Memory: return "memory";
    case Verdict::Error: return "error";
    case Verdict::Untested: return "untested";
    case Verdict::NotTested: return "not tested";
  }
  return "error";
}

const char* check_name(CheckFailure failure) {
  switch (failure) {
    case CheckFailure::None: return "passed";
    case CheckFailure::NotRun: return "not run";
    case CheckFailure::Syntax: return "syntax";
    case CheckFailure::Import: return "import";
    case CheckFailure::EntryPoint: return "entry point";
  }
  return "not run";
}

namespace {

int count_lines(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

bool defines_check(const std::string& test) {
  std::istringstream lines(test);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("def check(", 0) == 0) return true;
  return false;
}

// The last `n` non-empty lines of `text`.
std::string last_lines(const std::string& text, int n) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  std::string out;
  for (std::size_t i = lines.size() > static_cast<std::size_t>(n) ? lines.size() - n : 0; i < lines.size(); ++i)
    out += lines[i] + (i + 1 < lines.size() ? "\n" : "");
  return out;
}

}  // namespace

const std::string& test_harness_source() {
  static const std::string source(specula_harness_py, specula_harness_py_size);
  return source;
}

// CPU-time limits of the harness's own calls (ITIMER_PROF, so load on the machine does
// not cut a call short); the run's wall-clock limit still bounds them all.
constexpr double kProbeCallSeconds = 0.25;  // one call of the behaviour probe
constexpr double kProbeSeconds = 2.0;       // every call of the probe together
constexpr double kExampleSeconds = 2.0;     // one docstring example
constexpr int kProbeInputs = 16;            // inputs the probe derives at most

std::string probe_options_json(const TestProgram& program) {
  return nlohmann::json{{"entry_point", program.entry_point},
                        {"prompt_lines", program.prompt_lines},
                        {"examples", program.run_examples},
                        {"behaviour", program.probe_behaviour},
                        {"call_seconds", kProbeCallSeconds},
                        {"probe_seconds", kProbeSeconds},
                        {"example_seconds", kExampleSeconds},
                        {"max_inputs", kProbeInputs}}
      .dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

TestProgram make_test_program(const std::string& code_prefix, const std::string& completion,
                              const std::string& code_suffix, const std::string& test,
                              const std::string& entry_point) {
  TestProgram program;
  program.source = code_prefix + completion + code_suffix + "\n";
  program.test_first_line = count_lines(program.source) + 1;
  program.source += test + "\n";
  if (!entry_point.empty() && defines_check(test)) program.source += "check(" + entry_point + ")";
  program.entry_point = entry_point;
  // A prompt that ends mid-line shares its last line with the completion.
  program.prompt_lines = count_lines(code_prefix) + (!code_prefix.empty() && code_prefix.back() != '\n');
  return program;
}

namespace {

// What the harness reported through fd 3 (see harness.py), read line by line. A line that
// does not read (a forged or cut report) is left out.
struct Reports {
  bool started = false, done = false, memory = false;
  bool whole = false;          // the program ran as one piece: no import or entry check
  bool tests_none = false;     // the program had no tests
  int failures = 0;            // failed asserts and examples, from "done F"
  std::string exited;          // the SystemExit code, when the program exited
  std::string syntax, import, entry;  // "ok", or the reason of a failure; "" when not reported
};

// The JSON string that ends a report line; "" when it is not one.
std::string json_text(std::istream& words) {
  std::string rest;
  std::getline(words, rest);
  try {
    const nlohmann::json value = nlohmann::json::parse(rest);
    return value.is_string() ? value.get<std::string>() : "";
  } catch (const nlohmann::json::exception&) {
    return "";
  }
}

ProbeCall* call_at(std::vector<ProbeCall>& calls, int index) {
  if (index < 0 || index >= static_cast<int>(calls.size())) return nullptr;
  return &calls[static_cast<std::size_t>(index)];
}

Reports read_reports(const std::string& channel, TestResult& result) {
  Reports r;
  std::istringstream lines(channel);
  constexpr int kMaxInputs = 1024;  // more than the harness ever derives: a forged count
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string what, word;
    int index = -1;
    words >> what;
    if (what == "start") r.started = true;
    else if (what == "whole") r.whole = true;
    else if (what == "check") {
      words >> what >> word;
      const std::string outcome = word == "ok" ? "ok" : json_text(words);
      if (what == "syntax") r.syntax = outcome;
      else if (what == "import") r.import = outcome;
      else if (what == "entry") r.entry = outcome;
    } else if (what == "inputs") {
      words >> index;
      if (index >= 0 && index <= kMaxInputs) result.behaviour.assign(static_cast<std::size_t>(index), {});
    } else if (what == "input") {
      words >> index;
      if (ProbeCall* call = call_at(result.behaviour, index)) call->input = json_text(words);
    } else if (what == "output") {
      words >> index;
      if (ProbeCall* call = call_at(result.behaviour, index)) {
        words >> call->outcome >> call->key;
        call->shown = json_text(words);
      }
    } else if (what == "printed") {
      words >> index;
      if (ProbeCall* call = call_at(result.behaviour, index)) call->printed = json_text(words);
    } else if (what == "examples") words >> result.examples_total;
    else if (what == "example") {
      words >> index >> word;
      if (word == "ok") ++result.examples_passed;
      else result.failed_examples.push_back(json_text(words));
    } else if (what == "asserts") words >> result.asserts_total;
    else if (what == "assert") {
      words >> index >> word;
      if (word == "ok") ++result.asserts_passed;
    } else if (what == "tests") r.tests_none = true;
    else if (what == "memory") r.memory = true;
    else if (what == "exit") r.exited = line.substr(5);
    else if (what == "done") {
      r.done = true;
      words >> r.failures;
    }
  }
  return r;
}

// The first check that failed, from the reports; an import that never reported back before
// the run was killed did not finish.
CandidateChecks checks_of(const Reports& r, const SandboxRun& run) {
  CandidateChecks checks;
  if (r.syntax.empty()) return checks;  // NotRun
  checks.failure = CheckFailure::None;
  if (r.syntax != "ok") {
    checks.failure = CheckFailure::Syntax;
    checks.reason = "does not parse: " + r.syntax;
  } else if (!r.import.empty() && r.import != "ok") {
    checks.failure = CheckFailure::Import;
    checks.reason = "importing it " + r.import;
  } else if (r.import.empty() && !r.whole && (run.timed_out || run.signal == SIGXCPU)) {
    std::ostringstream why;
    why << "importing it did not finish within " << run.seconds << " s";
    checks.failure = CheckFailure::Import;
    checks.reason = why.str();
  } else if (!r.entry.empty() && r.entry != "ok") {
    checks.failure = CheckFailure::EntryPoint;
    checks.reason = r.entry;
  }
  return checks;
}

}  // namespace

TestResult classify_run(const SandboxRun& run) {
  TestResult result;
  result.seconds = run.seconds;
  result.isolation = run.isolation;
  const Reports r = read_reports(run.channel, result);
  result.checks = checks_of(r, run);
  const bool memory = r.memory || run.err.find("MemoryError") != std::string::npos;
  const bool all_passed = r.done && run.exit_code == 0 && r.failures == 0;
  // 12 lines: the harness prints at most three failed asserts' tracebacks of four lines
  // each, so the first failure stays whole, with its line
  std::string traceback = last_lines(run.err, 12);
  for (auto it = result.failed_examples.rbegin(); it != result.failed_examples.rend(); ++it)
    traceback = "docstring example " + *it + (traceback.empty() ? "" : "\n" + traceback);

  if (!r.started && !run.timed_out) {
    result.verdict = Verdict::Error;
    result.detail = "the interpreter did not start: " + (traceback.empty() ? "no output" : traceback);
  } else if (run.timed_out) {
    result.verdict = Verdict::Timeout;
    std::ostringstream why;
    why << "no result within " << run.seconds << " s; the run was killed";
    result.detail = why.str();
  } else if (run.signal == SIGXCPU) {
    result.verdict = Verdict::Timeout;
    result.detail = "CPU time limit reached";
  } else if (memory && !all_passed) {
    result.verdict = Verdict::Memory;
    result.detail = traceback.empty() ? "memory limit reached" : traceback;
  } else if (run.output_limited) {
    result.verdict = Verdict::Failed;
    result.detail = "output limit exceeded; the run was killed";
  } else if (run.signal != 0) {
    result.verdict = Verdict::Crashed;
    result.detail = std::string("killed by signal ") + std::to_string(run.signal) + " (" +
                    strsignal(run.signal) + ")";
  } else if (all_passed && r.tests_none && result.examples_total == 0) {
    // Nothing was tested: the checks alone decide.
    result.verdict = result.checks.passed() ? Verdict::Untested : Verdict::Failed;
    result.detail = result.checks.passed() ? "nothing to test; the checks passed" : result.checks.reason;
  } else if (all_passed) {
    result.verdict = Verdict::Passed;
  } else {
    result.verdict = Verdict::Failed;
    if (!r.done && !r.exited.empty())
      result.detail = "the program exited (code " + r.exited + ") before its tests completed";
    else if (!r.done && traceback.empty())
      result.detail = "the program ended (status " + std::to_string(run.exit_code) + ") before its tests completed";
    else
      result.detail = traceback.empty() ? "tests failed" : traceback;
  }
  return result;
}

TestRunner::TestRunner(const Sandbox& sandbox, SandboxLimits limits, int jobs, SandboxMode mode)
    : sandbox_(sandbox), limits_(limits), mode_(mode) {
  if (jobs <= 0) jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  jobs = std::min(jobs, 64);  // the sandbox runs at most 64 at once
  for (int i = 0; i < jobs; ++i) workers_.emplace_back([this] { work(); });
}

TestRunner::~TestRunner() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

TestResult run_until(TestClock::time_point deadline, double limit_seconds,
                     const std::function<TestResult(double wall_seconds)>& run) {
  const double left = std::chrono::duration<double>(deadline - TestClock::now()).count();
  TestResult result;
  if (left <= 0.0) {
    result.verdict = Verdict::NotTested;
    result.detail = "not tested: the budget ran out before its test began";
    return result;
  }
  const bool cut_by_budget = left < limit_seconds;
  result = run(cut_by_budget ? left : limit_seconds);
  if (cut_by_budget && result.verdict == Verdict::Timeout) {
    result.verdict = Verdict::NotTested;
    result.detail = "not tested: the budget ran out during its test";
  }
  return result;
}

std::future<TestResult> TestRunner::submit(TestProgram program, double wall_seconds,
                                           std::function<void(const TestResult&)> on_done,
                                           std::optional<TestClock::time_point> deadline) {
  std::lock_guard lock(mutex_);
  queue_.push_back(Job{std::move(program), wall_seconds, std::move(on_done), deadline, {}});
  std::future<TestResult> future = queue_.back().result.get_future();
  wake_.notify_one();
  return future;
}


std::vector<TestResult> TestRunner::run_all(const std::vector<TestProgram>& programs) {
  std::vector<std::future<TestResult>> futures;
  for (const TestProgram& program : programs) futures.push_back(submit(program));
  std::vector<TestResult> results;
  for (auto& future : futures) results.push_back(future.get());
  return results;
}

TestResult TestRunner::run(const TestProgram& program, double wall_seconds) const {
  SandboxLimits limits = limits_;
  if (wall_seconds > 0.0) {
    limits.wall_seconds = wall_seconds;
    limits.cpu_seconds = 0;
  }
  try {
    return classify_run(run_program({{"main.py", test_harness_source()},
                                     {"program.py", program.source},
                                     {"probe.json", probe_options_json(program)}},
                                    {std::to_string(program.test_first_line)}, limits));
  } catch (const std::exception& e) {
    TestResult result;
    result.verdict = Verdict::Error;
    result.detail = e.what();
    result.isolation = sandbox_.isolation();
    return result;
  }
}

SandboxRun TestRunner::run_program(const std::vector<SandboxFile>& files, const std::vector<std::string>& args,
                                   const SandboxLimits& limits) const {
  if (mode_ == SandboxMode::Cold) return sandbox_.run(files, "main.py", args, limits);
  // A warm process no other run holds, given back afterwards (also when the run throws).
  std::unique_ptr<WarmSandbox> warm;
  {
    std::lock_guard lock(warm_mutex_);
    if (!idle_warm_.empty()) {
      warm = std::move(idle_warm_.back());
      idle_warm_.pop_back();
    }
  }
  if (!warm) warm = std::make_unique<WarmSandbox>(sandbox_, SandboxFile{"main.py", test_harness_source()});
  struct GiveBack {
    const TestRunner& runner;
    std::unique_ptr<WarmSandbox>& warm;
    ~GiveBack() {
      std::lock_guard lock(runner.warm_mutex_);
      runner.idle_warm_.push_back(std::move(warm));
    }
  } give_back{*this, warm};
  return warm->run(files, "main.py", args, limits);
}

void TestRunner::warm_up() {
  if (mode_ == SandboxMode::Cold || sandbox_.isolation() != Isolation::Full) return;
  // Each worker starts one: a run's processes die with the thread that started them
  // (PR_SET_PDEATHSIG), and the workers live as long as the runner.
  std::unique_lock lock(mutex_);
  ++warm_round_;
  warming_ = static_cast<int>(workers_.size());
  wake_.notify_all();
  warmed_.wait(lock, [this] { return warming_ == 0; });
}

// A new warm process, started on this worker's thread, unless the runner has one per worker
// already (idle, or being started by another worker).
void TestRunner::warm_one() const {
  {
    std::lock_guard lock(warm_mutex_);
    if (idle_warm_.size() + warm_starting_ >= workers_.size()) return;
    ++warm_starting_;
  }
  auto warm = std::make_unique<WarmSandbox>(sandbox_, SandboxFile{"main.py", test_harness_source()});
  warm->prepare(limits_);
  std::lock_guard lock(warm_mutex_);
  idle_warm_.push_back(std::move(warm));
  --warm_starting_;
}

int TestRunner::warm_starts() const {
  std::lock_guard lock(warm_mutex_);
  int n = 0;
  for (const auto& warm : idle_warm_) n += warm->starts();
  return n;
}

int TestRunner::cold_fallbacks() const {
  std::lock_guard lock(warm_mutex_);
  int n = 0;
  for (const auto& warm : idle_warm_) n += warm->cold_fallbacks();
  return n;
}

std::string TestRunner::warm_note() const {
  if (mode_ == SandboxMode::Warm && sandbox_.isolation() != Isolation::Full)
    return "warm runs need full isolation; runs are cold";
  std::lock_guard lock(warm_mutex_);
  for (const auto& warm : idle_warm_)
    if (!warm->note().empty()) return warm->note() + "; runs are cold";
  return "";
}

void TestRunner::work() {
  int round = 0;  // the last warm_up round this worker took part in
  while (true) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return closing_ || !queue_.empty() || round != warm_round_; });
      if (round != warm_round_) {
        round = warm_round_;
        lock.unlock();
        warm_one();
        lock.lock();
        if (--warming_ == 0) warmed_.notify_all();
        continue;
      }
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    const double limit = job.wall_seconds > 0.0 ? job.wall_seconds : limits_.wall_seconds;
    TestResult result = job.deadline ? run_until(*job.deadline, limit,
                                                 [&](double wall) {  // uncut: the job's own limits
                                                   return run(job.program, wall == limit ? job.wall_seconds : wall);
                                                 })
                                     : run(job.program, job.wall_seconds);
    if (job.on_done) job.on_done(result);
    job.result.set_value(std::move(result));
  }
}

}  // namespace specula
