// The acceptance flow with the real engine and a real model (stories260K from ../shared):
// load, four candidates stream, Stop ends the run midway, a second run goes to the end and
// every candidate gets a sandbox verdict and a rank; bad model files and an unusable device
// become messages in the window.
#include <QApplication>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QPushButton>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QtTest>
#include <mutex>

#include "candidate_grid.h"
#include "candidate_pane.h"
#include "code_editor.h"
#include "engine_worker.h"
#include "main_window.h"
#include "problem_browser.h"
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

int main(int argc, char** argv) {
  QTemporaryDir home;  // settings and autosave of this run only
  qputenv("XDG_CONFIG_HOME", (home.path() + "/config").toLocal8Bit());
  qputenv("XDG_DATA_HOME", (home.path() + "/data").toLocal8Bit());
  QApplication app(argc, argv);
  QCoreApplication::setOrganizationName("SpeculaTest");
  QCoreApplication::setApplicationName("specula-gui-engine-test");
  GuiEngineTest test;
  return QTest::qExec(&test, argc, argv);
}

#include "test_gui_engine.moc"
