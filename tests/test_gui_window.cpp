// The main window driven like a user would, against the controlled FakeEngine: four
// candidates stream, Stop ends the run midway, a second run reaches verdicts and ranking;
// settings survive a restart; a killed process loses no prompt text; a bad model file
// becomes a message in the window and keeps the model in use; the models of the home's
// stores fill the model picker; "Fill at cursor" splits the code box at the cursor for models
// with FIM tokens only. A newcomer's first runs: a prompt without its final newline, Enter's
// indentation, "best" only for a candidate that passed, "same behaviour" only between equal
// verdicts, a header that is not cut, Source "Server" unconnected, Copy and Save of the whole
// function, the first screen at 1024x700. The prompt style: saved, a model with a chat
// template prompted in chat under Auto (the status bar says so), and a choice that cannot be
// refused with one message.
#include <QAbstractItemView>
#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QGridLayout>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QScrollBar>
#include <QSettings>
#include <QSpinBox>
#include <QStyleOptionComboBox>
#include <QStandardItemModel>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextDocument>
#include <QTextLayout>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QToolButton>
#include <QtTest>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>

#include "autosave.h"
#include "behaviour_view.h"
#include "candidate_grid.h"
#include "candidate_pane.h"
#include "code_editor.h"
#include "diff_view.h"
#include "fake_engine.h"
#include "file_picker.h"
#include "main_window.h"
#include "model/model_export.h"
#include "problem_browser.h"
#include "python_highlighter.h"
#include "shared_data.h"
#include "small_models.h"
#ifdef SPECULA_HAVE_CHARTS
#include <QtCharts/QValueAxis>

#include "throughput_chart.h"
#endif

using specula::test::FakeEngine;
using specula::ui::CandidateGrid;
using specula::ui::CandidatePane;
using specula::ui::CandidateState;
using specula::ui::MainWindow;

namespace {

constexpr int kRunTimeoutMs = 20000;  // generous: the fake run takes well under a second
constexpr int kPromptLinesAt1024x700 = 8;  // lines of the prompt box at least, in a 1024x700 window
const QString kPrompt = "def add(a: int, b: int) -> int:\n    \"\"\"Return a + b.\"\"\"\n";

std::unique_ptr<MainWindow> makeWindow(std::chrono::milliseconds step = std::chrono::milliseconds(15),
                                       std::chrono::milliseconds load_step = std::chrono::milliseconds(0)) {
  auto window = std::make_unique<MainWindow>(std::make_unique<FakeEngine>(step, load_step));
  window->show();
  return window;
}

QString writeFile(const QTemporaryDir& dir, const QString& name, const QByteArray& bytes) {
  const QString path = dir.filePath(name);
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly)) return {};
  file.write(bytes);
  return path;
}

// Grid position (row * columns + column) of each pane in the layout.
int layoutPosition(CandidateGrid* grid, CandidatePane* pane) {
  auto* layout = static_cast<QGridLayout*>(grid->widget()->layout());
  int row = 0, column = 0, row_span = 0, column_span = 0;
  layout->getItemPosition(layout->indexOf(pane), &row, &column, &row_span, &column_span);
  int columns = 0;
  for (int i = 0; i < layout->count(); ++i) {
    int r, c, rs, cs;
    layout->getItemPosition(i, &r, &c, &rs, &cs);
    columns = std::max(columns, c + 1);
  }
  return row * columns + column;
}

// Puts the editor's cursor at `position`, as a click there would.
void placeCursor(QPlainTextEdit* editor, int position) {
  QTextCursor cursor = editor->textCursor();
  cursor.setPosition(position);
  editor->setTextCursor(cursor);
}

// What the window asked of the engine: the last generation's prompt and suffix, and the
// problem the last candidate was tested as. Written on the engine's threads, read by the test.
struct Requests {
  std::mutex mutex;
  std::string prompt;
  std::optional<std::string> suffix;
  std::optional<std::string> chat_prefix;  // the chat the model reads before the prompt
  std::vector<std::string> stop;
  int generations = 0;
  std::string tested_prefix;
  std::optional<std::string> tested_suffix;
  int tests = 0;  // candidates tested
};

// FakeEngine, recording into `requests` what it is asked.
class RecordingEngine : public FakeEngine {
 public:
  explicit RecordingEngine(std::shared_ptr<Requests> requests)
      : FakeEngine(std::chrono::milliseconds(2)), requests_(std::move(requests)) {}

  specula::SessionResult generate(const specula::GenerationRequest& request, const specula::SessionCallbacks& callbacks,
                                  const std::atomic<bool>* stop) override {
    {
      std::lock_guard lock(requests_->mutex);
      requests_->prompt = request.prompt;
      requests_->suffix = request.suffix;
      requests_->chat_prefix = request.chat_prefix;
      requests_->stop = request.stop;
      ++requests_->generations;
    }
    return FakeEngine::generate(request, callbacks, stop);
  }

  specula::TestResult test(const specula::CandidateTest& candidate, double timeout) override {
    {
      std::lock_guard lock(requests_->mutex);
      requests_->tested_prefix = candidate.problem.code_prefix;
      requests_->tested_suffix = candidate.problem.suffix;
      ++requests_->tests;
    }
    return FakeEngine::test(candidate, timeout);
  }

 private:
  std::shared_ptr<Requests> requests_;
};

// A window on a RecordingEngine with a fake model made of `model` (in `dir`) loaded; null
// when it does not load.
std::unique_ptr<MainWindow> recordingWindow(const std::shared_ptr<Requests>& requests, const QTemporaryDir& dir,
                                            const QByteArray& model = FakeEngine::kMagic) {
  auto window = std::make_unique<MainWindow>(std::make_unique<RecordingEngine>(requests));
  window->show();
  window->loadModels(writeFile(dir, model.contains(FakeEngine::kFimMarker) ? "fim.gguf" : "fake.gguf", model));
  if (!QTest::qWaitFor([&] { return window->hasModel() && !window->isLoading(); }, kRunTimeoutMs)) return nullptr;
  return window;
}

// FakeEngine whose tests fail a completion marked "# wrong" while its behaviour probe still
// gives what a right one gives: the probe did not call it where it goes wrong.
class ProbeMissesEngine : public FakeEngine {
 public:
  ProbeMissesEngine()
      : FakeEngine(std::chrono::milliseconds(2), std::chrono::milliseconds(0),
                   {"    return a + b\n", "    return a + b  # wrong\n"}) {}

  specula::TestResult test(const specula::CandidateTest& candidate, double timeout) override {
    specula::TestResult result = FakeEngine::test(candidate, timeout);
    if (candidate.completion.find("# wrong") != std::string::npos) {
      result.verdict = specula::Verdict::Failed;
      result.detail = "AssertionError: add(1900, 0) == 1900";
    }
    return result;
  }
};

// The process killed while in use: types a prompt, waits for the autosave, reports, waits to die.
int crashChild() {
  auto window = makeWindow();
  window->promptEditor()->setFocus();
  window->promptEditor()->clear();
  QTest::keyClicks(window->promptEditor(), "def crash_safe(x):");
  QTest::keyClick(window->promptEditor(), Qt::Key_Return);  // indents the body
  QTest::keyClicks(window->promptEditor(), "return x");
  for (int i = 0; i < 1500; ++i) {  // 30 s: a loaded machine delays the autosave's timer
    QTest::qWait(20);
    const auto saved = specula::ui::readAutosave(specula::ui::autosavePath());
    if (saved && saved->prompt.endsWith("return x")) {
      std::printf("saved\n");
      std::fflush(stdout);
      QTest::qWait(60000);  // the parent kills us before this ends
      return 0;
    }
  }
  return 3;
}

}  // namespace

class GuiWindowTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // Every test starts from defaults: no autosave, no saved settings.
  void init() {
    QFile::remove(specula::ui::autosavePath());
    QSettings().clear();
  }

  void generateStopRunAgainAndRank() {
    QTemporaryDir dir;
    const QString model = writeFile(dir, "fake.gguf", FakeEngine::kMagic);
    auto window = makeWindow(std::chrono::milliseconds(50));  // the longest candidate streams for 1.6 s
    window->loadModels(model);
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
    QVERIFY(window->statusText().contains("fake backend"));

    window->promptEditor()->setPlainText(kPrompt);
    window->testsEditor()->setPlainText("assert add(2, 3) == 5\n");
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(4);
    auto* generate = window->findChild<QPushButton*>("generateButton");
    auto* stop = window->findChild<QPushButton*>("stopButton");
    QVERIFY(generate->isEnabled());
    QVERIFY(!stop->isEnabled());

    // First run: four panes fill, then Stop ends it midway.
    QTest::mouseClick(generate, Qt::LeftButton);
    CandidateGrid* grid = window->grid();
    QCOMPARE(grid->count(), 4);
    QTRY_VERIFY_WITH_TIMEOUT(
        [&] {
          for (int i = 0; i < 4; ++i)
            if (grid->pane(i)->text().size() < 4) return false;
          return true;
        }(),
        kRunTimeoutMs);
    QVERIFY(stop->isEnabled());
    QCOMPARE(grid->pane(1)->state(), CandidateState::Generating);
    QTest::mouseClick(stop, Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    QCOMPARE(grid->pane(1)->state(), CandidateState::Stopped);  // the longest could not have finished
    QVERIFY(grid->pane(1)->text().size() < int(std::strlen(FakeEngine::kCompletions[1])));

    // Second run, from the keyboard, to the end: verdicts, then panes ordered by rank.
    window->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(window.get()));
    QTest::keyClick(window.get(), Qt::Key_Return, Qt::ControlModifier);
    QVERIFY(window->isRunning());
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    for (int i = 0; i < 4; ++i) QCOMPARE(grid->pane(i)->text(), QString(FakeEngine::kCompletions[i]));
    QCOMPARE(grid->pane(0)->state(), CandidateState::Failed);
    QCOMPARE(grid->pane(1)->state(), CandidateState::Passed);
    QCOMPARE(grid->pane(2)->state(), CandidateState::Timeout);
    QCOMPARE(grid->pane(3)->state(), CandidateState::Passed);
    QCOMPARE(grid->order(), (QVector<int>{3, 1, 0, 2}));
    QCOMPARE(layoutPosition(grid, grid->pane(3)), 0);
    QCOMPARE(layoutPosition(grid, grid->pane(2)), 3);
    QVERIFY(grid->pane(3)->findChildren<QLabel*>().first()->text().contains("best"));
    QVERIFY(grid->pane(3)->findChild<QLabel*>("numbers")->text().contains("acc 50%"));
    QVERIFY(window->statusText().contains("tok/s"));
#ifdef SPECULA_HAVE_CHARTS
    // The chart shows each candidate's tokens and acceptance, however short the run.
    auto* chart = window->findChild<specula::ui::ThroughputChart*>("throughputChart");
    QCOMPARE(chart->candidates(), 4);
    for (int i = 0; i < 4; ++i) {
      QCOMPARE(chart->tokens(i), double(std::strlen(FakeEngine::kCompletions[i])));
      QCOMPARE(chart->acceptance(i), 50.0);
    }
#endif
  }

  // Eight candidates of four texts: each text once, in the pane of its best-ranked
  // candidate with its count; panes that behave alike say so; the behaviour view shows the
  // probe's inputs and each group's outputs.
  void duplicatesCollapseAndGroupsShow() {
    QTemporaryDir dir;
    auto window = makeWindow(std::chrono::milliseconds(5));
    window->loadModels(writeFile(dir, "fake.gguf", FakeEngine::kMagic));
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
    window->promptEditor()->setPlainText(kPrompt);
    window->testsEditor()->setPlainText("assert add(2, 3) == 5\n");
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(8);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    CandidateGrid* grid = window->grid();
    // Passed (3 and 7, then 1 and 5: the same finish order), then the subtractions, whose
    // group of two outranks the loops.
    QCOMPARE(grid->order(), (QVector<int>{3, 7, 1, 5, 0, 4, 2, 6}));
    QCOMPARE(grid->shownCount(), 4);
    for (int i = 0; i < 8; ++i) {
      QCOMPARE(grid->isCollapsed(i), i >= 4);
      QCOMPARE(grid->pane(i)->isHidden(), i >= 4);
    }
    const int expected_position[4] = {2, 1, 3, 0};
    for (int i = 0; i < 4; ++i) {
      CandidatePane* pane = grid->pane(i);
      QCOMPARE(layoutPosition(grid, pane), expected_position[i]);
      auto* count = pane->findChild<QLabel*>("duplicateCount");
      QVERIFY(count->isVisible());
      QCOMPARE(count->text(), QString("×2"));
      QCOMPARE(count->toolTip(), QString("Also the text of #%1").arg(i + 5));
      QVERIFY(pane->findChildren<QLabel*>().first()->text().contains(QString("rank %1").arg(expected_position[i] + 1)));
    }
    auto badge = [&](int i) { return grid->pane(i)->findChild<QLabel*>("groupBadge"); };
    QCOMPARE(badge(3)->text(), QString("same behaviour as #2"));
    QCOMPARE(badge(1)->text(), QString("same behaviour as #4"));
    QVERIFY(badge(1)->isVisible() && badge(3)->isVisible());
    QVERIFY(!badge(0)->isVisible() && !badge(2)->isVisible());
    QVERIFY(grid->pane(0)->findChild<QLabel*>("note")->text().startsWith("failed"));

    auto* button = grid->pane(3)->findChild<QToolButton*>("behaviourButton");
    QVERIFY(button->isEnabled());
    QTest::mouseClick(button, Qt::LeftButton);
    auto* view = window->findChild<specula::ui::BehaviourView*>("behaviourView");
    QVERIFY(view && view->isVisible());
    QTableWidget* table = view->table();
    QCOMPARE(table->rowCount(), 1);
    QCOMPARE(table->columnCount(), 3);  // adds, subtracts, loops
    QCOMPARE(table->verticalHeaderItem(0)->text(), QString("add(2, 3)"));
    QCOMPARE(table->horizontalHeaderItem(0)->text(), QString("#4, #8, #2, #6"));
    QCOMPARE(table->item(0, 0)->text(), QString("5"));
    QCOMPARE(table->item(0, 1)->text(), QString("-1"));
    QCOMPARE(table->horizontalHeaderItem(2)->text(), QString("#3, #7"));
    QCOMPARE(view->selectedGroup(), 0);
    view->close();

    // The next run starts with every pane back.
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(8);
    window->generate();
    QCOMPARE(grid->shownCount(), 8);
    QVERIFY(!grid->pane(5)->isHidden());
    QVERIFY(!badge(3)->isVisible());
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
  }

  void keyboardGeneratesAndStops() {
    QTemporaryDir dir;
    auto window = makeWindow(std::chrono::milliseconds(100));  // a run of seconds
    window->loadModels(writeFile(dir, "fake.gguf", FakeEngine::kMagic));
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
    window->promptEditor()->setPlainText(kPrompt);
    window->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(window.get()));
    window->promptEditor()->setFocus();
    QTest::keyClick(window->promptEditor(), Qt::Key_Return, Qt::ControlModifier);
    QVERIFY(window->isRunning());
    QCOMPARE(window->promptEditor()->toPlainText(), kPrompt);  // the shortcut typed nothing
    QTRY_VERIFY_WITH_TIMEOUT(!window->grid()->pane(0)->text().isEmpty(), kRunTimeoutMs);
    QTest::keyClick(window->promptEditor(), Qt::Key_Escape);
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    QCOMPARE(window->grid()->pane(0)->state(), CandidateState::Stopped);
  }

  void budgetEndsTheRun() {
    QTemporaryDir dir;
    auto window = makeWindow(std::chrono::milliseconds(50));  // every candidate needs 0.85 s or more
    window->loadModels(writeFile(dir, "fake.gguf", FakeEngine::kMagic));
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
    window->promptEditor()->setPlainText(kPrompt);
    window->testsEditor()->setPlainText("assert add(2, 3) == 5\n");
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(4);
    window->findChild<QDoubleSpinBox*>("budgetSpin")->setValue(0.3);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    // the budget keeps its decimals in the progress bar: "… / 0.3 s", never "… / 0 s"
    QVERIFY2(window->statusText().contains(" / 0.3 s"), qPrintable(window->statusText()));
    for (int i = 0; i < 4; ++i) {
      QCOMPARE(window->grid()->pane(i)->state(), CandidateState::Budget);  // cut off, so not tested
      QVERIFY(!window->grid()->pane(i)->text().isEmpty());
    }
  }

  void rankingKeepsScrollPosition() {
    CandidateGrid grid;
    grid.resize(800, 600);
    grid.show();
    grid.setCount(3);
    QString lines;
    for (int i = 0; i < 200; ++i) lines += QStringLiteral("x = %1\n").arg(i);
    grid.pane(2)->setText(lines);
    QScrollBar* bar = grid.pane(2)->editor()->verticalScrollBar();
    QTRY_VERIFY(bar->maximum() > 60);
    bar->setValue(50);
    grid.applyRanking({2, 0, 1});
    QCOMPARE(grid.order(), (QVector<int>{2, 0, 1}));
    QCOMPARE(layoutPosition(&grid, grid.pane(2)), 0);
    QCOMPARE(bar->value(), 50);
    QCOMPARE(grid.pane(2)->text(), lines);
  }

  void streamingDoesNotMoveAScrolledView() {
    CandidatePane pane(0);
    pane.resize(400, 300);
    pane.show();
    QString lines;
    for (int i = 0; i < 100; ++i) lines += QStringLiteral("y = %1\n").arg(i);
    pane.appendText(lines, 100, 0, 0, 1.0);
    QScrollBar* bar = pane.editor()->verticalScrollBar();
    bar->setValue(10);
    pane.appendText("z = 1\nz = 2\n", 102, 0, 0, 1.0);
    QCOMPARE(bar->value(), 10);
    bar->setValue(bar->maximum());
    pane.appendText("z = 3\nz = 4\n", 104, 0, 0, 1.0);
    QCOMPARE(bar->value(), bar->maximum());  // following the end keeps following it
  }

  void tabInsertsFourSpaces() {
    auto window = makeWindow();
    window->promptEditor()->clear();
    window->promptEditor()->setFocus();
    QTest::keyClick(window->promptEditor(), Qt::Key_Tab);
    QTest::keyClicks(window->promptEditor(), "pass");
    QCOMPARE(window->promptEditor()->toPlainText(), QString("    pass"));
    // Ctrl+Tab leaves the editor for the next field in the tab order: the tests.
    window->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(window.get()));
    window->promptEditor()->setFocus();
    QTest::keyClick(window->promptEditor(), Qt::Key_Tab, Qt::ControlModifier);
    QCOMPARE(QApplication::focusWidget(), window->testsEditor());
    QCOMPARE(window->promptEditor()->toPlainText(), QString("    pass"));
    QTest::keyClick(window->testsEditor(), Qt::Key_Backtab, Qt::ControlModifier | Qt::ShiftModifier);
    QCOMPARE(QApplication::focusWidget(), window->promptEditor());
  }

  void settingsSurviveRestart() {
    {
      auto window = makeWindow();
      window->findChild<QSpinBox*>("candidatesSpin")->setValue(7);
      window->findChild<QDoubleSpinBox*>("temperatureSpin")->setValue(0.35);
      window->findChild<QDoubleSpinBox*>("budgetSpin")->setValue(12);
      window->findChild<QComboBox*>("drafterCombo")->setCurrentIndex(0);
      window->findChild<QComboBox*>("deviceCombo")->setCurrentIndex(1);
      window->close();
    }
    auto window = makeWindow();
    QCOMPARE(window->findChild<QSpinBox*>("candidatesSpin")->value(), 7);
    QCOMPARE(window->findChild<QDoubleSpinBox*>("temperatureSpin")->value(), 0.35);
    QCOMPARE(window->findChild<QDoubleSpinBox*>("budgetSpin")->value(), 12.0);
    QCOMPARE(window->findChild<QComboBox*>("drafterCombo")->currentData().toString(), QString("none"));
    QCOMPARE(window->findChild<QComboBox*>("deviceCombo")->currentIndex(), 1);
  }

  // The Models panel's prompt style is saved with the other model options.
  void promptStyleSurvivesRestart() {
    {
      auto window = makeWindow();
      auto* style = window->findChild<QComboBox*>("promptStyleCombo");
      QCOMPARE(style->currentData().toString(), QString("auto"));  // the default
      style->setCurrentIndex(style->findData("chat"));
      window->close();
    }
    {
      auto window = makeWindow();
      auto* style = window->findChild<QComboBox*>("promptStyleCombo");
      QCOMPARE(style->currentData().toString(), QString("chat"));
      style->setCurrentIndex(style->findData("raw"));
      window->close();
    }
    auto window = makeWindow();
    QCOMPARE(window->findChild<QComboBox*>("promptStyleCombo")->currentData().toString(), QString("raw"));
  }

  // A model with a chat template, under Auto: the engine gets the chat around the code, as
  // the template renders it (ChatML: the user's request with the code in a fence, then the
  // assistant's turn opened with the fence and the code), and the closing fence as a stop;
  // the candidates, their tests and Copy stay prompt + completion. Raw and filling at the
  // cursor send the code alone; the status bar says which style each run used.
  void chatTemplateModelIsPromptedInChat() {
    QTemporaryDir dir;
    auto requests = std::make_shared<Requests>();
    auto window = recordingWindow(
        requests, dir, QByteArray(FakeEngine::kMagic) + FakeEngine::kFimMarker + FakeEngine::kChatMarker);
    QVERIFY(window);
    auto* style = window->findChild<QComboBox*>("promptStyleCombo");
    QVERIFY2(style->toolTip().contains("has a chat template"), qPrintable(style->toolTip()));
    window->promptEditor()->setPlainText(kPrompt);
    window->testsEditor()->setPlainText("assert add(2, 3) == 5\n");
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(4);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    QVERIFY2(window->message().isEmpty(), qPrintable(window->message()));
    const std::string code = kPrompt.toStdString();
    {
      std::lock_guard lock(requests->mutex);
      QCOMPARE(requests->prompt, code);
      QVERIFY(requests->chat_prefix.has_value());
      QCOMPARE(*requests->chat_prefix, "<|im_start|>user\nComplete the following Python function:\n```python\n" + code +
                                           "```<|im_end|>\n<|im_start|>assistant\n```python\n");
      QVERIFY(std::find(requests->stop.begin(), requests->stop.end(), "```") != requests->stop.end());
      QCOMPARE(QString::fromStdString(requests->tested_prefix), kPrompt);
    }
    auto* label = window->findChild<QLabel*>("promptStyleLabel");
    QVERIFY2(window->statusText().contains("chat prompt (model's template)"), qPrintable(window->statusText()));
    QVERIFY2(label->toolTip().contains("<|im_start|>assistant"), qPrintable(label->toolTip()));
    QCOMPARE(window->grid()->prefix(), kPrompt);  // Copy and Save: the prompt + each candidate
    QCOMPARE(window->grid()->pane(3)->state(), CandidateState::Passed);

    style->setCurrentIndex(style->findData("raw"));
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    {
      std::lock_guard lock(requests->mutex);
      QVERIFY(!requests->chat_prefix.has_value());
      QVERIFY(std::find(requests->stop.begin(), requests->stop.end(), "```") == requests->stop.end());
    }
    QVERIFY2(window->statusText().contains("raw prompt"), qPrintable(window->statusText()));

    // Auto fills at the cursor raw: a chat cannot hold the hole
    style->setCurrentIndex(style->findData("auto"));
    placeCursor(window->promptEditor(), int(kPrompt.size()));
    window->findChild<QCheckBox*>("fillAtCursorCheck")->setChecked(true);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    QVERIFY2(window->message().isEmpty(), qPrintable(window->message()));
    {
      std::lock_guard lock(requests->mutex);
      QVERIFY(requests->suffix.has_value());
      QVERIFY(!requests->chat_prefix.has_value());
    }
    QVERIFY2(label->toolTip().contains("filling in the middle"), qPrintable(label->toolTip()));
  }

  // Chat where it cannot be (a model without a template, filling at the cursor, a server):
  // one message in the window, no request to the engine, the last run's panes as they were.
  void chatThatCannotBeIsOneMessage() {
    QTemporaryDir dir;
    auto requests = std::make_shared<Requests>();
    auto window = recordingWindow(requests, dir, QByteArray(FakeEngine::kMagic) + FakeEngine::kFimMarker);
    QVERIFY(window);
    auto* style = window->findChild<QComboBox*>("promptStyleCombo");
    QVERIFY2(style->toolTip().contains("has no chat template"), qPrintable(style->toolTip()));
    window->promptEditor()->setPlainText(kPrompt);
    window->testsEditor()->setPlainText("assert add(2, 3) == 5\n");
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(2);
    window->generate();  // Auto: raw, as the model has no template
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    QVERIFY2(window->statusText().contains("raw prompt"), qPrintable(window->statusText()));
    const auto state_of = [&](int i) { return window->grid()->pane(i)->state(); };
    const CandidateState first = state_of(0), second = state_of(1);
    QCOMPARE(requests->generations, 1);

    style->setCurrentIndex(style->findData("chat"));
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(4);
    window->generate();
    QVERIFY(!window->isRunning());
    QVERIFY2(window->message().contains("chat template") && window->message().contains("Auto or Raw"),
             qPrintable(window->message()));
    QCOMPARE(window->grid()->count(), 2);  // the last run's panes, not four failed ones
    QCOMPARE(state_of(0), first);
    QCOMPARE(state_of(1), second);
    // and so is "Run all" of the problem browser: one message, not one per task
    window->showMessage({});
    specula::Problem problem;
    problem.task_id = "add";
    problem.prompt = kPrompt.toStdString();
    Q_EMIT window->openProblems()->runAllRequested({problem, problem});
    QVERIFY(!window->isRunning());
    QVERIFY2(window->message().contains("chat template"), qPrintable(window->message()));

    QTemporaryDir chat_dir;
    window->loadModels(writeFile(chat_dir, "chat.gguf", QByteArray(FakeEngine::kMagic) + FakeEngine::kFimMarker +
                                                             FakeEngine::kChatMarker));
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
    placeCursor(window->promptEditor(), int(kPrompt.size()));
    window->findChild<QCheckBox*>("fillAtCursorCheck")->setChecked(true);
    window->generate();
    QVERIFY(!window->isRunning());
    QVERIFY2(window->message().contains("cannot fill in the middle"), qPrintable(window->message()));

    window->connectServer("http://fake.test", {}, {}, false);
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
    window->findChild<QCheckBox*>("fillAtCursorCheck")->setChecked(false);
    window->generate();
    QVERIFY(!window->isRunning());
    QVERIFY2(window->message().contains("server"), qPrintable(window->message()));
    QCOMPARE(requests->generations, 1);
  }

  // A draft model given with the target (as the demo pair is) selects the "draft model"
  // drafter; loading the same draft again keeps the drafter the user has chosen since.
  void newDraftModelSelectsItsDrafter() {
    QTemporaryDir dir;
    const QString model = writeFile(dir, "fake.gguf", FakeEngine::kMagic);
    const QString draft = writeFile(dir, "draft.gguf", FakeEngine::kMagic);
    auto window = makeWindow();
    auto* drafter = window->findChild<QComboBox*>("drafterCombo");
    QCOMPARE(drafter->currentData().toString(), QString("ngram"));
    window->loadModels(model, {}, draft);
    QCOMPARE(drafter->currentData().toString(), QString("model"));
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);

    drafter->setCurrentIndex(drafter->findData("none"));
    window->loadModels(model, {}, draft);
    QCOMPARE(drafter->currentData().toString(), QString("none"));
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
  }

  void killedProcessLosesNoPrompt() {
    QProcess child;
    child.start(QCoreApplication::applicationFilePath(), {"crash-child"});
    QVERIFY(child.waitForStarted());
    QByteArray output;
    QTRY_VERIFY_WITH_TIMEOUT((output += child.readAllStandardOutput()).contains("saved") ||
                                 child.state() == QProcess::NotRunning,
                             kRunTimeoutMs);
    QVERIFY2(child.state() == QProcess::Running,  // alive until killed: nothing ran at exit
             qPrintable(QString("exit %1: %2").arg(child.exitCode()).arg(QString::fromUtf8(child.readAllStandardError()))));
    child.kill();
    QVERIFY(child.waitForFinished());
    auto window = makeWindow();
    QCOMPARE(window->promptEditor()->toPlainText(), QString("def crash_safe(x):\n    return x"));
  }

  // A restart shows the last run as it was: texts, verdicts and their reasons, tokens, ranks,
  // merged duplicates, behaviour badges and the behaviour view's outputs.
  void lastResultsAreRestored() {
    QTemporaryDir dir;
    const QString model = writeFile(dir, "fake.gguf", FakeEngine::kMagic);
    struct Shown {
      QString text, note, numbers, badge, duplicates;
      CandidateState state;
      bool hidden, behaviour;
      bool operator==(const Shown&) const = default;
    };
    auto shown = [](const MainWindow& window) {
      QVector<Shown> out;
      for (int i = 0; i < window.grid()->count(); ++i) {
        CandidatePane* pane = window.grid()->pane(i);
        out.push_back({pane->text(), pane->findChild<QLabel*>("note")->text(),
                       pane->findChildren<QLabel*>().first()->text() + " " + QString::number(pane->tokens()),
                       pane->findChild<QLabel*>("groupBadge")->text(),
                       pane->findChild<QLabel*>("duplicateCount")->text(), pane->state(), pane->isHidden(),
                       pane->findChild<QToolButton*>("behaviourButton")->isEnabled()});
      }
      return out;
    };
    QVector<Shown> before;
    {
      auto window = makeWindow(std::chrono::milliseconds(5));
      window->loadModels(model);
      QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
      window->promptEditor()->setPlainText(kPrompt);
      window->testsEditor()->setPlainText("assert add(2, 3) == 5\n");
      window->findChild<QSpinBox*>("candidatesSpin")->setValue(8);
      window->generate();
      QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
      before = shown(*window);
    }
    auto window = makeWindow();
    QCOMPARE(window->grid()->count(), 8);
    QCOMPARE(window->grid()->pane(3)->text(), QString(FakeEngine::kCompletions[3]));
    QCOMPARE(window->grid()->pane(3)->state(), CandidateState::Passed);
    QCOMPARE(window->grid()->order().front(), 3);
    QVERIFY(window->grid()->pane(3)->tokens() > 0);
    QCOMPARE(window->grid()->shownCount(), 4);  // duplicates merged again
    const QVector<Shown> after = shown(*window);
    for (int i = 0; i < 8; ++i) {
      QCOMPARE(after[i].text, before[i].text);
      QCOMPARE(after[i].note, before[i].note);
      QCOMPARE(after[i].numbers, before[i].numbers);
      QCOMPARE(after[i].badge, before[i].badge);
      QCOMPARE(after[i].duplicates, before[i].duplicates);
      QCOMPARE(after[i].state, before[i].state);
      QCOMPARE(after[i].hidden, before[i].hidden);
      QCOMPARE(after[i].behaviour, before[i].behaviour);
    }
    QCOMPARE(window->grid()->pane(3)->findChild<QLabel*>("groupBadge")->text(), QString("same behaviour as #2"));
    // Copy gives the whole function, as it did before the restart
    QTest::mouseClick(window->grid()->pane(3)->findChild<QToolButton*>("copyButton"), Qt::LeftButton);
    QCOMPARE(QApplication::clipboard()->text(), kPrompt + FakeEngine::kCompletions[3]);
  }

  // With "Fill at cursor" on a model with FIM tokens, the code box splits at the cursor: the
  // text before it is the prompt, the text after it the suffix, both to the engine and into
  // the problem each candidate is tested as; the panes show the candidates alone. Unchecked,
  // the whole box is the prompt.
  void fillAtCursorSendsPrefixAndSuffix() {
    QTemporaryDir dir;
    auto requests = std::make_shared<Requests>();
    auto window = recordingWindow(requests, dir, QByteArray(FakeEngine::kMagic) + FakeEngine::kFimMarker);
    QVERIFY(window);
    auto* fill = window->findChild<QCheckBox*>("fillAtCursorCheck");
    QVERIFY(fill->isEnabled());

    const QString suffix = "\n\nprint(add(2, 3))\n";
    window->promptEditor()->setPlainText(kPrompt + suffix);
    placeCursor(window->promptEditor(), int(kPrompt.size()));
    QTest::mouseClick(fill, Qt::LeftButton);
    QVERIFY(fill->isChecked());
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(4);
    QTest::mouseClick(window->findChild<QPushButton*>("generateButton"), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    QVERIFY2(window->message().isEmpty(), qPrintable(window->message()));
    {
      std::lock_guard lock(requests->mutex);
      QCOMPARE(QString::fromStdString(requests->prompt), kPrompt);
      QVERIFY(requests->suffix.has_value());
      QCOMPARE(QString::fromStdString(*requests->suffix), suffix);
      QCOMPARE(requests->tests, 4);
      QCOMPARE(QString::fromStdString(requests->tested_prefix), kPrompt);
      QVERIFY(requests->tested_suffix.has_value());
      QCOMPARE(QString::fromStdString(*requests->tested_suffix), suffix);
    }
    for (int i = 0; i < 4; ++i) QCOMPARE(window->grid()->pane(i)->text(), QString(FakeEngine::kCompletions[i]));
    QCOMPARE(window->grid()->pane(3)->state(), CandidateState::Passed);

    QTest::mouseClick(fill, Qt::LeftButton);
    QVERIFY(!fill->isChecked());
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    std::lock_guard lock(requests->mutex);
    QCOMPARE(QString::fromStdString(requests->prompt), kPrompt + suffix);
    QVERIFY(!requests->suffix.has_value());
    QVERIFY(!requests->tested_suffix.has_value());
  }

  // "Fill at cursor" is there only for a model with FIM tokens; otherwise it is disabled, its
  // tooltip says why, and a check left on from before sends no suffix.
  void fillAtCursorNeedsFimTokens() {
    QTemporaryDir dir;
    auto requests = std::make_shared<Requests>();
    auto window = std::make_unique<MainWindow>(std::make_unique<RecordingEngine>(requests));
    window->show();
    auto* fill = window->findChild<QCheckBox*>("fillAtCursorCheck");
    QVERIFY(!fill->isEnabled());
    QVERIFY2(fill->toolTip().contains("Load a model"), qPrintable(fill->toolTip()));

    window->loadModels(writeFile(dir, "fim.gguf", QByteArray(FakeEngine::kMagic) + FakeEngine::kFimMarker));
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
    QVERIFY(fill->isEnabled());
    fill->setChecked(true);

    window->loadModels(writeFile(dir, "plain.gguf", FakeEngine::kMagic));
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
    QVERIFY(!fill->isEnabled());
    QVERIFY2(fill->toolTip().contains("no fill-in-the-middle tokens"), qPrintable(fill->toolTip()));
    window->promptEditor()->setPlainText(kPrompt + "\nprint(add(2, 3))\n");
    placeCursor(window->promptEditor(), int(kPrompt.size()));
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    QVERIFY2(window->message().isEmpty(), qPrintable(window->message()));
    std::lock_guard lock(requests->mutex);
    QCOMPARE(QString::fromStdString(requests->prompt), kPrompt + "\nprint(add(2, 3))\n");
    QVERIFY(!requests->suffix.has_value());
  }

  // A prompt typed without its final newline (`def add(a, b):`) is sent, and tested, with
  // one: the candidates write a body instead of continuing the signature line.
  void promptGetsItsFinalNewline() {
    QTemporaryDir dir;
    auto requests = std::make_shared<Requests>();
    auto window = recordingWindow(requests, dir);
    QVERIFY(window);
    window->promptEditor()->setPlainText("def add(a, b):");
    window->testsEditor()->setPlainText("assert add(2, 3) == 5\n");
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(4);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    std::lock_guard lock(requests->mutex);
    QCOMPARE(QString::fromStdString(requests->prompt), QString("def add(a, b):\n"));
    QCOMPARE(QString::fromStdString(requests->tested_prefix), QString("def add(a, b):\n"));
    QCOMPARE(window->promptEditor()->toPlainText(), QString("def add(a, b):"));  // the editor is the user's
  }

  // A request written in words starts no run that would fail every candidate: the window
  // offers the start of a function that asks for it, and one click puts it in the prompt.
  void requestInWordsIsOfferedAFunction() {
    QTemporaryDir dir;
    auto requests = std::make_shared<Requests>();
    auto window = recordingWindow(requests, dir);
    QVERIFY(window);
    window->promptEditor()->setPlainText("write a function that reverses words in a sentence");
    window->testsEditor()->clear();
    window->generate();
    QVERIFY(!window->isRunning());
    QVERIFY2(window->message().contains("reads as a request in words"), qPrintable(window->message()));
    auto* use = window->findChild<QToolButton*>("useSuggestionButton");
    QVERIFY(use->isVisible());
    QTest::mouseClick(use, Qt::LeftButton);
    const QString start = "def reverse_words_sentence(sentence: str):\n"
                          "    \"\"\"Write a function that reverses words in a sentence.\"\"\"\n";
    QCOMPARE(window->promptEditor()->toPlainText(), start);
    QVERIFY(window->message().isEmpty());
    window->generate();  // now a function: it runs
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    std::lock_guard lock(requests->mutex);
    QCOMPARE(QString::fromStdString(requests->prompt), start);
  }

  // Enter after a line ending with ':' indents one level; Enter inside a body keeps its
  // indentation, so that a docstring and the lines after it stay in the function.
  void enterIndentsAfterAColonAndKeepsIndentation() {
    auto window = makeWindow();
    window->promptEditor()->clear();
    window->promptEditor()->setFocus();
    QTest::keyClicks(window->promptEditor(), "def is_leap(year):");
    QTest::keyClick(window->promptEditor(), Qt::Key_Return);
    QTest::keyClicks(window->promptEditor(), "\"\"\"Whether year is a leap year.\"\"\"");
    QTest::keyClick(window->promptEditor(), Qt::Key_Return);
    QTest::keyClicks(window->promptEditor(), "if year % 4:");
    QTest::keyClick(window->promptEditor(), Qt::Key_Enter, Qt::KeypadModifier);
    QTest::keyClicks(window->promptEditor(), "return False");
    QCOMPARE(window->promptEditor()->toPlainText(),
             QString("def is_leap(year):\n    \"\"\"Whether year is a leap year.\"\"\"\n    if year % 4:\n        return False"));
  }

  // When no candidate passed, the first one is "closest", never "★ … best".
  void nothingPassedIsClosestNotBest() {
    QTemporaryDir dir;
    auto window = std::make_unique<MainWindow>(std::make_unique<FakeEngine>(
        std::chrono::milliseconds(2), std::chrono::milliseconds(0),
        std::vector<std::string>{"    return a - b\n", "    return b - a\n"}));
    window->show();
    window->loadModels(writeFile(dir, "fake.gguf", FakeEngine::kMagic));
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
    window->promptEditor()->setPlainText(kPrompt);
    window->testsEditor()->setPlainText("assert add(2, 3) == 5\n");
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(2);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    CandidateGrid* grid = window->grid();
    QCOMPARE(grid->pane(0)->state(), CandidateState::Failed);
    QCOMPARE(grid->pane(1)->state(), CandidateState::Failed);
    CandidatePane* top = grid->pane(grid->order().front());
    const QString title = top->findChild<QLabel*>("title")->text();
    QVERIFY2(title.contains("closest") && !title.contains("best") && !title.contains(QChar(0x2605)), qPrintable(title));
    QVERIFY(!top->isBest());
  }

  // A candidate that fails the tests is never "same behaviour as" one that passes them, even
  // when the behaviour probe found their outputs alike.
  void sameBehaviourNeedsTheSameVerdict() {
    QTemporaryDir dir;
    auto window = std::make_unique<MainWindow>(std::make_unique<ProbeMissesEngine>());
    window->show();
    window->loadModels(writeFile(dir, "fake.gguf", FakeEngine::kMagic));
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
    window->promptEditor()->setPlainText(kPrompt);
    window->testsEditor()->setPlainText("assert add(2, 3) == 5\n");
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(2);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    CandidateGrid* grid = window->grid();
    QCOMPARE(grid->pane(0)->state(), CandidateState::Passed);
    QCOMPARE(grid->pane(1)->state(), CandidateState::Failed);
    QCOMPARE(grid->shownCount(), 2);
    for (int i = 0; i < 2; ++i) {
      auto* badge = grid->pane(i)->findChild<QLabel*>("groupBadge");
      QVERIFY2(!badge->isVisible(), qPrintable(QString("pane %1: %2").arg(i).arg(badge->text())));
    }
    QVERIFY(grid->pane(0)->isBest());
    // nor does the behaviour view put them in one column
    specula::ui::BehaviourView* view = window->openBehaviour(1);
    QVERIFY(view);
    QCOMPARE(view->table()->columnCount(), 2);
    QCOMPARE(view->selectedGroup(), 1);
  }

  // At a pane's narrowest, the header shows its whole title, rank, best mark and count.
  void paneHeaderIsNotCut() {
    CandidatePane pane(5);
    pane.resize(pane.minimumWidth(), 300);
    pane.show();
    QVERIFY(QTest::qWaitForWindowExposed(&pane));
    pane.setState(CandidateState::Passed, "passed: 3/3 asserts");
    pane.setDuplicates({6, 7});
    pane.setRank(1, true);
    QCOMPARE(pane.width(), pane.minimumWidth());
    auto* title = pane.findChild<QLabel*>("title");
    QVERIFY(title->text().contains("best"));
    for (QLabel* label : {title, pane.findChild<QLabel*>("state"), pane.findChild<QLabel*>("duplicateCount")})
      QTRY_VERIFY2(label->width() >= label->sizeHint().width(),
                   qPrintable(QString("%1: %2 of %3 px").arg(label->text()).arg(label->width()).arg(label->sizeHint().width())));
  }

  // Source "Server" without a connected server: Generate says so and runs nothing, not even
  // on the model files loaded before. The key's label names its field ("API key:").
  void serverSourceNeverFallsBackToLocal() {
    QTemporaryDir dir;
    auto requests = std::make_shared<Requests>();
    auto window = recordingWindow(requests, dir);
    QVERIFY(window);
    auto* source = window->findChild<QComboBox*>("sourceCombo");
    source->setCurrentIndex(source->findData("server"));
    Q_EMIT source->activated(source->currentIndex());
    window->promptEditor()->setPlainText(kPrompt);
    window->generate();
    QVERIFY(!window->isRunning());
    QVERIFY2(window->message().contains("no server is connected"), qPrintable(window->message()));
    {
      std::lock_guard lock(requests->mutex);
      QVERIFY(requests->prompt.empty());
    }
    auto* key = window->findChild<QLineEdit*>("serverKeyEdit");
    QLabel* key_label = nullptr;
    for (QLabel* label : window->findChild<QWidget*>("serverPanel")->findChildren<QLabel*>())
      if (label->buddy() == key) key_label = label;
    QVERIFY(key_label);
    QCOMPARE(key_label->text(), QString("API &key:"));  // shown as "API key:", K underlined
  }

  // Copy and Save give the whole function: the prompt and the completion; filling in the
  // middle, the code before, the completion and the code after.
  void copyAndSaveGiveTheWholeFunction() {
    QTemporaryDir dir;
    auto window = makeWindow(std::chrono::milliseconds(2));
    window->loadModels(writeFile(dir, "fim.gguf", QByteArray(FakeEngine::kMagic) + FakeEngine::kFimMarker));
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
    window->promptEditor()->setPlainText(kPrompt);
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(4);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    CandidatePane* pane = window->grid()->pane(3);
    QTest::mouseClick(pane->findChild<QToolButton*>("copyButton"), Qt::LeftButton);
    QCOMPARE(QApplication::clipboard()->text(), kPrompt + FakeEngine::kCompletions[3]);
    const QString path = dir.filePath("add.py");
    QVERIFY(pane->saveTo(path));
    QFile saved(path);
    QVERIFY(saved.open(QIODevice::ReadOnly));
    QCOMPARE(QString::fromUtf8(saved.readAll()), kPrompt + FakeEngine::kCompletions[3]);

    const QString suffix = "\nprint(add(2, 3))\n";
    window->promptEditor()->setPlainText(kPrompt + suffix);
    placeCursor(window->promptEditor(), int(kPrompt.size()));
    window->findChild<QCheckBox*>("fillAtCursorCheck")->setChecked(true);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    QTest::mouseClick(pane->findChild<QToolButton*>("copyButton"), Qt::LeftButton);
    QCOMPARE(QApplication::clipboard()->text(), kPrompt + FakeEngine::kCompletions[3] + suffix);
  }

  // A file that is no model leaves the model in use loaded and selected, with its draft and
  // drafter; the failed path is not among the recent files. Loading a target without a draft
  // leaves no "draft model" drafter that Generate would refuse.
  void badModelFileKeepsTheWorkingOne() {
    QTemporaryDir dir;
    const QString model = writeFile(dir, "fake.gguf", FakeEngine::kMagic);
    const QString draft = writeFile(dir, "draft.gguf", FakeEngine::kMagic);
    const QString broken = writeFile(dir, "broken.gguf", "this is not a model\n");
    auto window = makeWindow(std::chrono::milliseconds(2));
    auto* drafter = window->findChild<QComboBox*>("drafterCombo");
    auto* model_picker = window->findChild<specula::ui::FilePicker*>("modelPicker");
    auto* draft_picker = window->findChild<specula::ui::FilePicker*>("draftPicker");
    window->loadModels(model, {}, draft);
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);

    window->loadModels(broken, {}, {});
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kRunTimeoutMs);
    QVERIFY(window->hasModel());
    QVERIFY2(window->message().contains("not a model file") && window->message().contains("Still using fake.gguf"),
             qPrintable(window->message()));
    QCOMPARE(model_picker->path(), QFileInfo(model).absoluteFilePath());
    QCOMPARE(draft_picker->path(), QFileInfo(draft).absoluteFilePath());
    QCOMPARE(drafter->currentData().toString(), QString("model"));
    QVERIFY(!QSettings().value("recent/models").toStringList().contains(QFileInfo(broken).absoluteFilePath()));
    QVERIFY(QSettings().value("recent/models").toStringList().contains(QFileInfo(model).absoluteFilePath()));
    QCOMPARE(model_picker->findChild<QComboBox*>()->findData(QFileInfo(broken).absoluteFilePath()), -1);
    window->promptEditor()->setPlainText(kPrompt);
    window->generate();
    QVERIFY2(window->isRunning(), qPrintable(window->message()));
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);

    window->loadModels(model);  // re-picked without its draft
    QVERIFY(drafter->currentData().toString() != "model");
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
    window->generate();
    QVERIFY2(window->isRunning(), qPrintable(window->message()));
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
  }

  // The first screen: an example prompt and tests that are text Generate runs, a hint where
  // the candidates will be, an empty chart whose axis counts whole tokens, the model's whole
  // file name in the Model field, all at 1024x700 with room to write a prompt.
  void firstScreenIsReady() {
    QTemporaryDir dir;
    auto window = std::make_unique<MainWindow>(std::make_unique<FakeEngine>(std::chrono::milliseconds(2)));
    // fixed: the offscreen screen (800x800) would otherwise have its say in the window's height
    window->setFixedSize(1024, 700);
    window->show();
    QVERIFY(QTest::qWaitForWindowExposed(window.get()));
    QTRY_VERIFY2(window->width() == 1024 && window->height() == 700,
                 qPrintable(QString("%1x%2, at least %3x%4").arg(window->width()).arg(window->height())
                                .arg(window->minimumSizeHint().width()).arg(window->minimumSizeHint().height())));
    const QString example = window->promptEditor()->toPlainText();
    QVERIFY2(example.startsWith("def ") && example.endsWith("\"\"\"\n"), qPrintable(example));
    QVERIFY(window->testsEditor()->toPlainText().startsWith("assert "));
    auto* hint = window->grid()->findChild<QLabel*>("emptyHint");
    QVERIFY(hint && hint->isVisible());
    QVERIFY(hint->text().contains("Generate"));
    const int lines = window->promptEditor()->viewport()->height() / window->promptEditor()->fontMetrics().lineSpacing();
    QVERIFY2(lines >= kPromptLinesAt1024x700, qPrintable(QString("%1 lines").arg(lines)));
#ifdef SPECULA_HAVE_CHARTS
    auto* chart = window->findChild<specula::ui::ThroughputChart*>("throughputChart");
    int value_axes = 0;
    for (QAbstractAxis* axis : chart->chart()->axes(Qt::Vertical)) {
      auto* values = qobject_cast<QValueAxis*>(axis);
      if (!values || values->labelFormat() != "%.0f") continue;
      if (values->max() > 100) continue;
      ++value_axes;
      const double step = (values->max() - values->min()) / (values->tickCount() - 1);
      for (int i = 0; i < values->tickCount(); ++i) {  // each label a whole number, shown as it is
        const double tick = values->min() + i * step;
        QVERIFY2(tick == std::round(tick), qPrintable(QString("tick %1 of %2..%3").arg(tick).arg(values->min()).arg(values->max())));
      }
    }
    QVERIFY(value_axes > 0);
#endif

    window->loadModels(writeFile(dir, "specula-demo-target.gguf", FakeEngine::kMagic));
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
    auto* combo = window->findChild<specula::ui::FilePicker*>("modelPicker")->findChild<QComboBox*>();
    QCOMPARE(combo->currentText(), QString("specula-demo-target.gguf"));
    QStyleOptionComboBox option;
    option.initFrom(combo);
    option.currentText = combo->currentText();
    const QRect field = combo->style()->subControlRect(QStyle::CC_ComboBox, &option, QStyle::SC_ComboBoxEditField, combo);
    QVERIFY2(combo->fontMetrics().horizontalAdvance(combo->currentText()) <= field.width(),
             qPrintable(QString("%1 px in %2").arg(combo->fontMetrics().horizontalAdvance(combo->currentText())).arg(field.width())));

    QTest::mouseClick(window->findChild<QPushButton*>("generateButton"), Qt::LeftButton);
    QVERIFY2(window->isRunning(), qPrintable(window->message()));
    QVERIFY(!hint->isVisible());
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    QCOMPARE(window->grid()->pane(3)->state(), CandidateState::Passed);
  }

  void badModelFileIsAMessage() {
    QTemporaryDir dir;
    auto window = makeWindow();
    window->loadModels(writeFile(dir, "broken.gguf", "this is not a model"));
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kRunTimeoutMs);
    QVERIFY(!window->hasModel());
    QVERIFY2(window->message().contains("not a model file"), qPrintable(window->message()));
    // Still responsive: Generate explains instead of failing.
    window->promptEditor()->setPlainText(kPrompt);
    window->generate();
    QVERIFY(!window->isRunning());
    QVERIFY(window->message().contains("No model is loaded"));
  }

  void unavailableDeviceIsAMessage() {
    QTemporaryDir dir;
    auto window = makeWindow();
    window->findChild<QComboBox*>("deviceCombo")->setCurrentIndex(2);  // CUDA
    window->loadModels(writeFile(dir, "fake.gguf", FakeEngine::kMagic));
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kRunTimeoutMs);
    QVERIFY(!window->hasModel());
    QVERIFY2(window->message().contains("CUDA"), qPrintable(window->message()));
  }

  void loadCanBeCancelled() {
    QTemporaryDir dir;
    auto window = makeWindow(std::chrono::milliseconds(15), std::chrono::milliseconds(300));
    window->loadModels(writeFile(dir, "fake.gguf", FakeEngine::kMagic));
    QVERIFY(window->isLoading());
    auto* cancel = window->findChild<QToolButton*>("cancelLoadButton");
    QVERIFY(cancel->isVisible());
    QTest::mouseClick(cancel, Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kRunTimeoutMs);
    QVERIFY(!window->hasModel());
    QVERIFY2(window->message().contains("cancelled"), qPrintable(window->message()));
  }

  void engineRefusalMarksEveryPane() {
    QTemporaryDir dir;
    auto window = makeWindow();
    window->loadModels(writeFile(dir, "fake.gguf", FakeEngine::kMagic));
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
    window->promptEditor()->setPlainText(kPrompt);
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(12);  // more than the fake runs
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    QVERIFY2(window->message().contains("at most 8 candidates"), qPrintable(window->message()));
    for (int i = 0; i < 12; ++i) QCOMPARE(window->grid()->pane(i)->state(), CandidateState::Error);
    QVERIFY(window->findChild<QPushButton*>("generateButton")->isEnabled());
  }

  void closingMidRunShutsDownCleanly() {
    QTemporaryDir dir;
    auto window = makeWindow(std::chrono::milliseconds(200));  // a run of several seconds
    window->loadModels(writeFile(dir, "fake.gguf", FakeEngine::kMagic));
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
    window->promptEditor()->setPlainText(kPrompt);
    window->generate();
    QTRY_VERIFY_WITH_TIMEOUT(!window->grid()->pane(0)->text().isEmpty(), kRunTimeoutMs);
    QVERIFY(window->isRunning());
    QVERIFY(window->close());
    window.reset();  // joins the engine thread; a hang here fails the test by its timeout
    const auto saved = specula::ui::readAutosave(specula::ui::autosavePath());
    QVERIFY(saved.has_value());
    QCOMPARE(saved->prompt, kPrompt);
  }

  // Models in LM Studio's folder of the (test's) home are listed in the model picker, the one
  // that cannot load greyed; picking one puts it in the picker and loads it, and the draft
  // picker then offers its suggested draft.
  void foundModelsFillThePicker() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    SPECULA_SHARED_FILE(vocab, "tokenizers/llama-spm-vocab/ggml-vocab-llama-spm.gguf");
    const QString store = QDir::home().filePath(".lmstudio/models/someone/stories-GGUF");
    QVERIFY(QDir().mkpath(store));
    const QString target = store + "/stories260K-f32.gguf", draft = store + "/tiny-draft-q8_0.gguf";
    specula::LoadOptions with_tokenizer;
    with_tokenizer.tokenizer_path = tok;
    const auto stories = specula::load_model(bin, with_tokenizer);
    specula::write_gguf_model(*stories, target.toStdString(), specula::TensorType::F32);
    specula::write_gguf_model(*specula::test::small_llama(stories->tokenizer, 512, 1), draft.toStdString(),
                              specula::TensorType::Q8_0);
    QVERIFY(QFile::copy(QString::fromStdString(vocab), store + "/vocabulary-only.gguf"));

    auto window = makeWindow();
    auto* picker = window->findChild<specula::ui::FilePicker*>("modelPicker");
    auto* combo = picker->findChild<QComboBox*>();
    auto* items = qobject_cast<QStandardItemModel*>(combo->model());
    QTRY_VERIFY_WITH_TIMEOUT(combo->findData(target) >= 0, kRunTimeoutMs);
    const int at = combo->findData(target);
    QVERIFY(combo->itemText(at).contains("stories260K-f32.gguf") && combo->itemText(at).contains("llama"));
    QVERIFY(items->item(at)->isEnabled());
    const int unloadable = combo->findData(store + "/vocabulary-only.gguf");
    QVERIFY(unloadable >= 0 && !items->item(unloadable)->isEnabled());
    QVERIFY(combo->itemData(unloadable, Qt::ToolTipRole).toString().contains("has no weights"));

    combo->showPopup();
    combo->view()->setCurrentIndex(combo->model()->index(at, 0));
    QTest::keyClick(combo->view(), Qt::Key_Return);
    QTRY_COMPARE(picker->path(), target);
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kRunTimeoutMs);  // the fake engine refuses real files
    auto* drafts = window->findChild<specula::ui::FilePicker*>("draftPicker")->findChild<QComboBox*>();
    QVERIFY(drafts->findData(draft) >= 0);
    QVERIFY(drafts->findData(target) < 0);
    window.reset();
    QDir(QDir::home().filePath(".lmstudio")).removeRecursively();
  }

  void problemBrowserFillsEditorsAndRunsAll() {
    QTemporaryDir dir;
    auto window = makeWindow();
    window->loadModels(writeFile(dir, "fake.gguf", FakeEngine::kMagic));
    QTRY_VERIFY_WITH_TIMEOUT(window->hasModel() && !window->isLoading(), kRunTimeoutMs);
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(4);
    specula::ui::ProblemBrowser* browser = window->openProblems();
    QVERIFY(browser->openFile(SPECULA_TEST_DATA_DIR "/ui_problems.jsonl"));
    auto* tasks = browser->findChild<QTableWidget*>("tasksTable");
    QCOMPARE(tasks->rowCount(), 2);

    // Picking a task from the keyboard fills both editors.
    tasks->setFocus();
    tasks->selectRow(1);
    QTest::keyClick(tasks, Qt::Key_Return);
    QVERIFY(window->promptEditor()->toPlainText().startsWith("def double(x: int) -> int:"));
    QVERIFY(window->testsEditor()->toPlainText().contains("assert candidate(4) == 8"));

    // Run all: one row per task, the summary, and both exports.
    QTest::mouseClick(browser->findChild<QPushButton*>("runAllButton"), Qt::LeftButton);
    QVERIFY(window->isRunning());
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kRunTimeoutMs);
    QCOMPARE(browser->findChild<QTableWidget*>("resultsTable")->rowCount(), 2);
    // The fake passes 2 of 4 candidates on every task; the first to finish (#1) fails.
    for (const specula::ProblemEvaluation& e : browser->evaluations()) {
      QCOMPARE(e.n, 4);
      QCOMPARE(e.c, 2);
      QVERIFY(!e.pass_first);
      QVERIFY(e.pass_all);
    }
    QVERIFY2(browser->summary().contains("Pass@First 0.0%") && browser->summary().contains("Pass@All 100.0%") &&
                 browser->summary().contains("pass@1 50.0%"),
             qPrintable(browser->summary()));

    const QString csv_path = dir.filePath("results.csv"), samples_path = dir.filePath("samples.jsonl");
    QVERIFY(browser->exportCsv(csv_path));
    QFile csv(csv_path);
    QVERIFY(csv.open(QIODevice::ReadOnly));
    const QList<QByteArray> rows = csv.readAll().trimmed().split('\n');
    QCOMPARE(rows.size(), 3);
    QVERIFY(rows[0].startsWith("task_id,n,passed,pass_first,pass_all"));
    QVERIFY(rows[1].startsWith("\"Small/0\",4,2,0,1,"));
    QVERIFY(browser->exportSamples(samples_path));
    QFile samples(samples_path);
    QVERIFY(samples.open(QIODevice::ReadOnly));
    const QList<QByteArray> lines = samples.readAll().trimmed().split('\n');
    QCOMPARE(lines.size(), 8);
    const QJsonObject first = QJsonDocument::fromJson(lines[0]).object();
    QCOMPARE(first["task_id"].toString(), QString("Small/0"));
    QVERIFY(first.contains("completion"));
  }

  void highlighterColoursDocstringsAcrossLines() {
    QTextDocument document;
    specula::ui::PythonHighlighter highlighter(&document);
    document.setPlainText("def f(x):\n    \"\"\"Return x\n    if not\n    \"\"\"\n    return x  # done\n");
    highlighter.rehighlight();  // without a view, nothing would lay the document out
    auto format_at = [&](int line, int column) {
      const QTextBlock block = document.findBlockByNumber(line);
      for (const QTextLayout::FormatRange& range : block.layout()->formats())
        if (column >= range.start && column < range.start + range.length) return range.format;
      return QTextCharFormat();
    };
    QCOMPARE(format_at(1, 6).foreground().style(), Qt::SolidPattern);  // coloured at all
    const QColor string = format_at(1, 6).foreground().color();  // inside the opening line of the docstring
    QCOMPARE(format_at(2, 7).foreground().color(), string);  // "if" inside the docstring is text, not a keyword
    QCOMPARE(format_at(3, 5).foreground().color(), string);  // the closing quotes
    QVERIFY(format_at(4, 4).foreground().color() != string);  // "return" after the docstring is a keyword
    QVERIFY(format_at(4, 4).fontWeight() == QFont::Bold);
    QVERIFY(format_at(4, 15).fontItalic());  // the comment
  }

  void diffAlignsLines() {
    const auto rows = specula::ui::diff_lines({"def f(x):", "    y = x", "    return y"},
                                              {"def f(x):", "    return x", "    return y", "# end"});
    using Row = specula::ui::DiffRow;
    QCOMPARE(int(rows.size()), 4);
    QCOMPARE(rows[0].kind, Row::Same);
    QCOMPARE(rows[1].kind, Row::Changed);
    QCOMPARE(rows[1].left, 1);
    QCOMPARE(rows[1].right, 1);
    QCOMPARE(rows[2].kind, Row::Same);
    QCOMPARE(rows[3].kind, Row::Added);
    QCOMPARE(rows[3].right, 3);
    const auto block = specula::ui::diff_lines({"a", "b", "c", "same"}, {"x", "y", "same"});
    QCOMPARE(int(block.size()), 4);
    QCOMPARE(block[0].kind, Row::Changed);
    QCOMPARE(block[1].kind, Row::Changed);
    QCOMPARE(block[2].kind, Row::Removed);
    QCOMPARE(block[2].left, 2);
    QCOMPARE(block[3].kind, Row::Same);
    specula::ui::DiffView view("a", "x = 1\ny = 2\n", "b", "x = 1\ny = 3\n");
    QCOMPARE(view.changedRows(), 1);
  }
};

int main(int argc, char** argv) {
  // Settings and autosave go to a private directory, shared with the crash child.
  if (qEnvironmentVariableIsEmpty("SPECULA_GUI_TEST_HOME")) {
    static QTemporaryDir home;
    qputenv("SPECULA_GUI_TEST_HOME", home.path().toLocal8Bit());
  }
  const QByteArray home = qgetenv("SPECULA_GUI_TEST_HOME");
  qputenv("XDG_CONFIG_HOME", home + "/config");
  qputenv("XDG_DATA_HOME", home + "/data");
  // the window looks for models in the stores of this home only
  qputenv("HOME", home);
  for (const char* store : {"OLLAMA_MODELS", "LLAMA_CACHE", "HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME"}) qunsetenv(store);
  QApplication app(argc, argv);
  QCoreApplication::setOrganizationName("SpeculaTest");
  QCoreApplication::setApplicationName("specula-gui-test");
  if (argc >= 2 && QByteArray(argv[1]) == "crash-child") return crashChild();
  GuiWindowTest test;
  return QTest::qExec(&test, argc, argv);
}

#include "test_gui_window.moc"
