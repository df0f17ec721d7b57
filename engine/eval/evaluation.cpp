// Ranking, pass@k and the budgeted evaluation scheduler.
#include "eval/evaluation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <future>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
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

const char* rank_rule_name(RankRule rule) {
  switch (rule) {
    case RankRule::Likelihood: return "likelihood";
    case RankRule::Checks: return "checks";
    case RankRule::Tests: return "docstring";
    case RankRule::Agreement: return "agreement";
  }
  return "agreement";
}

RankRule parse_rank_rule(const std::string& name) {
  for (RankRule rule : {RankRule::Likelihood, RankRule::Checks, RankRule::Tests, RankRule::Agreement})
    if (name == rank_rule_name(rule)) return rule;
  throw std::invalid_argument("unknown ranking rule '" + name + "' (likelihood, checks, docstring or agreement)");
}

bool ranks_before(const RankEntry& a, const RankEntry& b, RankRule rule) {
  if (rule >= RankRule::Tests) {
    const bool a_passed = a.result.verdict == Verdict::Passed;
    const bool b_passed = b.result.verdict == Verdict::Passed;
    if (a_passed != b_passed) return a_passed;
    const int a_count = a.result.asserts_passed + a.result.examples_passed;
    const int b_count = b.result.asserts_passed + b.result.examples_passed;
    if (!a_passed && a_count != b_count) return a_count > b_count;
  }
  if (rule >= RankRule::Checks && a.result.checks.passed() != b.result.checks.passed()) return a.result.checks.passed();
  if (rule >= RankRule::Agreement && a.agreement != b.agreement) return a.agreement > b.agreement;
  const double la = std::isnan(a.mean_logprob) ? -INFINITY : a.mean_logprob;
  const double lb = std::isnan(b.mean_logprob) ? -INFINITY : b.mean_logprob;
  if (la != lb) return la > lb;
  return a.finished_seconds < b.finished_seconds;
}

std::vector<int> rank_candidates(const std::vector<RankEntry>& entries, RankRule rule) {
  std::vector<int> order(entries.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return ranks_before(entries[a], entries[b], rule); });
  return order;
}

