// The window with the real engine against `specula-cli serve` on loopback (stories260K),
// driven as a user would: the Models panel's "Server" choice, its connection test (for a
// server that is there and one that is not), Connect, candidates that stream into their
// panes and equal a local session token for token, Stop in mid-stream (after which the
// server's /health counts the generation cancelled), the key kept in the settings only
// when "Remember key" is ticked, and a server that checks keys and then goes away: a wrong
// key and a vanished server are messages in the window, which stays usable.
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QtTest>

#include "candidate_grid.h"
#include "candidate_pane.h"
#include "code_editor.h"
#include "decode/generator.h"
#include "engine_worker.h"
#include "main_window.h"
#include "serve_process.h"
#include "gui_test_main.h"
#include "shared_data.h"

using specula::ui::CandidateState;
using specula::ui::MainWindow;

namespace {

constexpr int kTimeoutMs = 120000;
const QString kPrompt = "def add(a: int, b: int) -> int:\n    \"\"\"Return the sum of a and b.\"\"\"\n";

std::unique_ptr<MainWindow> makeWindow() {
  auto window = std::make_unique<MainWindow>(specula::ui::make_engine());
  window->show();
  return window;
}

// Chooses "Server", fills the panel and clicks `button` ("testServerButton" or "connectServerButton").
void useServer(MainWindow& window, const QString& url, const QString& key, const char* button) {
  auto* source = window.findChild<QComboBox*>("sourceCombo");
  source->setCurrentIndex(source->findData("server"));
  Q_EMIT source->activated(source->currentIndex());
  auto* url_edit = window.findChild<QLineEdit*>("serverUrlEdit");
  QVERIFY(url_edit->isVisible());
  url_edit->setText(url);
  window.findChild<QLineEdit*>("serverKeyEdit")->setText(key);
  QTest::mouseClick(window.findChild<QPushButton*>(button), Qt::LeftButton);
}

QString testResult(MainWindow& window) { return window.findChild<QLabel*>("serverResultLabel")->text(); }

}  // namespace

class GuiRemoteTest : public QObject {
  Q_OBJECT

  std::string bin, tok;
  std::unique_ptr<specula::test::ServeProcess> server;

