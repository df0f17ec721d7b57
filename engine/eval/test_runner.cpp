// Test programs, the harness that runs them, verdicts and the worker pool.
#include "eval/test_runner.h"

#include <csignal>
#include <cstring>
#include <sstream>

namespace specula {

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::Passed: return "passed";
    case Verdict::Failed: return "failed";
    case Verdict::Timeout: return "timeout";
    case Verdict::Crashed: return "crashed";
    case Verdict::Memory: return "memory";
    case Verdict::Error: return "error";
  }
  return "error";
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

// Runs program.py, counting the tests' top-level asserts (module level and directly in the
// body of check()) one by one through fd 3. "done" is written only after the program
// returned: an early exit, of any kind, leaves it out. os._exit keeps the program's own
// atexit handlers and lingering threads from changing the outcome.
const char* const kHarness = R"PY(import ast, os, sys, traceback

CHANNEL = 3
failures = 0
shown = 0


def report(line):
    try:
        os.write(CHANNEL, (line + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def show(error):
    try:
        traceback.print_exception(type(error), error, error.__traceback__)
    except Exception:
        pass


def record(index, error):
    global failures, shown
    if error is None:
        report("assert %d ok" % index)
        return
    failures += 1
    report("assert %d fail" % index)
    if isinstance(error, MemoryError):
        report("memory")
    if shown < 3:
        shown += 1
        show(error)


def counted(statement, index):
    def call(argument):
        return ast.Expr(ast.Call(ast.Name("__specula_assert__", ast.Load()),
                                 [ast.Constant(index), argument], []))
    handler = ast.ExceptHandler(ast.Name("Exception", ast.Load()), "__specula_error__",
                                [call(ast.Name("__specula_error__", ast.Load()))])
    node = ast.Try([statement], [handler], [call(ast.Constant(None))], [])
    return ast.copy_location(node, statement)


def instrument(tree, first_line):
    count = 0

    def rewrite(body):
        nonlocal count
        out = []
        for statement in body:
            if isinstance(statement, ast.Assert) and statement.lineno >= first_line:
                out.append(counted(statement, count))
                count += 1
            else:
                out.append(statement)
        return out

    tree.body = rewrite(tree.body)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check" and node.lineno >= first_line:
            node.body = rewrite(node.body)
    return count


def finish(status):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(status)


def main():
    first_line = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    report("start")
    with open("program.py", encoding="utf-8", errors="replace") as f:
        source = f.read()
    try:
        tree = ast.parse(source, "program.py")
    except (SyntaxError, ValueError) as error:
        traceback.print_exception(type(error), error, None)
        finish(1)
    report("asserts %d" % instrument(tree, first_line))
    code = compile(ast.fix_missing_locations(tree), "program.py", "exec")
    namespace = {"__name__": "__main__", "__builtins__": __builtins__, "__specula_assert__": record}
    sys.argv = ["program.py"]
    try:
        exec(code, namespace)
    except MemoryError as error:
        report("memory")
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        finish(1)
    except SystemExit as error:
        report("exit %r" % (error.code,))
        finish(error.code if isinstance(error.code, int) else 1)
    except BaseException as error:
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        finish(1)
    report("done %d" % failures)
    finish(1 if failures else 0)


main()
)PY";

}  // namespace

const std::string& test_harness_source() {
  static const std::string source = kHarness;
  return source;
}

TestProgram make_test_program(const std::string& code_prefix, const std::string& completion,
                              const std::string& test, const std::string& entry_point) {
  TestProgram program;
  program.source = code_prefix + completion + "\n";
  program.test_first_line = count_lines(program.source) + 1;
  program.source += test + "\n";
  if (!entry_point.empty() && defines_check(test)) program.source += "check(" + entry_point + ")";
  return program;
}

TestResult classify_run(const SandboxRun& run) {
  TestResult result;
  result.seconds = run.seconds;
  result.isolation = run.isolation;
  bool started = false, done = false, memory = false;
  int failures = 0;
  std::string exited;
  std::istringstream channel(run.channel);
  for (std::string line; std::getline(channel, line);) {
    std::istringstream words(line);
    std::string what;
    words >> what;
    if (what == "start") started = true;
    else if (what == "asserts") words >> result.asserts_total;
    else if (what == "assert") {
      int index = 0;
      std::string outcome;
      words >> index >> outcome;
      if (outcome == "ok") ++result.asserts_passed;
    } else if (what == "memory") memory = true;
    else if (what == "exit") exited = line.substr(5);
    else if (what == "done") {
      done = true;
      words >> failures;
    }
  }
  if (run.err.find("MemoryError") != std::string::npos) memory = true;
  const std::string traceback = last_lines(run.err, 6);

  if (!started && !run.timed_out) {
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
  } else if (memory && !(done && run.exit_code == 0 && failures == 0)) {
    result.verdict = Verdict::Memory;
    result.detail = traceback.empty() ? "memory limit reached" : traceback;
  } else if (run.output_limited) {
    result.verdict = Verdict::Failed;
    result.detail = "output limit exceeded; the run was killed";
  } else if (run.signal != 0) {
    result.verdict = Verdict::Crashed;
    result.detail = std::string("killed by signal ") + std::to_string(run.signal) + " (" +
                    strsignal(run.signal) + ")";
  } else if (done && run.exit_code == 0 && failures == 0) {
    result.verdict = Verdict::Passed;
  } else {
    result.verdict = Verdict::Failed;
    if (!done && !exited.empty())
      result.detail = "the program exited (code " + exited + ") before its tests completed";
    else if (!done && traceback.empty())
      result.detail = "the program ended (status " + std::to_string(run.exit_code) + ") before its tests completed";
    else
      result.detail = traceback.empty() ? "tests failed" : traceback;
  }
  return result;
}

TestRunner::TestRunner(const Sandbox& sandbox, SandboxLimits limits, int jobs)
    : sandbox_(sandbox), limits_(limits) {
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

std::future<TestResult> TestRunner::submit(TestProgram program, double wall_seconds,
                                           std::function<void(const TestResult&)> on_done) {
  std::lock_guard lock(mutex_);
  queue_.push_back(Job{std::move(program), wall_seconds, std::move(on_done), {}});
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
    const SandboxRun run = sandbox_.run({{"main.py", test_harness_source()}, {"program.py", program.source}},
                                        "main.py", {std::to_string(program.test_first_line)}, limits);
    return classify_run(run);
  } catch (const std::exception& e) {
    TestResult result;
    result.verdict = Verdict::Error;
    result.detail = e.what();
    result.isolation = sandbox_.isolation();
    return result;
  }
}

void TestRunner::work() {
  while (true) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    TestResult result = run(job.program, job.wall_seconds);
    if (job.on_done) job.on_done(result);
    job.result.set_value(std::move(result));
  }
}

}  // namespace specula