namespace {

std::string without_trailing_space(const std::string& text) {
  const std::size_t end = text.find_last_not_of(" \t\r\n");
  return end == std::string::npos ? std::string() : text.substr(0, end + 1);
}

// Every probe call reported an outcome: the behaviour can be compared with another's.
bool comparable(const TestResult& r) {
  return r.checks.passed() && !r.behaviour.empty() &&
         std::all_of(r.behaviour.begin(), r.behaviour.end(),
                     [](const ProbeCall& c) { return !c.outcome.empty() && c.outcome != "skipped"; });
}

// Some call returned a value other than None: agreeing on it says something.
bool informative(const TestResult& r) {
  return std::any_of(r.behaviour.begin(), r.behaviour.end(), [](const ProbeCall& c) { return c.outcome == "value"; });
}

// Alike on every probe call, and alike under the tests: outputs alike on the probe's inputs
// do not make a failing candidate "the same" as a passing one (the probe may never call it
// where it fails).
bool same_behaviour(const TestResult& a, const TestResult& b) {
  if (a.verdict != b.verdict || a.asserts_passed != b.asserts_passed || a.examples_passed != b.examples_passed)
    return false;
  return std::equal(a.behaviour.begin(), a.behaviour.end(), b.behaviour.begin(), b.behaviour.end(),
                    [](const ProbeCall& x, const ProbeCall& y) {
                      return x.input == y.input && x.outcome == y.outcome && x.key == y.key;
                    });
}

int root_of(std::vector<int>& parent, int i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

}  // namespace

CandidateGroups group_candidates(const std::vector<std::string>& texts, const std::vector<TestResult>& results) {
  if (texts.size() != results.size()) throw std::invalid_argument("group_candidates: texts and results differ in length");
  const int n = static_cast<int>(texts.size());
  CandidateGroups groups;
  std::map<std::string, int> first_with_text;
  std::vector<int> same_text_count(n, 0);
  for (int i = 0; i < n; ++i) {
    const int first = first_with_text.emplace(without_trailing_space(texts[i]), i).first->second;
    groups.same_text.push_back(first);
    ++same_text_count[first];
  }
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  auto join = [&](int a, int b) { parent[root_of(parent, a)] = root_of(parent, b); };
  for (int i = 0; i < n; ++i) {
    join(i, groups.same_text[i]);
    if (!comparable(results[i])) continue;
    for (int j = 0; j < i; ++j)
      if (comparable(results[j]) && same_behaviour(results[i], results[j])) join(i, j);
  }
  std::vector<int> first_of_root(n, -1), size_of_root(n, 0);
  for (int i = 0; i < n; ++i) {
    const int root = root_of(parent, i);
    if (first_of_root[root] < 0) first_of_root[root] = i;
    ++size_of_root[root];
  }
  for (int i = 0; i < n; ++i) {
    const int root = root_of(parent, i);
    const TestResult& r = results[i];
    groups.group.push_back(first_of_root[root]);
    // Not probed, or not to the end: identical texts are all the agreement there is.
    int agreement = 0;
    if (r.checks.passed() && comparable(r)) agreement = informative(r) ? size_of_root[root] : 0;
    else if (r.checks.passed() && (r.behaviour.empty() || informative(r))) agreement = same_text_count[groups.same_text[i]];
    groups.agreement.push_back(agreement);
  }
  return groups;
}

TestProgram ranking_program(const Problem& problem, const std::string& completion, bool with_tests) {
  TestProgram program =
      make_test_program(problem.code_prefix, completion, problem.suffix.value_or(""), with_tests ? problem.test : "",
                        problem.entry_point);
  program.run_examples = true;
  program.probe_behaviour = true;
  return program;
}

namespace {

// Groups, rankings and counts of a problem whose candidates all have their results.
void rank_and_count(ProblemEvaluation& out, const EvaluationOptions& options) {
  const bool hidden = !options.hidden_test_rules.empty();
  std::vector<std::string> texts;
  std::vector<TestResult> behaviours;  // whose behaviour groups the candidates
  for (const EvaluatedCandidate& e : out.candidates) {
    texts.push_back(e.completion);
    behaviours.push_back(hidden ? e.ranker_result : e.result);
  }
  const CandidateGroups groups = group_candidates(texts, behaviours);
  std::vector<RankEntry> entries;
  std::vector<int> in_budget;  // indices of the candidates within the budget
  for (std::size_t i = 0; i < out.candidates.size(); ++i) {
    EvaluatedCandidate& e = out.candidates[i];
    e.same_text = groups.same_text[i];
    e.group = groups.group[i];
    e.agreement = groups.agreement[i];
    entries.push_back(
        {.result = e.result, .mean_logprob = e.mean_logprob, .finished_seconds = e.finished_seconds, .agreement = e.agreement});
    if (!e.in_budget) continue;
    in_budget.push_back(static_cast<int>(i));
    ++out.n;
    if (e.result.verdict == Verdict::Passed) ++out.c;
  }
  out.ranking = rank_candidates(entries);
  for (RankRule rule : options.hidden_test_rules) {
    std::vector<RankEntry> ranked;
    for (int i : in_budget) {
      const EvaluatedCandidate& e = out.candidates[static_cast<std::size_t>(i)];
      ranked.push_back({.result = e.ranker_result,
                        .mean_logprob = e.mean_logprob,
                        .finished_seconds = e.finished_seconds,
                        .agreement = e.agreement});
    }
    HiddenTestRanking h;
    h.rule = rule;
    for (int position : rank_candidates(ranked, rule)) h.ranking.push_back(in_budget[static_cast<std::size_t>(position)]);
    h.top_passed = !h.ranking.empty() &&
                   out.candidates[static_cast<std::size_t>(h.ranking.front())].result.verdict == Verdict::Passed;
    out.hidden.push_back(std::move(h));
  }
  out.pass_first = !out.candidates.empty() && out.candidates.front().in_budget &&
                   out.candidates.front().result.verdict == Verdict::Passed;
  out.pass_all = out.c > 0;
  if (out.n > 0) out.pass_at_k = pass_at_ks(out.n, out.c);
}

// The tests of one evaluation, `jobs` at once, in the order they came: a small pool that
// lives as long as the evaluation, so that a test may wait on the evaluation's own state.
class TestQueue {
 public:
  explicit TestQueue(int jobs) {
    for (int i = 0; i < std::max(1, jobs); ++i) workers_.emplace_back([this] { work(); });
  }
  ~TestQueue() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
    }
    wake_.notify_all();
    for (std::thread& w : workers_) w.join();
  }
  TestQueue(const TestQueue&) = delete;
  TestQueue& operator=(const TestQueue&) = delete;

  std::future<TestResult> submit(std::function<TestResult()> job) {
    std::packaged_task<TestResult()> task(std::move(job));
    std::future<TestResult> future = task.get_future();
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(task));
    }
    wake_.notify_one();
    return future;
  }

 private:
  void work() {
    while (true) {
      std::packaged_task<TestResult()> task;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return closing_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::vector<std::thread> workers_;
  std::deque<std::packaged_task<TestResult()>> queue_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool closing_ = false;
};

}  // namespace

ProblemEvaluation evaluate_problem(const Problem& problem, const CandidateGenerator& generate, TestRunner& runner,
                                   double budget_seconds, const std::function<void(const EvaluatedCandidate&)>& on_tested,
                                   const EvaluationOptions& options) {
  const CandidateTesting testing{
      .test = [&runner](const CandidateTest& c, double wall) { return runner.run(c.program, wall); },
      .jobs = runner.jobs(),
      .limit_seconds = runner.limits().wall_seconds};
  return evaluate_problem(problem, generate, testing, budget_seconds, on_tested, options);
}

