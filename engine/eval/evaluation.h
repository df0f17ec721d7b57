// Ranking candidates by their test results, the pass@k estimator, and the budgeted
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
};

// Whether `a` ranks strictly before `b`: passed first; then more asserts passed; failed,
// timeout, crashed, memory and error otherwise equal; ties by higher mean log-probability
// (NaN lowest), then by earlier finish.
bool ranks_before(const RankEntry& a, const RankEntry& b);

// Indices of `entries`, best first; a stable sort, so full ties keep their input order.
std::vector<int> rank_candidates(const std::vector<RankEntry>& entries);

// A candidate as generation hands it over.
struct GeneratedCandidate {
  int index = 0;                 // the candidate's number within the problem
  std::string completion;
  double mean_logprob = 0.0;
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
  TestResult result;              // for a candidate out of budget: Timeout, not run
};

struct ProblemEvaluation {
  std::string task_id;
  std::vector<EvaluatedCandidate> candidates;  // in the order they finished
  std::vector<int> ranking;                    // indices into candidates, best first
  int n = 0;                                   // candidates finished within the budget
  int c = 0;                                   // of those, passed
  bool pass_first = false;                     // the first candidate to finish passed
  bool pass_all = false;                       // some candidate within the budget passed
  std::vector<std::pair<int, double>> pass_at_k;
  double seconds = 0.0;                        // generation and testing together
};

// Runs `generate` and tests each candidate on `runner` as soon as it arrives. The budget
// (0: none) covers generation and testing: `stop` is raised when it runs out, and each test
// gets at most the time the budget has left. `on_tested` (optional) is called, from a
// worker thread or this one, as each verdict arrives. An exception from `generate` is
// rethrown once the candidates it handed over have been tested.
ProblemEvaluation evaluate_problem(const Problem& problem, const CandidateGenerator& generate,
                                   TestRunner& runner, double budget_seconds,
                                   const std::function<void(const EvaluatedCandidate&)>& on_tested = {});

}  // namespace specula