 private Q_SLOTS:
  void initTestCase() {
    SPECULA_SHARED_FILE(b, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(t, "models/stories260K/tok512.bin");
    bin = b;
    tok = t;
    server = std::make_unique<specula::test::ServeProcess>(QStringList{
        "-m", QString::fromStdString(bin), "--tokenizer", QString::fromStdString(tok), "--device", "cpu", "--draft", "ngram"});
    QVERIFY2(server->started(), qPrintable(server->errors()));
  }

  void connectionTest() {
    auto window = makeWindow();
    useServer(*window, "http://127.0.0.1:1", {}, "testServerButton");
    QTRY_VERIFY_WITH_TIMEOUT(testResult(*window).contains("cannot connect"), kTimeoutMs);
    useServer(*window, server->url(), {}, "testServerButton");
    QTRY_VERIFY_WITH_TIMEOUT(testResult(*window).contains("stories260K"), kTimeoutMs);
    QVERIFY(!window->hasModel());  // a test connects nothing
  }

  void candidatesEqualLocalAndStopCancelsOnTheServer() {
    auto window = makeWindow();
    useServer(*window, server->url(), {}, "connectServerButton");
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kTimeoutMs);
    QVERIFY2(window->hasModel(), qPrintable(window->message()));
    QVERIFY2(window->statusText().contains("server " + server->url()), qPrintable(window->statusText()));

    // Greedy: three panes, each the local session's text
    window->promptEditor()->setPlainText(kPrompt);
    window->testsEditor()->clear();
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(3);
    window->findChild<QDoubleSpinBox*>("temperatureSpin")->setValue(0.0);
    window->findChild<QSpinBox*>("maxTokensSpin")->setValue(60);
    window->findChild<QDoubleSpinBox*>("budgetSpin")->setValue(0);
    QTest::mouseClick(window->findChild<QPushButton*>("generateButton"), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    QVERIFY2(window->message().isEmpty(), qPrintable(window->message()));
    specula::LoadOptions options;
    options.tokenizer_path = tok;
    specula::LocalGenerator local(specula::create_cpu_backend(), specula::load_model(bin, options));
    specula::GenerationRequest r;
    r.prompt = kPrompt.toStdString();
    r.n_candidates = 3;
    r.max_new_tokens = 60;
    r.code_stops = true;
    const specula::SessionResult expected = local.generate(r);
    for (int i = 0; i < 3; ++i) {
      QCOMPARE(window->grid()->pane(i)->text(), QString::fromStdString(expected.candidates[size_t(i)].text));
      // finished whole and checked: a story does not parse as Python, so its checks fail
      QCOMPARE(window->grid()->pane(i)->state(), CandidateState::Failed);
    }

    // Stop as soon as a candidate has streamed a few tokens, in step with the deltas as the
    // Stop button would: sixteen candidates of up to 500 tokens are far from done by then
    const int cancelled = specula::test::health(server->port())["cancelled"].get<int>();
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(16);
    window->findChild<QDoubleSpinBox*>("temperatureSpin")->setValue(1.0);
    window->findChild<QSpinBox*>("maxTokensSpin")->setValue(500);
    auto* worker = window->worker();
    const auto connection = connect(
        worker, &specula::ui::EngineWorker::candidateDelta, worker,
        [worker](int, const QString&, int count, int, int) {
          if (count >= 3) worker->stop();
        },
        Qt::DirectConnection);
    QTest::mouseClick(window->findChild<QPushButton*>("generateButton"), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    disconnect(connection);
    int stopped = 0;
    for (int i = 0; i < 16; ++i) stopped += window->grid()->pane(i)->state() == CandidateState::Stopped;
    QVERIFY2(stopped > 0, "no candidate was stopped");
    QTRY_VERIFY_WITH_TIMEOUT(specula::test::health(server->port())["cancelled"].get<int>() == cancelled + 1, kTimeoutMs);
    QTRY_VERIFY_WITH_TIMEOUT(!specula::test::health(server->port())["generating"].get<bool>(), kTimeoutMs);
  }

  void keyIsStoredOnlyWhenAsked() {
    auto window = makeWindow();
    useServer(*window, server->url(), "k-123", "testServerButton");
    QTRY_VERIFY_WITH_TIMEOUT(testResult(*window).contains("stories260K"), kTimeoutMs);
    QVERIFY(!QSettings().contains("server/apiKey"));
    QCOMPARE(QSettings().value("server/url").toString(), server->url());
    window->findChild<QCheckBox*>("rememberKeyCheck")->setChecked(true);
    useServer(*window, server->url(), "k-123", "testServerButton");
    QCOMPARE(QSettings().value("server/apiKey").toString(), QStringLiteral("k-123"));
    window->findChild<QCheckBox*>("rememberKeyCheck")->setChecked(false);
    useServer(*window, server->url(), "k-123", "testServerButton");
    QVERIFY(!QSettings().contains("server/apiKey"));  // unticked: forgotten
  }

  void wrongKeyAndAVanishedServerAreMessages() {
    specula::test::ServeProcess keyed({"-m", QString::fromStdString(bin), "--tokenizer", QString::fromStdString(tok),
                                       "--device", "cpu", "--api-key", "s3cret"});
    QVERIFY2(keyed.started(), qPrintable(keyed.errors()));
    auto window = makeWindow();
    useServer(*window, keyed.url(), "guess", "testServerButton");
    QTRY_VERIFY_WITH_TIMEOUT(testResult(*window).contains("API key"), kTimeoutMs);
    useServer(*window, keyed.url(), "s3cret", "connectServerButton");
    QTRY_VERIFY_WITH_TIMEOUT(!window->isLoading(), kTimeoutMs);
    QVERIFY2(window->hasModel(), qPrintable(window->message()));

    window->promptEditor()->setPlainText(kPrompt);
    window->testsEditor()->clear();
    window->findChild<QSpinBox*>("candidatesSpin")->setValue(2);
    window->findChild<QSpinBox*>("maxTokensSpin")->setValue(20);
    window->findChild<QDoubleSpinBox*>("budgetSpin")->setValue(0);
    auto* generate = window->findChild<QPushButton*>("generateButton");
    QTest::mouseClick(generate, Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    QVERIFY2(window->message().isEmpty(), qPrintable(window->message()));
    const CandidateState state = window->grid()->pane(1)->state();  // finished whole, then checked
    QVERIFY2(state == CandidateState::Failed || state == CandidateState::Checked, qPrintable(stateName(state)));

    QVERIFY(keyed.stopsCleanly());  // the server goes away between two sessions
    QTest::mouseClick(generate, Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!window->isRunning(), kTimeoutMs);
    QVERIFY2(window->message().contains("cannot connect"), qPrintable(window->message()));
    QVERIFY(generate->isEnabled());  // ready for the next try
  }
};

SPECULA_GUI_TEST_MAIN(GuiRemoteTest, "specula-gui-remote-test")

#include "test_gui_remote.moc"
