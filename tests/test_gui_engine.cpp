// The acceptance flow with the real engine and a real model (stories260K from ../shared):
// load, four candidates stream, Stop ends the run midway, a second run goes to the end and
// every candidate gets a sandbox verdict and a rank; the demo pair's verdicts arrive while
// other candidates still decode (EngineWorker's signals, in an order forced by holding the
// decoding thread, not by timing); bad model files (a text file named
// .gguf with GGUF's message) and an unusable device become messages in the window. Ranking
// without tests: the demo pair's greedy candidates, all alike, collapse into one pane; fixed
// texts tested by the real sandbox and harness show their checks, docstring examples,
// collapsed duplicates and behaviour groups, and a fill-in-the-middle candidate that passes
// only with the code after the cursor. The prompt style: the demo pair (no chat template) is
// prompted raw under Auto and Chat is one message; the real SmolLM2-135M-Instruct is prompted
// through its chat template under Auto, its candidates still completions of the code.
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QLabel>
#include <QTableWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTextCursor>
#include <QtTest>
#include <pthread.h>

#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "behaviour_view.h"
#include "candidate_grid.h"
#include "candidate_pane.h"
#include "code_editor.h"
#include "engine_worker.h"
#include "eval/evaluation.h"
#include "eval/sandbox.h"
#include "fake_engine.h"
#include "main_window.h"
#include "problem_browser.h"
#include "data_limit.h"
#include "gui_test_main.h"
#include "shared_data.h"

using specula::ui::CandidateState;
using specula::ui::MainWindow;

namespace {

constexpr int kTimeoutMs = 120000;  // model load and a full run on two busy cores
const QString kPrompt = "def add(a: int, b: int) -> int:\n    \"\"\"Return the sum of a and b.\"\"\"\n";

std::unique_ptr<MainWindow> makeWindow() {
  auto window = std::make_unique<MainWindow>(specula::ui::make_engine());
  window->findChild<QComboBox*>("deviceCombo")->setCurrentIndex(1);  // CPU: the same on every machine
  window->show();
  return window;
}

bool isVerdict(CandidateState s) {
  return s == CandidateState::Passed || s == CandidateState::Failed || s == CandidateState::Timeout ||
         s == CandidateState::Error;
}

// FakeEngine's generation of fixed texts, each tested as the real engine tests one: the
// real sandbox, harness, checks, docstring examples and behaviour probe.
class FixedTextsEngine : public specula::test::FakeEngine {
 public:
  explicit FixedTextsEngine(std::vector<std::string> completions)
      : FakeEngine(std::chrono::milliseconds(2), std::chrono::milliseconds(0), std::move(completions)),
        runner_(sandbox_, specula::SandboxLimits{}, 2) {}

  specula::TestResult test(const specula::CandidateTest& candidate, double timeout_seconds) override {
    return runner_.run(candidate.program, timeout_seconds);
  }

 private:
  specula::Sandbox sandbox_;
  specula::TestRunner runner_;
};

QString note(const MainWindow& window, int i) {
  return window.grid()->pane(i)->findChild<QLabel*>("note")->text();
}

// A window on FixedTextsEngine giving `completions`, its fake model loaded (with
// fill-in-the-middle tokens when `fim`), no drafter, no budget, `n` candidates.
std::unique_ptr<MainWindow> fixedTextsWindow(std::vector<std::string> completions, const QTemporaryDir& dir, int n,
                                             bool fim = false) {
  auto window = std::make_unique<MainWindow>(std::make_unique<FixedTextsEngine>(std::move(completions)));
  window->show();
  const QString model = dir.filePath(fim ? "fim.gguf" : "fake.gguf");
  QFile file(model);
  if (!file.open(QIODevice::WriteOnly)) return nullptr;
  file.write(QByteArray(specula::test::FakeEngine::kMagic) + (fim ? specula::test::FakeEngine::kFimMarker : ""));
  file.close();
  window->loadModels(model);
  if (!QTest::qWaitFor([&] { return window->hasModel(); }, kTimeoutMs)) return nullptr;
  window->findChild<QComboBox*>("drafterCombo")->setCurrentIndex(0);  // none: the fake has no draft model
  window->findChild<QSpinBox*>("candidatesSpin")->setValue(n);
  window->findChild<QDoubleSpinBox*>("budgetSpin")->setValue(0);
  return window;
}

}  // namespace

class GuiEngineTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void generateStopRunAgainRank() {
    SPECULA_SHARED_FILE(model, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tokenizer, "models/stories260K/tok512.bin");
    auto window = makeWindow();
    window->loadModels(QString::fromStdString(model), QString::fromStdString(tokenizer));
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kTimeoutMs);
    QVERIFY2(window->hasModel(), qPrintable(window->message()));
    QVERIFY2(window->statusText().contains("cpu"), qPrintable(window->statusText()));

    window->promptEditor()->setPlainText(kPrompt);
    window->testsEditor()->setPlainText("assert add(2, 3) == 5\n");
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(4);
    window->findChild<QSpinBox*>("maxTokensSpin")->setValue(120);
    window->findChild<QDoubleSpinBox*>("budgetSpin")->setValue(0);  // no budget: the run ends by itself

    // Stop as soon as every candidate has streamed a few tokens. The tiny model is faster
    // than any click, so the stop is issued on the engine thread, in step with the deltas,
    // exactly as the Stop button's handler would.
    std::mutex mutex;
    std::vector<int> tokens(4, 0);
    auto* worker = window->worker();
    const auto connection = connect(
        worker, &specula::ui::EngineWorker::candidateDelta, worker,
        [&](int index, const QString&, int count, int, int) {
          std::lock_guard lock(mutex);
          tokens[size_t(index)] = count;
          if (std::all_of(tokens.begin(), tokens.end(), [](int t) { return t >= 4; })) worker->stop();
        },
        Qt::DirectConnection);
    QTest::mouseClick(window->findChild<QPushButton*>("generateButton"), Qt::LeftButton);
    QVERIFY(window->isRunning());
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    disconnect(connection);
    int stopped = 0;
    for (int i = 0; i < 4; ++i) {
      QVERIFY2(!window->grid()->pane(i)->text().isEmpty(), qPrintable(QString("pane %1 is empty").arg(i)));
      stopped += window->grid()->pane(i)->state() == CandidateState::Stopped;
    }
    QVERIFY2(stopped > 0, "no candidate was stopped");

    // Second run to the end: every candidate tested in the sandbox, then ranked.
    QTest::mouseClick(window->findChild<QPushButton*>("generateButton"), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    QVERIFY2(window->message().isEmpty(), qPrintable(window->message()));
    QVector<int> order = window->grid()->order();
    QCOMPARE(order.size(), 4);
    for (int i = 0; i < 4; ++i) {
      const auto* pane = window->grid()->pane(i);
      QVERIFY2(isVerdict(pane->state()), qPrintable(QString("pane %1: %2").arg(i).arg(stateName(pane->state()))));
      QVERIFY(!pane->text().isEmpty());
    }
    // Passed candidates (if the model wrote any) rank before all others.
    bool seen_other = false;
    for (int i : order) {
      const bool passed = window->grid()->pane(i)->state() == CandidateState::Passed;
      QVERIFY(!(passed && seen_other));
      seen_other |= !passed;
    }
    std::sort(order.begin(), order.end());
    QCOMPARE(order, (QVector<int>{0, 1, 2, 3}));
  }

  // The demo pair decodes eight candidates of different lengths; the first delta of a
  // candidate still decoding after another has finished holds the decoding thread (inside
  // EngineWorker's candidateDelta) until some verdict arrives. Only a verdict sent while
  // decoding goes on lets that delta return: were the tests to start after decoding, the hold
  // would run out, no verdict seen, and the test fail. The order is forced, not timed.
  void verdictsArriveWhileDecoding() {
    const QString models = SPECULA_SOURCE_DIR "/resources/models/";
    auto window = makeWindow();
    window->loadModels(models + "specula-demo-target.gguf", {}, models + "specula-demo-draft.gguf");
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kTimeoutMs);
    QVERIFY2(window->hasModel(), qPrintable(window->message()));
    window->promptEditor()->setPlainText(kPrompt);
    window->testsEditor()->setPlainText("assert add(2, 3) == 5\n");
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(8);
    window->findChild<QDoubleSpinBox*>("temperatureSpin")->setValue(0.8);
    window->findChild<QSpinBox*>("maxTokensSpin")->setValue(200);
    window->findChild<QDoubleSpinBox*>("budgetSpin")->setValue(0);  // no budget: every candidate ends by itself

    std::mutex mutex;
    std::condition_variable verdict_came;
    std::vector<QString> events;  // "verdict I", "finished I", "held by J", "released J": in order
    std::set<int> finished, verdicts;
    bool held = false;             // the hold has been taken (once per run)
    bool released_by_verdict = false;
    auto* worker = window->worker();
    const auto on_state = connect(
        worker, &specula::ui::EngineWorker::candidateState, worker,
        [&](int index, int state, const QString&) {
          const auto s = CandidateState(state);
          std::lock_guard lock(mutex);
          if (s == CandidateState::Testing) {
            finished.insert(index);
            events.push_back(QString("finished %1").arg(index));
          } else if (s != CandidateState::Generating) {
            verdicts.insert(index);
            events.push_back(QString("verdict %1").arg(index));
            verdict_came.notify_all();
          }
        },
        Qt::DirectConnection);
    const auto on_delta = connect(
        worker, &specula::ui::EngineWorker::candidateDelta, worker,
        [&](int index, const QString&, int, int, int) {
          std::unique_lock lock(mutex);
          if (held || finished.empty() || finished.count(index)) return;
          held = true;  // a candidate has finished and this one is still decoding
          events.push_back(QString("held by %1").arg(index));
          released_by_verdict = verdict_came.wait_for(lock, std::chrono::seconds(60), [&] { return !verdicts.empty(); });
          events.push_back(QString("released %1").arg(index));
        },
        Qt::DirectConnection);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    disconnect(on_state);
    disconnect(on_delta);
    std::lock_guard lock(mutex);
    QStringList log;
    for (const QString& e : events) log << e;
    QVERIFY2(held, qPrintable("every candidate finished on the same step: " + log.join(", ")));
    QVERIFY2(released_by_verdict, qPrintable("no verdict while decoding was held: " + log.join(", ")));
    // the held candidate's own verdict came after the verdict that released it
    const qsizetype release = log.indexOf(QRegularExpression("released \\d+"));
    const QString held_index = log[release].section(' ', 1);
    QVERIFY(log.indexOf(QRegularExpression("verdict \\d+")) < release);
    QVERIFY(log.indexOf("verdict " + held_index) > release);
    QCOMPARE(int(verdicts.size()), 8);
    QVERIFY2(window->message().isEmpty(), qPrintable(window->message()));
  }

  void runAllEvaluatesEveryTask() {
    SPECULA_SHARED_FILE(model, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tokenizer, "models/stories260K/tok512.bin");
    auto window = makeWindow();
    window->loadModels(QString::fromStdString(model), QString::fromStdString(tokenizer));
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kTimeoutMs);
    QVERIFY2(window->hasModel(), qPrintable(window->message()));
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(2);
    window->findChild<QSpinBox*>("maxTokensSpin")->setValue(48);
    window->findChild<QDoubleSpinBox*>("budgetSpin")->setValue(0);
    specula::ui::ProblemBrowser* browser = window->openProblems();
    QVERIFY(browser->openFile(SPECULA_TEST_DATA_DIR "/ui_problems.jsonl"));
    QTest::mouseClick(browser->findChild<QPushButton*>("runAllButton"), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    QVERIFY2(window->message().isEmpty(), qPrintable(window->message()));
    QCOMPARE(int(browser->evaluations().size()), 2);
    for (const specula::ProblemEvaluation& e : browser->evaluations()) {
      QCOMPARE(e.n, 2);  // no budget: both candidates finish and are tested
      QCOMPARE(int(e.candidates.size()), 2);
      for (const specula::EvaluatedCandidate& c : e.candidates) QVERIFY(c.in_budget);
      QCOMPARE(int(e.ranking.size()), 2);
    }
    QVERIFY(browser->summary().startsWith("2 of 2 tasks"));
  }

  // Greedy, every candidate is the same text: one pane stands for the four, checked in the
  // sandbox without tests (the docstring's example is the only test).
  void demoPairGreedyCandidatesCollapse() {
    const QString models = SPECULA_SOURCE_DIR "/resources/models/";
    auto window = makeWindow();
    window->loadModels(models + "specula-demo-target.gguf", {}, models + "specula-demo-draft.gguf");
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kTimeoutMs);
    QVERIFY2(window->hasModel(), qPrintable(window->message()));
    window->promptEditor()->setPlainText("def triple(n):\n    \"\"\"Return n multiplied by 3.\n    >>> triple(4)\n    12\n    \"\"\"\n");
    window->testsEditor()->clear();
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(4);
    window->findChild<QDoubleSpinBox*>("temperatureSpin")->setValue(0.0);
    window->findChild<QSpinBox*>("maxTokensSpin")->setValue(64);
    window->findChild<QDoubleSpinBox*>("budgetSpin")->setValue(0);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    QVERIFY2(window->message().isEmpty(), qPrintable(window->message()));
    specula::ui::CandidateGrid* grid = window->grid();
    QCOMPARE(grid->shownCount(), 1);
    const int shown = grid->order().front();
    QVERIFY(!grid->isCollapsed(shown));
    QCOMPARE(grid->pane(shown)->findChild<QLabel*>("duplicateCount")->text(), QString("×4"));
    const CandidateState state = grid->pane(shown)->state();
    QVERIFY2(state == CandidateState::Passed || state == CandidateState::Failed,
             qPrintable(stateName(state) + ": " + note(*window, shown)));
    // The docstring's example ran, unless the text did not even parse.
    QVERIFY2(note(*window, shown).contains("from the docstring") || note(*window, shown).contains("does not parse"),
             qPrintable(note(*window, shown)));
  }

  // Eight candidates of four texts, tested for real: the two that add behave alike (badges),
  // the one that subtracts fails the docstring's example, the one that does not parse says
  // so and ranks last; each text is shown once, counted.
  void realChecksExamplesAndGroupsInTheWindow() {
    const std::vector<std::string> texts = {"    return a + b\n", "    total = a + b\n    return total\n",
                                            "    return a - b\n", "    return a +\n"};
    QTemporaryDir dir;
    auto window = fixedTextsWindow(texts, dir, 8);
    QVERIFY(window);
    window->promptEditor()->setPlainText("def add(a, b):\n    \"\"\"Return a + b.\n    >>> add(2, 3)\n    5\n    \"\"\"\n");
    window->testsEditor()->clear();
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    specula::ui::CandidateGrid* grid = window->grid();
    QCOMPARE(grid->order(), (QVector<int>{0, 4, 1, 5, 2, 6, 3, 7}));
    QCOMPARE(grid->shownCount(), 4);
    for (int i = 0; i < 4; ++i) {
      QVERIFY(!grid->isCollapsed(i));
      QVERIFY(grid->isCollapsed(i + 4));
      QCOMPARE(grid->pane(i)->findChild<QLabel*>("duplicateCount")->text(), QString("×2"));
    }
    QCOMPARE(grid->pane(0)->state(), CandidateState::Passed);
    QCOMPARE(note(*window, 0), QString("passed: 1/1 from the docstring"));
    QCOMPARE(note(*window, 2), QString("failed: 0/1 from the docstring"));
    QVERIFY2(grid->pane(2)->toolTip().contains("add(2, 3): expected 5, got -1"), qPrintable(grid->pane(2)->toolTip()));
    QVERIFY2(note(*window, 3).startsWith("failed: does not parse: SyntaxError"), qPrintable(note(*window, 3)));
    QCOMPARE(grid->pane(0)->findChild<QLabel*>("groupBadge")->text(), QString("same behaviour as #2"));
    QCOMPARE(grid->pane(1)->findChild<QLabel*>("groupBadge")->text(), QString("same behaviour as #1"));
    QVERIFY(!grid->pane(2)->findChild<QLabel*>("groupBadge")->isVisible());

    specula::ui::BehaviourView* view = window->openBehaviour(2);
    QVERIFY(view);
    QCOMPARE(view->table()->columnCount(), 2);  // adds; subtracts (the text that does not parse was not called)
    QCOMPARE(view->selectedGroup(), 1);
    QVERIFY(view->table()->rowCount() >= 8);
    QCOMPARE(view->table()->verticalHeaderItem(0)->text(), QString("add(2, 3)"));
    QCOMPARE(view->table()->item(0, 0)->text(), QString("5"));
    QCOMPARE(view->table()->item(0, 1)->text(), QString("-1"));
  }

  // A candidate that calls a helper the code after the cursor defines: tested for real with
  // that code after it (Fill at cursor), it passes; with the whole box as its prompt, the
  // same text follows the helper instead and fails.
  void fillAtCursorCandidatePassesWithItsSuffix() {
    QTemporaryDir dir;
    auto window = fixedTextsWindow({"    return _plus(a, b)\n"}, dir, 1, true);
    QVERIFY(window);
    const QString prefix = "def add(a, b):\n";
    window->promptEditor()->setPlainText(prefix + "\n\ndef _plus(x, y):\n    return x + y\n");
    QTextCursor cursor = window->promptEditor()->textCursor();
    cursor.setPosition(int(prefix.size()));
    window->promptEditor()->setTextCursor(cursor);
    window->testsEditor()->setPlainText("assert add(2, 3) == 5\n");
    auto* fill = window->findChild<QCheckBox*>("fillAtCursorCheck");
    QVERIFY(fill->isEnabled());

    fill->setChecked(true);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    QCOMPARE(window->grid()->pane(0)->text(), QString("    return _plus(a, b)\n"));
    QVERIFY2(window->grid()->pane(0)->state() == CandidateState::Passed, qPrintable(note(*window, 0)));
    QVERIFY2(note(*window, 0).startsWith("passed: 1/1 asserts"), qPrintable(note(*window, 0)));

    // Without it the completion would go at the prompt's end, after a function left without
    // a body: the prompt itself does not parse, and the window says so instead of failing
    // the candidate for it.
    fill->setChecked(false);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    QVERIFY2(window->grid()->pane(0)->state() != CandidateState::Passed, qPrintable(note(*window, 0)));
    QVERIFY2(window->message().contains("The prompt does not parse"), qPrintable(window->message()));
  }

  void badModelFileIsAMessage() {
    QTemporaryDir dir;
    const QString path = dir.filePath("broken.gguf");
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("GGUF\x03\x00\x00\x00 truncated header");
    file.close();
    auto window = makeWindow();
    window->loadModels(path);
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kTimeoutMs);
    QVERIFY(!window->hasModel());
    QVERIFY2(window->message().contains("broken.gguf"), qPrintable(window->message()));
    window->promptEditor()->setPlainText(kPrompt);
    window->generate();  // the window still answers
    QVERIFY(window->message().contains("No model is loaded"));
  }

  // A prompt that does not parse on its own gets one message about the prompt, at its line,
  // instead of every candidate failing for it: a docstring left at column 0 (what Enter gave
  // after a signature before the editor indented). A signature alone, the body left to the
  // model, is a prompt that parses.
  void brokenPromptIsOneMessage() {
    QTemporaryDir dir;
    auto window = fixedTextsWindow({"    return a + b\n"}, dir, 3);
    QVERIFY(window);
    window->testsEditor()->setPlainText("assert add(2, 3) == 5\n");
    const auto run = [&](const QString& prompt) {
      window->promptEditor()->setPlainText(prompt);
      window->generate();
      QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    };
    run("def add(a, b):\n\"\"\"Return a + b.\"\"\"\n");
    QVERIFY2(window->message().contains("The prompt does not parse") && window->message().contains("IndentationError") &&
                 window->message().contains("line 2"),
             qPrintable(window->message()));
    for (int i = 0; i < 3; ++i) {
      QVERIFY2(window->grid()->pane(i)->state() != CandidateState::Failed, qPrintable(note(*window, i)));
    }
    // words: no run, the start of a function offered instead (requestInWordsIsOfferedAFunction)
    window->promptEditor()->setPlainText("write a function that adds two numbers\n");
    window->generate();
    QVERIFY(!window->isRunning());
    QVERIFY2(window->message().contains("def add_two_numbers(a: int, b: int):"), qPrintable(window->message()));
    run("def add(a, b):\n");
    QVERIFY2(!window->message().contains("does not parse"), qPrintable(window->message()));
    QCOMPARE(window->grid()->pane(0)->state(), CandidateState::Passed);
  }

  // A failed comparison says in the pane what the candidate gave against what was expected.
  void failedAssertSaysWhatItGot() {
    QTemporaryDir dir;
    auto window = fixedTextsWindow({"    return a - b\n"}, dir, 1);
    QVERIFY(window);
    window->promptEditor()->setPlainText("def add(a, b):\n");
    window->testsEditor()->setPlainText("assert add(4, 4) == 8\nassert add(2, 3) == 5\n");
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    QCOMPARE(window->grid()->pane(0)->state(), CandidateState::Failed);
    QVERIFY2(note(*window, 0).contains("expected 8, got 0"), qPrintable(note(*window, 0)));
  }

  // The budget holds for the tests too: tests that would outlast it are cut at its end or
  // never begin, and each such pane says "not tested", not "timeout" or "failed".
  void testsEndByTheBudget() {
    QTemporaryDir dir;
    auto window = fixedTextsWindow({"    time.sleep(3)\n    return a + b\n"}, dir, 8);
    QVERIFY(window);
    window->promptEditor()->setPlainText("import time\n\ndef add(a, b):\n");
    window->testsEditor()->setPlainText("assert add(2, 3) == 5\n");
    window->findChild<QDoubleSpinBox*>("budgetSpin")->setValue(1.0);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    for (int i = 0; i < 8; ++i) {
      QVERIFY2(window->grid()->pane(i)->state() == CandidateState::Done, qPrintable(note(*window, i)));
      QVERIFY2(note(*window, i).startsWith("not tested: the budget ran out"), qPrintable(note(*window, i)));
    }
  }

  // A failure's line numbers are the pane's (its first line is 1), or say whose line they are.
  void failureLinesAreThePanes() {
    QTemporaryDir dir;
    auto window = fixedTextsWindow({"    total = a\n    return total +\n", "    return a - b\n"}, dir, 2);
    QVERIFY(window);
    window->promptEditor()->setPlainText("def add(a, b):\n    \"\"\"Sum.\"\"\"\n");
    window->testsEditor()->setPlainText("assert add(1, 1) == 2\nassert add(2, 3) == 5\n");
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    QCOMPARE(window->grid()->pane(0)->state(), CandidateState::Failed);
    QVERIFY2(note(*window, 0).contains("(line 2)"), qPrintable(note(*window, 0)));  // program.py's line 4
    QCOMPARE(window->grid()->pane(1)->state(), CandidateState::Failed);
    // which assert failed, in the pane's own line: the first of the tests
    QVERIFY2(note(*window, 1).contains("line 1 of the tests: expected 2, got 0"), qPrintable(window->grid()->pane(1)->toolTip()));
    const QString traceback = window->grid()->pane(1)->toolTip();
    QVERIFY2(traceback.contains("line 1 of the tests"), qPrintable(traceback));
    QVERIFY2(!traceback.contains(QRegularExpression("line [0-9]+,")), qPrintable(traceback));
  }

  // Two wrong leap-year rules that fail one test each (1900 and 2000), alike on every small
  // number the probe would try of its own, do not read "same behaviour": the probe calls
  // each candidate on the tests' own inputs first.
  void wrongCandidatesApartOnTheTestsInputs() {
    QTemporaryDir dir;
    auto window = fixedTextsWindow({"    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n",
                                    "    return year % 4 == 0\n",
                                    "    return year % 4 == 0 and (year < 1000 or year % 100 != 0)\n"},
                                   dir, 3);
    QVERIFY(window);
    window->promptEditor()->setPlainText("def is_leap(year: int) -> bool:\n    \"\"\"Whether year is a leap year.\"\"\"\n");
    window->testsEditor()->setPlainText("assert is_leap(2024) == True\nassert is_leap(1900) == False\n"
                                        "assert is_leap(2000) == True\n");
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    QCOMPARE(window->grid()->pane(0)->state(), CandidateState::Passed);
    for (int i : {1, 2}) {
      QCOMPARE(window->grid()->pane(i)->state(), CandidateState::Failed);
      QVERIFY2(note(*window, i).startsWith("failed: 2/3 asserts"), qPrintable(note(*window, i)));
      const QString badge = window->grid()->pane(i)->findChild<QLabel*>("groupBadge")->text();
      QVERIFY2(!badge.contains("same behaviour"), qPrintable(badge));
    }
  }

  // One pipeline: the window ranks a run as evaluate_problem ranks the same candidates with
  // the window's options (tests with the checks, the docstring's examples and the probe):
  // the engine's function decides, the window only shows.
  void windowRanksAsTheEngineDoes() {
    const std::vector<std::string> texts = {
        "    return a - b\n",                              // fails both
        "    return a + b\n",                              // passes
        "    return 5\n",                                  // passes one assert and the example
        "    raise ValueError('no')\n",                    // raises
        "    total = a\n    total += b\n    return total\n",  // passes, behaves as #2
        "    return a + b if a else b\n",                  // passes, differs from #2 at a = 0
    };
    const std::string prompt = "def add(a: int, b: int) -> int:\n    \"\"\"Sum.\n    >>> add(2, 3)\n    5\n    \"\"\"\n";
    const std::string tests = "assert add(2, 3) == 5\nassert add(1, 1) == 2\n";
    QTemporaryDir dir;
    auto window = fixedTextsWindow(texts, dir, int(texts.size()));
    QVERIFY(window);
    window->promptEditor()->setPlainText(QString::fromStdString(prompt));
    window->testsEditor()->setPlainText(QString::fromStdString(tests));
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);

    FixedTextsEngine engine(texts);
    specula::GenerationRequest request;
    request.prompt = prompt;
    request.n_candidates = int(texts.size());
    const specula::CandidateGenerator generate = [&](const specula::Problem&, double, const specula::CandidateSink& emit, const std::atomic<bool>&) {
      specula::SessionCallbacks callbacks;
      callbacks.on_finished = [&](const specula::Candidate& c) { emit({c.index, c.text, c.mean_logprob()}); };
      engine.generate(request, callbacks, nullptr);
    };
    const specula::CandidateTesting testing{
        .test = [&](const specula::CandidateTest& c, double wall) { return engine.test(c, wall); }, .jobs = 2, .limit_seconds = 10};
    const specula::ProblemEvaluation e = specula::evaluate_problem(specula::make_problem(prompt, tests), generate, testing, 0.0, {},
                                                 {.checks_with_tests = true});
    QVector<int> expected;
    for (int position : e.ranking) expected.push_back(e.candidates[size_t(position)].index);
    QCOMPARE(window->grid()->order(), expected);
    QCOMPARE(expected.front(), 1);  // passed, with the larger group
    QCOMPARE(window->grid()->pane(1)->state(), CandidateState::Passed);
  }

  // A text file named .gguf gets GGUF's own message, as `specula-cli models` gives it, not
  // the message of the llama2.c format the loader falls back to for other files.
  void textFileNamedGgufGetsTheGgufMessage() {
    QTemporaryDir dir;
    const QString path = dir.filePath("notes.gguf");
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("these are notes, not a model\n");
    file.close();
    auto window = makeWindow();
    window->loadModels(path);
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kTimeoutMs);
    QVERIFY(!window->hasModel());
    QVERIFY2(window->message().contains("notes.gguf") && window->message().contains("wrong magic") &&
                 !window->message().contains("llama2.c"),
             qPrintable(window->message()));
  }

  // A model whose weights the CPU backend cannot copy within what the process may still
  // allocate (here a data size limit just above what the window uses) is refused with both
  // sizes named, and the window goes on answering; with the limit lifted it loads.
  void modelBeyondTheMemoryIsAMessage() {
    const QString target = QString(SPECULA_SOURCE_DIR) + "/resources/models/specula-demo-target.gguf";
    auto window = makeWindow();
    {
      // room for the CPU backend's threads' stacks (counted as data) and 40 MB, where the
      // copies of the weights need some 8 MB and the backend keeps 64 MB to spare
      pthread_attr_t attr;
      size_t stack = 8 << 20;
      if (pthread_getattr_default_np(&attr) == 0) {
        pthread_attr_getstacksize(&attr, &stack);
        pthread_attr_destroy(&attr);
      }
      const uint64_t threads = std::max(1u, std::thread::hardware_concurrency());
      specula::test::DataLimit limit(specula::test::data_bytes() + threads * stack + (40ull << 20));
      QVERIFY(limit.ok());
      window->loadModels(target);
      QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kTimeoutMs);
    }
    QVERIFY(!window->hasModel());
    QVERIFY2(window->message().contains("specula-demo-target.gguf") && window->message().contains("needs") &&
                 window->message().contains("ulimit -d"),
             qPrintable(window->message()));
    window->loadModels(target);
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kTimeoutMs);
    QVERIFY2(window->hasModel(), qPrintable(window->message()));
  }

  // The demo pair has no chat template: Chat is refused with one message before any candidate,
  // and Auto prompts it raw, as the status bar says.
  void demoPairHasNoChatTemplate() {
    const QString models = SPECULA_SOURCE_DIR "/resources/models/";
    auto window = makeWindow();
    window->loadModels(models + "specula-demo-target.gguf", {}, models + "specula-demo-draft.gguf");
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kTimeoutMs);
    QVERIFY2(window->hasModel(), qPrintable(window->message()));
    window->promptEditor()->setPlainText(kPrompt);
    window->testsEditor()->setPlainText("assert add(2, 3) == 5\n");
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(2);
    window->findChild<QSpinBox*>("maxTokensSpin")->setValue(24);
    window->findChild<QDoubleSpinBox*>("budgetSpin")->setValue(0);
    auto* style = window->findChild<QComboBox*>("promptStyleCombo");

    style->setCurrentIndex(style->findData("chat"));
    const auto states = [&window] {  // the panes as the last run (or the autosave) left them
      QVector<CandidateState> out;
      for (int i = 0; i < window->grid()->count(); ++i) out << window->grid()->pane(i)->state();
      return out;
    };
    const QVector<CandidateState> before = states();
    window->generate();
    QVERIFY(!window->isRunning());
    QVERIFY2(window->message().contains("needs a model with a chat template"), qPrintable(window->message()));
    QCOMPARE(states(), before);  // no run: no candidate marked failed

    style->setCurrentIndex(style->findData("auto"));
    QSignalSpy used(window->worker(), &specula::ui::EngineWorker::promptStyleUsed);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    QVERIFY2(window->message().isEmpty(), qPrintable(window->message()));
    QCOMPARE(used.count(), 1);
    QCOMPARE(used.at(0).at(0).toString(), QString("raw prompt"));
    QVERIFY(used.at(0).at(2).toString().isEmpty());  // no chat before the code
    QVERIFY2(window->statusText().contains("raw prompt"), qPrintable(window->statusText()));
    for (int i = 0; i < 2; ++i) QVERIFY(window->grid()->pane(i)->state() != CandidateState::Error);
  }

  // The real SmolLM2-135M-Instruct, under Auto: the worker puts the code to it through the
  // chat template its GGUF carries (the ChatML turns, the assistant's answer opened with a
  // fence and the code); the candidates stop before the closing fence and stay completions of
  // the code, shown and copied as prompt + completion.
  void instructModelIsPromptedInChat() {
    SPECULA_REAL_MODEL(smol, "SmolLM2-135M-Instruct.Q4_1.gguf");
    auto window = makeWindow();
    window->loadModels(QString::fromStdString(smol));
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kTimeoutMs);
    QVERIFY2(window->hasModel(), qPrintable(window->message()));
    window->promptEditor()->setPlainText(kPrompt);
    window->testsEditor()->setPlainText("assert add(2, 3) == 5\n");
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(2);
    window->findChild<QSpinBox*>("maxTokensSpin")->setValue(48);
    window->findChild<QDoubleSpinBox*>("temperatureSpin")->setValue(0.3);
    window->findChild<QDoubleSpinBox*>("budgetSpin")->setValue(0);
    window->findChild<QComboBox*>("drafterCombo")->setCurrentIndex(0);  // none: a small run
    auto* style = window->findChild<QComboBox*>("promptStyleCombo");
    style->setCurrentIndex(style->findData("auto"));
    QSignalSpy used(window->worker(), &specula::ui::EngineWorker::promptStyleUsed);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    QVERIFY2(window->message().isEmpty(), qPrintable(window->message()));
    QCOMPARE(used.count(), 1);
    QCOMPARE(used.at(0).at(0).toString(), QString("chat prompt (model's template)"));
    const QString prefix = used.at(0).at(2).toString();
    QVERIFY2(prefix.startsWith("<|im_start|>") && prefix.contains("<|im_start|>user\nComplete the following Python "
                                                                    "function:\n```python\n" + kPrompt + "```") &&
                 prefix.endsWith("<|im_start|>assistant\n```python\n"),
             qPrintable(prefix));
    QVERIFY2(window->statusText().contains("chat prompt (model's template)"), qPrintable(window->statusText()));
    QCOMPARE(window->grid()->prefix(), kPrompt);  // Copy and Save put the prompt before each candidate
    for (int i = 0; i < 2; ++i) {
      const QString text = window->grid()->pane(i)->text();
      qInfo("chat candidate %d (%s): %s", i, qPrintable(stateName(window->grid()->pane(i)->state())), qPrintable(text));
      QVERIFY2(!text.contains("```") && !text.contains("<|im_"), qPrintable(text));  // cut at the fence
      QVERIFY2(!text.startsWith("def add"), qPrintable(text));  // the body, not the code again
      QVERIFY(isVerdict(window->grid()->pane(i)->state()) || window->grid()->pane(i)->state() == CandidateState::Done);
    }
  }

  void unusableDeviceIsAMessageOrWorks() {
    SPECULA_SHARED_FILE(model, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tokenizer, "models/stories260K/tok512.bin");
    bool gpu_usable = true;
    try {
      specula::create_backend(specula::DeviceChoice::Cuda);
    } catch (const std::exception&) {
      gpu_usable = false;
    }
    auto window = makeWindow();
    window->findChild<QComboBox*>("deviceCombo")->setCurrentIndex(2);  // CUDA
    window->loadModels(QString::fromStdString(model), QString::fromStdString(tokenizer));
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kTimeoutMs);
    QCOMPARE(window->hasModel(), gpu_usable);
    if (!gpu_usable) QVERIFY2(window->message().startsWith("Could not load the model"), qPrintable(window->message()));
  }
};

SPECULA_GUI_TEST_MAIN(GuiEngineTest, "specula-gui-engine-test")

#include "test_gui_engine.moc"
