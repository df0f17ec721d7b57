// Ranking candidates (their tests, the checks that need no tests, agreement between
// candidates that behave alike, likelihood), the pass@k estimator, and the budgeted
// evaluation of one problem: candidates are tested the moment they finish, on the test
// runner's worker pool, while generation goes on; one wall-clock budget covers both.
// See docs/evaluation.md.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "eval/problems.h"
#include "eval/test_runner.h"

namespace specula {

// The unbiased estimator of the HumanEval paper: 1 - C(n-c, k) / C(n, k), computed as
// 1 - prod_{i=n-c+1..n} (1 - k/i), which never forms a large binomial.
// Throws std::invalid_argument unless 0 <= c <= n and 1 <= k <= n.
double pass_at_k(int n, int c, int k);

// The k of {1, 5, 10} that are <= n, with pass@k for each.
std::vector<std::pair<int, double>> pass_at_ks(int n, int c);

// Mean pass@k over tasks (n, c), for the k of {1, 5, 10} that every task has samples for.
std::vector<std::pair<int, double>> mean_pass_at_ks(const std::vector<std::pair<int, int>>& tasks);

struct RankEntry {
  TestResult result;
  double mean_logprob = 0.0;      // mean target log-probability of the candidate's tokens
  double finished_seconds = 0.0;  // when the candidate finished
  int agreement = 0;              // candidates that behave as this one does, itself included
                                  // (CandidateGroups::agreement); 0: its behaviour says nothing
};

// Which criteria a ranking uses; each rule adds one to those of the rule before it, and
// every rule ends with likelihood and finish time.
enum class RankRule {
  Likelihood,  // mean log-probability only
  Checks,      // the checks that need no tests first
  Tests,       // tests passed (the user's asserts and the docstring's examples) before the checks
  Agreement,   // then the size of the candidate's behaviour group: the full rule
};
const char* rank_rule_name(RankRule rule);  // "likelihood", "checks", "docstring", "agreement"
// The rule of a name rank_rule_name gives; throws std::invalid_argument for any other.
RankRule parse_rank_rule(const std::string& name);

// Whether `a` ranks strictly before `b` under `rule` (the full rule: every step):
// 1. passed first; then more asserts and docstring examples passed; failed, timeout,
//    crashed, memory, error and untested otherwise equal;
// 2. the checks passed before any failed (or never ran);
// 3. larger agreement first;
// 4. higher mean log-probability (NaN lowest); 5. earlier finish.
bool ranks_before(const RankEntry& a, const RankEntry& b, RankRule rule = RankRule::Agreement);

// Indices of `entries`, best first; a stable sort, so full ties keep their input order.
std::vector<int> rank_candidates(const std::vector<RankEntry>& entries, RankRule rule = RankRule::Agreement);

// Candidates that are the same text, or behave the same: the same verdict with as many
// asserts and docstring examples passed, and the same outcome (a value tests would find
// equal, or the same exception type) on every input of the behaviour probe.
struct CandidateGroups {
  std::vector<int> same_text;  // per candidate: the first candidate with the same text (ignoring
                               // trailing white space), itself when it is the first
  std::vector<int> group;      // per candidate: the first candidate of its behaviour group; identical
                               // texts always share one; a candidate that could not be compared
                               // is in a group of its identical texts only
  std::vector<int> agreement;  // per candidate: the RankEntry::agreement: its group's size; 0 when
                               // a check failed, or when no probe call returned anything but None
                               // (stubs, candidates that raise or loop on every input); the
                               // number of identical texts when it was not probed to the end
};

// `texts` and `results` are parallel: each candidate's completion and its test result.
CandidateGroups group_candidates(const std::vector<std::string>& texts, const std::vector<TestResult>& results);

// The run that ranks a candidate: the problem's tests when `with_tests`, the docstring's
// examples and the behaviour probe (the checks come with every run).
TestProgram ranking_program(const Problem& problem, const std::string& completion, bool with_tests);

// A candidate as generation hands it over.
struct GeneratedCandidate {
  int index = 0;                 // the candidate's number within the problem
  std::string completion;
  double mean_logprob = 0.0;
  bool complete = true;          // false: cut by the budget or a stop before it ended; kept and
                                 // ranked with the rest, never tested (the app shows every pane)
};

using CandidateSink = std::function<void(GeneratedCandidate)>;

// Generates candidates for `problem` within `budget_seconds` (0: none), calling `emit`
// (from any thread) as each one finishes, and returns when generation has ended. It should
// return soon after `stop` becomes true (the budget ran out). run_session fits it directly:
// callbacks.on_finished -> emit, request.budget_seconds, and the stop flag.
using CandidateGenerator = std::function<void(const Problem& problem, double budget_seconds,
                                              const CandidateSink& emit, const std::atomic<bool>& stop)>;

struct EvaluatedCandidate {
  int index = 0;
  std::string completion;
  double mean_logprob = 0.0;
  double finished_seconds = 0.0;  // from the problem's start to the end of its generation
  bool in_budget = false;         // finished within the budget, and so was tested
  TestResult result;              // with the problem's tests; NotTested for a candidate out of budget,
                                  // or whose test the budget's end cut or never began
  TestResult ranker_result;       // the run without the tests (checks, the docstring's examples, the
                                  // behaviour probe), when EvaluationOptions::hidden_test_rules asks
  int same_text = 0;              // CandidateGroups::same_text (positions in the candidates' list)
  int group = 0;                  // CandidateGroups::group, from ranker_result when there is one
  int agreement = 0;              // CandidateGroups::agreement, likewise
};

// A ranking made with the problem's tests hidden from the ranker, scored by them.
struct HiddenTestRanking {
  RankRule rule = RankRule::Agreement;
  std::vector<int> ranking;  // indices into candidates, best first; candidates within the budget only
  bool top_passed = false;   // the first of them passed the problem's tests
};

struct ProblemEvaluation {
  std::string task_id;
  std::vector<EvaluatedCandidate> candidates;  // in the order they finished
  std::vector<int> ranking;                    // indices into candidates, best first (the full rule,
                                               // the problem's tests as the tests)
  std::vector<HiddenTestRanking> hidden;       // one per EvaluationOptions::hidden_test_rules
  int n = 0;                                   // candidates finished within the budget
  int c = 0;                                   // of those, passed
  bool pass_first = false;                     // the first candidate to finish passed
  bool pass_all = false;                       // some candidate within the budget passed
  std::vector<std::pair<int, double>> pass_at_k;
  double seconds = 0.0;                        // generation and testing together
};

struct EvaluationOptions {
  // Also rank with the problem's tests hidden, under each of these rules: every candidate
  // then gets a second run, without the tests, for the ranker (the checks, the docstring's
  // examples, the behaviour probe), within the same budget.
  std::vector<RankRule> hidden_test_rules;
  // The tests' run also runs the docstring's examples (as tests) and the behaviour probe
  // (ranking_program with the tests), as the app's runs do: the user's docstring is part of
  // the specification there. Off for benchmarks, whose score is their tests alone.
  bool checks_with_tests = false;
};

// One candidate to test: the problem, its completion and the program the evaluation chose
// for it (make_test_program, or ranking_program).
struct CandidateTest {
  const Problem& problem;
  const std::string& completion;
  TestProgram program;
};

// What tests candidates for an evaluation: `test` runs one program within `wall_seconds`
// (0: its own limit of `limit_seconds`), called on `jobs` threads at once; the sandbox's
// TestRunner, or a controlled fake in tests.
struct CandidateTesting {
  std::function<TestResult(const CandidateTest& candidate, double wall_seconds)> test;
  int jobs = 1;
  double limit_seconds = 10.0;
};

// The one pipeline of the app's Generate, its Run all and `specula-cli eval`: runs
// `generate`, tests each complete candidate with `testing` the moment it arrives, then groups
// and ranks them all. The budget (0: none) covers generation and testing: `stop` is raised
// when it runs out, and every test ends by then (run_until: a test cut or never begun is
// NotTested), so the evaluation ends within the budget and the sandbox's teardown.
// A candidate whose text (exactly) an earlier one of the problem has is not tested again: it
// shares that test's result. `on_tested` (optional) is called as each verdict arrives, from
// a test thread (from `emit`'s caller for a duplicate whose text's verdict was known). An
// exception from `generate` is rethrown once the candidates it handed over have been tested.
ProblemEvaluation evaluate_problem(const Problem& problem, const CandidateGenerator& generate,
                                   const CandidateTesting& testing, double budget_seconds,
                                   const std::function<void(const EvaluatedCandidate&)>& on_tested = {},
                                   const EvaluationOptions& options = {});
// The same on `runner`: its workers' count and its limit, each program through TestRunner::run.
ProblemEvaluation evaluate_problem(const Problem& problem, const CandidateGenerator& generate,
                                   TestRunner& runner, double budget_seconds,
                                   const std::function<void(const EvaluatedCandidate&)>& on_tested = {},
                                   const EvaluationOptions& options = {});

}  // namespace specula
