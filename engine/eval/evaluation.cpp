// Ranking, pass@k and the budgeted evaluation scheduler.
#include "eval/evaluation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace specula {

double pass_at_k(int n, int c, int k) {
  if (n < 0 || c < 0 || c > n || k < 1 || k > n)
    throw std::invalid_argument("pass@k needs 0 <= c <= n and 1 <= k <= n (n=" + std::to_string(n) +
                                ", c=" + std::to_string(c) + ", k=" + std::to_string(k) + ")");
  if (n - c < k) return 1.0;  // every k-subset holds a correct sample
  double all_wrong = 1.0;     // C(n-c, k) / C(n, k)
  for (int i = n - c + 1; i <= n; ++i) all_wrong *= 1.0 - static_cast<double>(k) / i;
  return 1.0 - all_wrong;
}

std::vector<std::pair<int, double>> pass_at_ks(int n, int c) {
  std::vector<std::pair<int, double>> out;
  for (int k : {1, 5, 10})
    if (k <= n) out.emplace_back(k, pass_at_k(n, c, k));
  return out;
}

std::vector<std::pair<int, double>> mean_pass_at_ks(const std::vector<std::pair<int, int>>& tasks) {
  std::vector<std::pair<int, double>> out;
  if (tasks.empty()) return out;
  for (int k : {1, 5, 10}) {
    const bool all_have_k = std::all_of(tasks.begin(), tasks.end(), [k](const auto& t) { return t.first >= k; });
    if (!all_have_k) continue;
    double sum = 0.0;
    for (const auto& [n, c] : tasks) sum += pass_at_k(n, c, k);
    out.emplace_back(k, sum / static_cast<double>(tasks.size()));
  }
  return out;
}

bool ranks_before(const RankEntry& a, const RankEntry& b) {
  const bool a_passed = a.result.verdict == Verdict::Passed;
  const bool b_passed = b.result.verdict == Verdict::Passed;
  if (a_passed != b_passed) return a_passed;
  if (!a_passed && a.result.asserts_passed != b.result.asserts_passed)
    return a.result.asserts_passed > b.result.asserts_passed;
  const double la = std::isnan(a.mean_logprob) ? -INFINITY : a.mean_logprob;
  const double lb = std::isnan(b.mean_logprob) ? -INFINITY : b.mean_logprob;
  if (la != lb) return la > lb;
  return a.finished_seconds < b.finished_seconds;
}

std::vector<int> rank_candidates(const std::vector<RankEntry>& entries) {
  std::vector<int> order(entries.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return ranks_before(entries[a], entries[b]); });
  return order;
}

ProblemEvaluation evaluate_problem(const Problem& problem, const CandidateGenerator& generate,
                                   TestRunner& runner, double budget_seconds,
                                   const std::function<void(const EvaluatedCandidate&)>& on_tested) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const bool budgeted = budget_seconds > 0.0;
  auto elapsed = [start] { return std::chrono::duration<double>(clock::now() - start).count(); };

  std::mutex mutex;
  std::condition_variable generation_ended;
  bool ended = false;
  std::vector<EvaluatedCandidate> list;          // in finish order
  std::vector<std::future<TestResult>> futures;  // parallel to list; invalid when not tested
  std::atomic<bool> stop{false};

  const CandidateSink emit = [&](GeneratedCandidate generated) {
    EvaluatedCandidate e;
    e.index = generated.index;
    e.completion = std::move(generated.completion);
    e.mean_logprob = generated.mean_logprob;
    e.finished_seconds = elapsed();
    e.in_budget = !budgeted || e.finished_seconds < budget_seconds;
    // A test gets what the budget has left, at most the runner's limit (0: the limit itself).
    const double wall = budgeted ? std::max(0.001, std::min(runner.limits().wall_seconds,
                                                            budget_seconds - e.finished_seconds))
                                 : 0.0;
    std::lock_guard lock(mutex);
    const std::size_t at = list.size();
    if (e.in_budget) {
      std::function<void(const TestResult&)> report;
      if (on_tested)
        report = [&, at](const TestResult& result) {
          EvaluatedCandidate copy;
          {
            std::lock_guard inner(mutex);
            copy = list[at];
          }
          copy.result = result;
          on_tested(copy);
        };
      futures.push_back(runner.submit(make_test_program(problem.code_prefix, e.completion, problem.test,
                                                        problem.entry_point),
                                      wall, std::move(report)));
    } else {
      e.result.verdict = Verdict::Timeout;
      e.result.detail = "finished after the budget; not tested";
      futures.emplace_back();
    }
    list.push_back(std::move(e));
  };

  // Raises `stop` when the budget runs out, unless generation ends first.
  std::thread watchdog([&] {
    if (!budgeted) return;
    std::unique_lock lock(mutex);
    if (!generation_ended.wait_for(lock, std::chrono::duration<double>(budget_seconds), [&] { return ended; }))
      stop = true;
  });
  // A generator that throws still leaves the watchdog and the queued tests to finish:
  // they hold references into this frame.
  std::exception_ptr failure;
  try {
    generate(problem, budget_seconds, emit, stop);
  } catch (...) {
    failure = std::current_exception();
  }
  {
    std::lock_guard lock(mutex);
    ended = true;
  }
  generation_ended.notify_all();
  watchdog.join();

  ProblemEvaluation out;
  out.task_id = problem.task_id;
  for (std::size_t i = 0; i < futures.size(); ++i)  // each test ends within the budget
    if (futures[i].valid()) list[i].result = futures[i].get();
  if (failure) std::rethrow_exception(failure);
  out.candidates = std::move(list);

  std::vector<RankEntry> entries;
  for (const EvaluatedCandidate& e : out.candidates) {
    entries.push_back({e.result, e.mean_logprob, e.finished_seconds});
    if (!e.in_budget) continue;
    ++out.n;
    if (e.result.verdict == Verdict::Passed) ++out.c;
  }
  out.ranking = rank_candidates(entries);
  out.pass_first = !out.candidates.empty() && out.candidates.front().in_budget &&
                   out.candidates.front().result.verdict == Verdict::Passed;
  out.pass_all = out.c > 0;
  if (out.n > 0) out.pass_at_k = pass_at_ks(out.n, out.c);
  out.seconds = elapsed();
  return out;
}

}  // namespace specula