ProblemEvaluation evaluate_problem(const Problem& problem, const CandidateGenerator& generate,
                                   const CandidateTesting& testing, double budget_seconds,
                                   const std::function<void(const EvaluatedCandidate&)>& on_tested,
                                   const EvaluationOptions& options) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const bool budgeted = budget_seconds > 0.0;
  const bool hidden = !options.hidden_test_rules.empty();
  auto elapsed = [start] { return std::chrono::duration<double>(clock::now() - start).count(); };
  // Tests end by the budget's end however long they queue (run_until): one that has not run
  // by then is "not tested", never the candidate's failure.
  const std::optional<TestClock::time_point> deadline =
      budgeted ? std::optional(start + std::chrono::duration_cast<clock::duration>(
                                           std::chrono::duration<double>(budget_seconds)))
               : std::nullopt;

  std::mutex mutex;
  std::condition_variable generation_ended;
  bool ended = false;
  std::vector<EvaluatedCandidate> list;                        // in finish order
  std::vector<std::shared_future<TestResult>> futures;         // parallel to list; invalid when not tested
  std::vector<std::shared_future<TestResult>> ranker_futures;  // likewise, the runs without the tests
  // Each text's test runs once: a duplicate shares the first one's futures, and is reported
  // with it (or at once, when its verdict is already known).
  struct TextTest {
    std::size_t first = 0;            // position in list of the first candidate with this text
    std::optional<TestResult> known;  // its test's result, once there is one
    std::vector<std::size_t> waiting;  // positions to report when it comes
  };
  std::map<std::string, TextTest> by_text;
  std::atomic<bool> stop{false};
  TestQueue queue(testing.jobs);  // after what its tests use: it is joined first

  // One test of `completion`: the program, run by `testing` within what the budget leaves.
  const auto test_of = [&](std::string completion, TestProgram program, std::function<void(const TestResult&)> report) {
    return [&, completion = std::move(completion), program = std::move(program), report = std::move(report)] {
      const CandidateTest candidate{.problem = problem, .completion = completion, .program = program};
      const auto run = [&](double wall) { return testing.test(candidate, wall == testing.limit_seconds ? 0.0 : wall); };
      TestResult result = deadline ? run_until(*deadline, testing.limit_seconds, run) : run(testing.limit_seconds);
      if (report) report(result);
      return result;
    };
  };
  // The candidates at `positions`, each with `result`, to on_tested (outside the lock).
  const auto report_all = [&](const std::vector<std::size_t>& positions, const TestResult& result) {
    std::vector<EvaluatedCandidate> copies;
    {
      std::lock_guard lock(mutex);
      for (std::size_t at : positions) copies.push_back(list[at]);
    }
    for (EvaluatedCandidate& copy : copies) {
      copy.result = result;
      on_tested(copy);
    }
  };

  const CandidateSink emit = [&](GeneratedCandidate generated) {
    EvaluatedCandidate e;
    e.index = generated.index;
    e.completion = std::move(generated.completion);
    e.mean_logprob = generated.mean_logprob;
    e.finished_seconds = elapsed();
    e.in_budget = generated.complete && (!budgeted || e.finished_seconds < budget_seconds);
    std::optional<TestResult> known;  // a duplicate's verdict, already there: reported below
    std::size_t at = 0;
    {
      std::lock_guard lock(mutex);
      at = list.size();
      if (!e.in_budget) {
        e.result.verdict = Verdict::NotTested;
        e.result.detail = generated.complete ? "finished after the budget; not tested" : "cut before it ended; not tested";
        futures.emplace_back();
        ranker_futures.emplace_back();
      } else if (const auto same = by_text.find(e.completion); same != by_text.end()) {
        futures.push_back(futures[same->second.first]);
        ranker_futures.push_back(ranker_futures[same->second.first]);
        if (same->second.known) known = same->second.known;
        else same->second.waiting.push_back(at);
      } else {
        TextTest& text = by_text[e.completion];
        text.first = at;
        text.waiting.push_back(at);
        const std::string key = e.completion;
        std::function<void(const TestResult&)> report = [&, key](const TestResult& result) {
          std::vector<std::size_t> waiting;
          {
            std::lock_guard inner(mutex);
            TextTest& t = by_text[key];
            t.known = result;
            waiting.swap(t.waiting);
          }
          if (on_tested) report_all(waiting, result);
        };
        TestProgram program = options.checks_with_tests
                                  ? ranking_program(problem, e.completion, true)
                                  : make_test_program(problem.code_prefix, e.completion, problem.suffix.value_or(""),
                                                      problem.test, problem.entry_point);
        futures.push_back(queue.submit(test_of(e.completion, std::move(program), std::move(report))).share());
        ranker_futures.push_back(
            hidden ? queue.submit(test_of(e.completion, ranking_program(problem, e.completion, false), {})).share()
                   : std::shared_future<TestResult>());
      }
      list.push_back(std::move(e));
    }
    if (known && on_tested) report_all({at}, *known);
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
  for (std::size_t i = 0; i < futures.size(); ++i) {  // each test ends within the budget
    if (futures[i].valid()) list[i].result = futures[i].get();
    if (ranker_futures[i].valid()) list[i].ranker_result = ranker_futures[i].get();
  }
  if (failure) std::rethrow_exception(failure);
  out.candidates = std::move(list);
  rank_and_count(out, options);
  out.seconds = elapsed();
  return out;
}

}  // namespace specula
