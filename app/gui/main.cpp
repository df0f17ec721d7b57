// specula: the desktop application. Argument parsing and wiring only.
//
//   specula [--model PATH] [--tokenizer PATH] [--draft PATH] [--prompt-file F] [--tests-file F]
//           [--candidates N] [--problems FILE]
//           [--screenshot OUT.png --after SECONDS [--view main|start|diff|problems]]
//
// Without --model it loads the demo model shipped with the application when present, else
// it asks for a model file. --screenshot starts a run as soon as the model is loaded (for
// --view problems: "Run all" on the --problems file; for --view start: none) and renders the view to OUT.png
// SECONDS later, then quits; it works under QT_QPA_PLATFORM=offscreen.
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QPushButton>
#include <QSpinBox>
#include <QTimer>
#include <cstdio>

#include "candidate_grid.h"
#include "model/demo_models.h"
#include "code_editor.h"
#include "diff_view.h"
#include "main_window.h"
#include "problem_browser.h"

namespace {

QString read_text(const QString& path, bool* ok) {
  QFile file(path);
  *ok = file.open(QIODevice::ReadOnly);
  return *ok ? QString::fromUtf8(file.readAll()) : QString();
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QCoreApplication::setOrganizationName("Specula");
  QCoreApplication::setApplicationName("specula");
  QCoreApplication::setApplicationVersion("0.1.0");

  QCommandLineParser parser;
  parser.setApplicationDescription("Multi-candidate code generation with batched speculative decoding");
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption model({"m", "model"}, "Target model (GGUF, llama2.c checkpoint or HF directory).", "PATH");
  const QCommandLineOption tokenizer("tokenizer", "Tokenizer for checkpoints without a vocabulary.", "PATH");
  const QCommandLineOption draft("draft", "Draft model for the \"draft model\" drafter.", "PATH");
  const QCommandLineOption prompt_file("prompt-file", "Start with this prompt.", "FILE");
  const QCommandLineOption tests_file("tests-file", "Start with these tests.", "FILE");
  const QCommandLineOption candidates("candidates", "Number of candidates (1-16).", "N");
  const QCommandLineOption problems("problems", "Open a HumanEval / MBPP problem file in the browser.", "FILE");
  const QCommandLineOption view("view", "What --screenshot shows: main, start (no run), diff or problems.", "VIEW",
                                "main");
  const QCommandLineOption screenshot("screenshot", "Run once and save the window as a PNG.", "OUT.png");
  const QCommandLineOption after("after", "Seconds into the run to take the screenshot (default 3).", "SECONDS", "3");
  parser.addOptions({model, tokenizer, draft, prompt_file, tests_file, candidates, problems, screenshot, after, view});
  parser.process(app);

  specula::ui::MainWindow window(specula::ui::make_engine());
  for (const auto& [option, editor] : {std::pair{&prompt_file, window.promptEditor()}, {&tests_file, window.testsEditor()}}) {
    if (!parser.isSet(*option)) continue;
    bool ok = false;
    const QString text = read_text(parser.value(*option), &ok);
    if (!ok) {
      std::fprintf(stderr, "specula: cannot read %s\n", qPrintable(parser.value(*option)));
      return 2;
    }
    editor->setPlainText(text);
  }
  if (parser.isSet(candidates)) window.findChild<QSpinBox*>("candidatesSpin")->setValue(parser.value(candidates).toInt());
  window.show();

  if (parser.isSet(problems)) window.openProblems()->openFile(parser.value(problems));

  if (parser.isSet(screenshot)) {
    const QString out = parser.value(screenshot), what = parser.value(view);
    if (what != "main" && what != "start" && what != "diff" && what != "problems") {
      std::fprintf(stderr, "specula: --view must be main, start, diff or problems\n");
      return 2;
    }
    const int after_ms = int(parser.value(after).toDouble() * 1000);
    auto shoot = [&window, out, what] {
      QWidget* target = &window;
      if (what == "problems") target = window.openProblems();
      if (what == "diff" && window.grid()->count() >= 2) target = window.openDiff(window.grid()->order().front());
      QCoreApplication::processEvents();  // lay out a view that was just opened
      const bool saved = target && target->grab().save(out);
      std::fprintf(saved ? stdout : stderr, "specula: %s %s\n", saved ? "saved" : "could not save", qPrintable(out));
      window.close();
      QCoreApplication::exit(saved ? 0 : 1);
    };
    QObject::connect(&window, &specula::ui::MainWindow::modelsReady, &window, [&window, after_ms, shoot, what] {
      if (what == "problems") {
        specula::ui::ProblemBrowser* browser = window.openProblems();
        QMetaObject::invokeMethod(browser->findChild<QPushButton*>("runAllButton"), "click");
      } else if (what != "start") {  // start: the window as it opens, before any run
        window.generate();
      }
      QTimer::singleShot(after_ms, &window, shoot);
    });
    // A model that fails to load still gets its screenshot: the message is what there is to see.
    QObject::connect(&window, &specula::ui::MainWindow::loadFailed, &window,
                     [&window, after_ms, shoot] { QTimer::singleShot(after_ms, &window, shoot); });
  }

  QString target = parser.value(model), draft_path = parser.value(draft);
  if (target.isEmpty()) {
    if (const auto demo = specula::find_demo_models(QCoreApplication::applicationDirPath().toStdString())) {
      target = QString::fromStdString(demo->target);
      if (draft_path.isEmpty()) draft_path = QString::fromStdString(demo->draft);
    }
  }
  if (!target.isEmpty()) {
    window.loadModels(target, parser.value(tokenizer), draft_path);
  } else {
    window.showMessage(QObject::tr("No model yet: choose a model file (GGUF, or a llama2.c checkpoint with its "
                                   "tokenizer) to start."), false);
    if (parser.isSet(screenshot)) Q_EMIT window.loadFailed();
    else QTimer::singleShot(0, &window, &specula::ui::MainWindow::chooseModel);
  }
  return app.exec();
}
