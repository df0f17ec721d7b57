#include "main_window.h"

#include <QAction>
#include <QCheckBox>
#include <QCloseEvent>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenuBar>
#include <QProgressBar>
#include <QRandomGenerator>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QStatusBar>
#include <QToolButton>
#include <QVBoxLayout>

#include "behaviour_view.h"
#include "candidate_grid.h"
#include "candidate_pane.h"
#include "code_editor.h"
#include "diff_view.h"
#include "engine_worker.h"
#include "file_picker.h"
#include "model_scanner.h"
#include "problem_browser.h"
#include "server_panel.h"
#ifdef SPECULA_HAVE_CHARTS
#include "throughput_chart.h"
#endif

namespace specula::ui {

namespace {

constexpr int kAutosaveDelayMs = 400;   // after the last keystroke
constexpr int kElapsedTickMs = 100;

QLabel* buddy_label(const QString& text, QWidget* buddy) {
  auto* label = new QLabel(text);
  label->setBuddy(buddy);
  return label;
}

}  // namespace

MainWindow::MainWindow(std::unique_ptr<EnginePort> engine, QWidget* parent)
    : QMainWindow(parent), worker_(new EngineWorker(std::move(engine))) {
  qRegisterMetaType<RunRequest>();
  qRegisterMetaType<RunStats>();
  qRegisterMetaType<RunGroups>();
  qRegisterMetaType<QVector<int>>();
  qRegisterMetaType<ProblemEvaluation>();
  qRegisterMetaType<std::vector<Problem>>();
  setWindowTitle(tr("Specula"));
  scanner_ = new ModelScanner(this);
  connect(scanner_, &ModelScanner::scanned, this, &MainWindow::showFoundModels);
  buildUi();
  buildActions();
  worker_->moveToThread(&engine_thread_);
  engine_thread_.setObjectName("engine");
  connectWorker();
  engine_thread_.start();

  autosave_timer_.setSingleShot(true);
  autosave_timer_.setInterval(kAutosaveDelayMs);
  connect(&autosave_timer_, &QTimer::timeout, this, &MainWindow::saveNow);
  elapsed_timer_.setInterval(kElapsedTickMs);
  connect(&elapsed_timer_, &QTimer::timeout, this, &MainWindow::tickElapsed);

  readSettings();
  restoreAutosave();
  connect(prompt_, &QPlainTextEdit::textChanged, &autosave_timer_, qOverload<>(&QTimer::start));
  connect(tests_, &QPlainTextEdit::textChanged, &autosave_timer_, qOverload<>(&QTimer::start));
  updateEnabled();
  scanner_->start();
}

MainWindow::~MainWindow() {
  shutdownWorker();
}

void MainWindow::buildUi() {
  buildEditors();
  QGroupBox* models = buildModelsPanel();
  QGroupBox* settings = buildGenerationPanel();

  generate_button_ = new QPushButton(tr("&Generate"));
  generate_button_->setObjectName("generateButton");
  generate_button_->setToolTip(tr("Generate candidates (Ctrl+Return)"));
  generate_button_->setDefault(true);
  stop_button_ = new QPushButton(tr("S&top"));
  stop_button_->setObjectName("stopButton");
  stop_button_->setToolTip(tr("Stop the run (Esc)"));
  connect(generate_button_, &QPushButton::clicked, this, &MainWindow::generate);
  connect(stop_button_, &QPushButton::clicked, this, &MainWindow::stop);

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(generate_button_, 1);
  buttons->addWidget(stop_button_);

  auto* left = new QWidget;
  auto* left_layout = new QVBoxLayout(left);
  auto* prompt_header = new QHBoxLayout;
  prompt_header->addWidget(buddy_label(tr("P&rompt (signature and docstring):"), prompt_), 1);
  prompt_header->addWidget(fill_at_cursor_);
  left_layout->addLayout(prompt_header);
  left_layout->addWidget(prompt_, 2);  // the prompt is the longer text
  left_layout->addWidget(buddy_label(tr("Te&sts (asserts or check(candidate)):"), tests_));
  left_layout->addWidget(tests_, 1);
  left_layout->addWidget(models);
  left_layout->addWidget(settings);
  left_layout->addLayout(buttons);

  QWidget* right = buildResultsArea();

  auto* splitter = new QSplitter;
  splitter->setObjectName("mainSplitter");
  splitter->addWidget(left);
  splitter->addWidget(right);
  splitter->setStretchFactor(0, 0);
  splitter->setStretchFactor(1, 1);
  setCentralWidget(splitter);

  buildStatusBar();

  // Tab order: prompt, Fill at cursor, tests, models, settings, Generate, Stop, then the panes.
  QWidget* chain[] = {prompt_, fill_at_cursor_, tests_, source_, model_picker_, tokenizer_picker_, draft_picker_,
                      device_, prompt_style_, candidates_, temperature_, top_p_, max_new_tokens_, budget_, drafter_,
                      policy_, generate_button_, stop_button_};
  for (size_t i = 1; i < std::size(chain); ++i) setTabOrder(chain[i - 1], chain[i]);
  showSource();
  resize(1280, 800);
}

// The prompt and tests editors.
void MainWindow::buildEditors() {
  prompt_ = new CodeEditor;
  prompt_->setObjectName("promptEditor");
  prompt_->setAccessibleName(tr("Prompt"));
  // a hint, not an example: grey code looked like a prompt that Generate then called empty
  prompt_->setPlaceholderText(tr("A Python function's signature and docstring: the candidates write its body."));
  fill_at_cursor_ = new QCheckBox(tr("Fill at c&ursor"));
  fill_at_cursor_->setObjectName("fillAtCursorCheck");
  tests_ = new CodeEditor;
  tests_->setObjectName("testsEditor");
  tests_->setAccessibleName(tr("Tests"));
  tests_->setPlaceholderText(tr("Asserts on the function, or def check(candidate): … (optional)"));
}

// Models: where generation runs (model files or a server), the files, the device.
QGroupBox* MainWindow::buildModelsPanel() {
  const QString model_filter = tr("Models (*.gguf *.bin *.json);;All files (*)");
  model_picker_ = new FilePicker("recent/models", tr("Open a model"), model_filter, false);
  model_picker_->setObjectName("modelPicker");
  tokenizer_picker_ = new FilePicker("recent/tokenizers", tr("Open a tokenizer"),
                                     tr("Tokenizers (*.model *.bin *.json);;All files (*)"), true);
  tokenizer_picker_->setObjectName("tokenizerPicker");
  draft_picker_ = new FilePicker("recent/drafts", tr("Open a draft model"), model_filter, true);
  draft_picker_->setObjectName("draftPicker");
  connect(model_picker_, &FilePicker::chosen, this, [this](const QString& path) {
    loadModels(path, tokenizer_picker_->path(), draft_picker_->path());
  });
  for (FilePicker* picker : {tokenizer_picker_, draft_picker_})
    connect(picker, &FilePicker::chosen, this, [this] {
      if (!model_picker_->path().isEmpty())
        loadModels(model_picker_->path(), tokenizer_picker_->path(), draft_picker_->path());
    });

  device_ = new QComboBox;
  device_->setObjectName("deviceCombo");
  device_->addItem(tr("auto"), int(DeviceChoice::Auto));
  device_->addItem(tr("CPU"), int(DeviceChoice::Cpu));
  device_->addItem(tr("CUDA"), int(DeviceChoice::Cuda));
  connect(device_, &QComboBox::activated, this, &MainWindow::reloadForDevice);
  prompt_style_ = new QComboBox;
  prompt_style_->setObjectName("promptStyleCombo");
  prompt_style_->addItem(tr("Auto"), "auto");
  prompt_style_->addItem(tr("Raw"), "raw");
  prompt_style_->addItem(tr("Chat"), "chat");
  source_ = new QComboBox;
  source_->setObjectName("sourceCombo");
  source_->addItem(tr("Model files"), "files");
  source_->addItem(tr("Server"), "server");
  source_->setToolTip(tr("Generate with model files on this machine, or on an OpenAI-compatible server"));
  connect(source_, &QComboBox::activated, this, &MainWindow::showSource);
  server_panel_ = new ServerPanel;
  server_panel_->setObjectName("serverPanel");
  connect(server_panel_, &ServerPanel::connectRequested, this, &MainWindow::connectServer);

  auto* models = new QGroupBox(tr("Models"));
  auto* model_form = new QFormLayout(models);
  // the device shares the source's row: rows saved here are lines of prompt at 1024x700
  auto* source_row = new QHBoxLayout;
  source_row->addWidget(source_, 1);
  device_label_ = buddy_label(tr("De&vice:"), device_);
  source_row->addWidget(device_label_);
  source_row->addWidget(device_);
  // and so does the prompt style, which applies to model files and servers alike
  source_row->addWidget(buddy_label(tr("Prompt st&yle:"), prompt_style_));
  source_row->addWidget(prompt_style_);
  model_form->addRow(buddy_label(tr("So&urce:"), source_), source_row);
  model_form->addRow(buddy_label(tr("&Model:"), model_picker_), model_picker_);
  model_form->addRow(buddy_label(tr("To&kenizer:"), tokenizer_picker_), tokenizer_picker_);
  model_form->addRow(buddy_label(tr("D&raft:"), draft_picker_), draft_picker_);
  model_form->addRow(server_panel_);
  return models;
}

// Generation: candidates, sampling, budget, drafter and policy.
QGroupBox* MainWindow::buildGenerationPanel() {
  candidates_ = new QSpinBox;
  candidates_->setObjectName("candidatesSpin");
  candidates_->setRange(1, 16);
  candidates_->setValue(4);
  temperature_ = new QDoubleSpinBox;
  temperature_->setObjectName("temperatureSpin");
  temperature_->setRange(0.0, 2.0);
  temperature_->setSingleStep(0.05);
  temperature_->setValue(0.8);
  temperature_->setToolTip(tr("0 is greedy: every candidate would be the same"));
  top_p_ = new QDoubleSpinBox;
  top_p_->setObjectName("topPSpin");
  top_p_->setRange(0.05, 1.0);
  top_p_->setSingleStep(0.05);
  top_p_->setValue(0.95);
  max_new_tokens_ = new QSpinBox;
  max_new_tokens_->setObjectName("maxTokensSpin");
  max_new_tokens_->setRange(1, 8192);
  max_new_tokens_->setValue(256);
  budget_ = new QDoubleSpinBox;
  budget_->setObjectName("budgetSpin");
  budget_->setRange(0.0, 3600.0);
  budget_->setSuffix(tr(" s"));
  budget_->setSpecialValueText(tr("none"));
  budget_->setValue(30.0);
  drafter_ = new QComboBox;
  drafter_->setObjectName("drafterCombo");
  drafter_->addItem(tr("none"), "none");
  drafter_->addItem(tr("n-gram (prompt lookup)"), "ngram");
  drafter_->addItem(tr("first 2 layers"), "layers:2");
  drafter_->addItem(tr("draft model"), "model");
  drafter_->setCurrentIndex(1);
  policy_ = new QComboBox;
  policy_->setObjectName("policyCombo");
  policy_->addItem(tr("goodput (cost model)"), "goodput");
  policy_->addItem(tr("adaptive"), "adaptive");
  policy_->addItem(tr("BASS"), "bass");
  policy_->addItem(tr("fixed 4"), "fixed:4");
  auto* settings = new QGroupBox(tr("Generation"));
  // The numbers two to a row, the choices a row each: five rows where seven left the prompt
  // box three lines in a 1024x700 window.
  auto* form = new QGridLayout(settings);
  const auto pair = [form](int row, int column, const QString& label, QWidget* field, int span = 1) {
    form->addWidget(buddy_label(label, field), row, column);
    form->addWidget(field, row, column + 1, 1, span);
  };
  pair(0, 0, tr("&Candidates:"), candidates_);
  pair(0, 2, tr("&Budget:"), budget_);
  pair(1, 0, tr("T&emperature:"), temperature_);
  pair(1, 2, tr("Top-&p:"), top_p_);
  pair(2, 0, tr("Max &new tokens:"), max_new_tokens_);
  pair(3, 0, tr("&Drafter:"), drafter_, 3);
  pair(4, 0, tr("Draft po&licy:"), policy_, 3);
  form->setColumnStretch(1, 1);
  form->setColumnStretch(3, 1);
  return settings;
}

// The candidate grid with the message bar above it and the throughput chart below.
QWidget* MainWindow::buildResultsArea() {
  grid_ = new CandidateGrid;
  connect(grid_, &CandidateGrid::diffRequested, this, &MainWindow::openDiff);
  connect(grid_, &CandidateGrid::behaviourRequested, this, &MainWindow::openBehaviour);

  message_bar_ = new QFrame;
  message_bar_->setObjectName("messageBar");
  message_label_ = new QLabel;
  message_label_->setWordWrap(true);
  message_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  // A request written in words: the start of a function that asks for it, one click away.
  use_suggestion_ = new QToolButton;
  use_suggestion_->setObjectName("useSuggestionButton");
  use_suggestion_->setText(tr("Use this start"));
  use_suggestion_->hide();
  connect(use_suggestion_, &QToolButton::clicked, this, [this] {
    prompt_->setPlainText(suggested_prompt_);
    message_bar_->hide();
    prompt_->setFocus();
  });
  auto* dismiss = new QToolButton;
  dismiss->setText(tr("Dismiss"));
  connect(dismiss, &QToolButton::clicked, message_bar_, &QWidget::hide);
  auto* message_layout = new QHBoxLayout(message_bar_);
  message_layout->addWidget(message_label_, 1);
  message_layout->addWidget(use_suggestion_);
  message_layout->addWidget(dismiss);
  message_bar_->hide();

  auto* right = new QWidget;
  auto* right_layout = new QVBoxLayout(right);
  right_layout->setContentsMargins(0, 0, 0, 0);
  right_layout->addWidget(message_bar_);
  right_layout->addWidget(grid_, 1);
#ifdef SPECULA_HAVE_CHARTS
  chart_ = new ThroughputChart;
  right_layout->addWidget(chart_);
#endif
  return right;
}

// The status bar: the budget's progress, live figures, the backend and the isolation.
void MainWindow::buildStatusBar() {
  progress_ = new QProgressBar;
  progress_->setObjectName("budgetProgress");
  progress_->setMaximumWidth(220);
  progress_->setRange(0, 1000);
  progress_->setValue(0);
  progress_->setFormat(tr("idle"));
  cancel_load_ = new QToolButton;
  cancel_load_->setObjectName("cancelLoadButton");
  cancel_load_->setText(tr("Cancel"));
  cancel_load_->setToolTip(tr("Cancel loading the model"));
  cancel_load_->hide();
  connect(cancel_load_, &QToolButton::clicked, this, [this] { worker_->stop(); });
  throughput_label_ = new QLabel;
  latency_label_ = new QLabel;
  acceptance_label_ = new QLabel;
  prompt_style_label_ = new QLabel;
  prompt_style_label_->setObjectName("promptStyleLabel");
  backend_label_ = new QLabel(tr("no model"));
  isolation_label_ = new QLabel;
  statusBar()->addWidget(progress_);
  statusBar()->addWidget(cancel_load_);
  statusBar()->addWidget(throughput_label_);
  statusBar()->addWidget(latency_label_);
  statusBar()->addWidget(acceptance_label_);
  statusBar()->addWidget(prompt_style_label_);
  statusBar()->addPermanentWidget(backend_label_);
  statusBar()->addPermanentWidget(isolation_label_);
}

void MainWindow::showSource() {
  const bool server = source_->currentData().toString() == "server";
  auto* form = static_cast<QFormLayout*>(server_panel_->parentWidget()->layout());
  for (QWidget* row : std::initializer_list<QWidget*>{model_picker_, tokenizer_picker_, draft_picker_})
    form->setRowVisible(row, !server);
  device_label_->setVisible(!server);
  device_->setVisible(!server);
  form->setRowVisible(server_panel_, server);
}

void MainWindow::buildActions() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open_model = file->addAction(tr("Open &model…"), model_picker_, &FilePicker::browse);
  open_model->setShortcut(QKeySequence::Open);
  file->addAction(tr("Open &draft model…"), draft_picker_, &FilePicker::browse);
  file->addAction(tr("Open &tokenizer…"), tokenizer_picker_, &FilePicker::browse);
  file->addAction(tr("&Find models on this computer"), this, &MainWindow::rescanModels);
  QAction* problems = file->addAction(tr("&Problems…"), this, &MainWindow::openProblems);
  problems->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_P));
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  generate_action_ = run->addAction(tr("&Generate"), this, &MainWindow::generate);
  generate_action_->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_Return), QKeySequence(Qt::CTRL | Qt::Key_Enter)});
  stop_action_ = run->addAction(tr("&Stop"), this, &MainWindow::stop);
  stop_action_->setShortcut(QKeySequence(Qt::Key_Escape));

  QMenu* go = menuBar()->addMenu(tr("&View"));
  go->addAction(tr("Focus &prompt"), QKeySequence(Qt::ALT | Qt::Key_1), prompt_, qOverload<>(&QWidget::setFocus));
  go->addAction(tr("Focus &tests"), QKeySequence(Qt::ALT | Qt::Key_2), tests_, qOverload<>(&QWidget::setFocus));
  go->addAction(tr("Focus &candidates"), QKeySequence(Qt::ALT | Qt::Key_3), this, [this] {
    if (grid_->count() > 0) grid_->pane(grid_->order().front())->editor()->setFocus();
  });
}

void MainWindow::connectWorker() {
  connect(this, &MainWindow::loadRequested, worker_, &EngineWorker::loadModels);
  connect(this, &MainWindow::connectRequested, worker_, &EngineWorker::connectServer);
  connect(server_panel_, &ServerPanel::testRequested, worker_, &EngineWorker::testServer);
  connect(worker_, &EngineWorker::serverTested, server_panel_, &ServerPanel::showResult);
  connect(this, &MainWindow::startRequested, worker_, &EngineWorker::start);
  connect(worker_, &EngineWorker::loadProgress, this, [this](double fraction) {
    if (!loading_) return;
    progress_->setValue(int(fraction * 1000));
    progress_->setFormat(tr("loading %p%"));
  });
  connect(worker_, &EngineWorker::modelsLoaded, this, &MainWindow::onModelsLoaded);
  connect(worker_, &EngineWorker::promptStyleUsed, this, &MainWindow::onPromptStyleUsed);
  connect(worker_, &EngineWorker::runStarted, this, &MainWindow::onRunStarted);
  connect(worker_, &EngineWorker::candidateDelta, this, &MainWindow::onCandidateDelta);
  connect(worker_, &EngineWorker::candidateState, this, &MainWindow::onCandidateState);
  connect(worker_, &EngineWorker::stats, this, &MainWindow::onStats);
  connect(worker_, &EngineWorker::groupsFound, this, [this](const RunGroups& groups) { last_groups_ = groups; });
  connect(worker_, &EngineWorker::runFinished, this, &MainWindow::onRunFinished);
  connect(worker_, &EngineWorker::error, this, &MainWindow::onError);
  connect(this, &MainWindow::evaluateRequested, worker_, &EngineWorker::evaluateProblems);
  connect(worker_, &EngineWorker::problemEvaluated, this, [this](const ProblemEvaluation& evaluation) {
    if (problems_) problems_->addEvaluation(evaluation);
  });
  connect(worker_, &EngineWorker::evaluationFinished, this, [this] {
    running_ = false;
    elapsed_timer_.stop();
    progress_->setFormat(tr("ready"));
    if (problems_) problems_->setRunning(false);
    updateEnabled();
  });
}

void MainWindow::loadModels(const QString& target, const QString& tokenizer, const QString& draft) {
  if (closing_ || target.isEmpty()) return;
  if (running_) worker_->stop();  // the load waits in the worker's queue until the run ends
  source_->setCurrentIndex(source_->findData("files"));
  showSource();
  model_picker_->setPath(target);
  tokenizer_picker_->setPath(tokenizer);
  draft_picker_->setPath(draft);
  showFoundModels();  // the drafts suggested for this target
  drafter_before_load_ = drafter_->currentData();
  // A draft model given anew (on the command line, by the demo pair, in its picker) is there
  // to be used; reloading the same one keeps whatever drafter the user has chosen since.
  if (!draft.isEmpty() && draft != loaded_draft_) drafter_->setCurrentIndex(drafter_->findData("model"));
  // and without a draft model, the drafter cannot be "draft model": Generate would refuse
  if (draft.isEmpty() && drafter_->currentData().toString() == "model")
    drafter_->setCurrentIndex(drafter_->findData("ngram"));
  loaded_draft_ = draft;
  loading_source_ = QStringLiteral("files");
  beginLoading(tr("loading %p%"), tr("loading %1").arg(QFileInfo(target).fileName()));
  Q_EMIT loadRequested(target, tokenizer, draft, device_->currentData().toInt(), worker_->issueTicket());
}

void MainWindow::connectServer(const QString& url, const QString& apiKey, const QString& model, bool insecure) {
  if (closing_ || url.isEmpty()) return;
  if (running_) worker_->stop();  // the connection waits in the worker's queue until the run ends
  source_->setCurrentIndex(source_->findData("server"));
  showSource();
  loading_source_ = QStringLiteral("server");
  beginLoading(tr("connecting"), tr("connecting to %1").arg(url));
  Q_EMIT connectRequested(url, apiKey, model, insecure, worker_->issueTicket());
}

// The model in use stays loaded (model_loaded_) until another replaces it: Generate waits
// for the load meanwhile, and a load that fails goes back to it.
void MainWindow::beginLoading(const QString& progress_format, const QString& what) {
  loading_ = true;
  message_bar_->hide();
  progress_->setValue(0);
  progress_->setFormat(progress_format);
  cancel_load_->show();
  backend_label_->setText(what);
  updateEnabled();
}

void MainWindow::chooseModel() { model_picker_->browse(); }

void MainWindow::rescanModels() { scanner_->start(); }

void MainWindow::showFoundModels() {
  model_picker_->setFound(tr("Found on this computer"), scanner_->modelEntries());
  draft_picker_->setFound(tr("Suggested drafts for this model"), scanner_->draftEntries(model_picker_->path()));
}

void MainWindow::reloadForDevice() {
  if (!model_picker_->path().isEmpty())
    loadModels(model_picker_->path(), tokenizer_picker_->path(), draft_picker_->path());
}

PromptContext MainWindow::promptContext() const {
  return {.chat_template = model_has_chat_template_,
          .server = in_use_.source == "server",
          .fill_in_middle = fillsAtCursor()};
}

bool MainWindow::fillsAtCursor() const { return model_loaded_ && model_fills_middle_ && fill_at_cursor_->isChecked(); }

RunRequest MainWindow::currentRequest() const {
  RunRequest request;
  request.prompt = prompt_->toPlainText();
  if (fillsAtCursor()) {  // a plain-text document's positions are the indices of its text
    const int cursor = prompt_->textCursor().position();
    request.suffix = request.prompt.mid(cursor);
    request.prompt.truncate(cursor);
  } else {
    // the body starts on a line of its own: a prompt typed as `def f(x):` has no final newline
    request.prompt = QString::fromStdString(code_prompt(request.prompt.toStdString()));
  }
  request.tests = tests_->toPlainText();
  request.candidates = candidates_->value();
  request.temperature = temperature_->value();
  request.topP = top_p_->value();
  request.maxNewTokens = max_new_tokens_->value();
  request.budgetSeconds = budget_->value();
  request.drafter = drafter_->currentData().toString();
  request.policy = policy_->currentData().toString();
  request.promptStyle = prompt_style_->currentData().toString();
  request.seed = QRandomGenerator::global()->generate64();  // Generate again: new candidates
  return request;
}

void MainWindow::generate() {
  if (running_ || loading_ || closing_) return;
  // the source chosen is the one that generates, or nothing does: never a silent fallback
  // to the model files while "Server" shows (or to a server while "Model files" does)
  const QString source = source_->currentData().toString();
  if (source == "server" && in_use_.source != source) {
    showMessage(tr("Source is Server, but no server is connected: enter its URL and press Connect, "
                   "or choose Model files."));
    return;
  }
  if (source == "files" && in_use_.source == "server") {
    showMessage(tr("Source is Model files, but the model in use is the server's: choose a model file, "
                   "or choose Server."));
    return;
  }
  if (!model_loaded_) {
    showMessage(tr("No model is loaded. Choose a model file (File → Open model…, Ctrl+O)."));
    return;
  }
  if (prompt_->toPlainText().trimmed().isEmpty()) {
    showMessage(tr("The prompt is empty: write a function signature and docstring first."));
    prompt_->setFocus();
    return;
  }
  if (!fill_at_cursor_->isChecked()) {
    if (const auto start = function_for_request(prompt_->toPlainText().toStdString())) {
      suggested_prompt_ = QString::fromStdString(*start);
      showMessage(tr("This reads as a request in words. Specula completes a Python function from its signature "
                     "and docstring; a start that asks for it:\n\n%1\nUse it, edit it, or write your own.")
                      .arg(suggested_prompt_));
      use_suggestion_->show();
      return;
    }
  }
  if (source_->currentData().toString() == "files" && drafter_->currentData().toString() == "model" &&
      draft_picker_->path().isEmpty()) {
    showMessage(tr("The drafter \"draft model\" needs a draft model: choose one, or another drafter."));
    return;
  }
  try {  // the worker asks again; here the choice that cannot be leaves the last run's panes as they are
    runPromptStyle(prompt_style_->currentData().toString(), promptContext());
  } catch (const std::invalid_argument& e) {
    showMessage(QString::fromStdString(e.what()));
    return;
  }
  message_bar_->hide();
  running_ = true;
  saveNow();
  const RunRequest request = currentRequest();
  grid_->setCount(request.candidates);
  grid_->setContext(request.prompt, request.suffix.value_or(QString()));
  last_ranking_.clear();
  last_groups_ = {};
#ifdef SPECULA_HAVE_CHARTS
  if (chart_) chart_->reset(request.candidates);
#endif
  run_budget_seconds_ = request.budgetSeconds;
  run_clock_.start();
  elapsed_timer_.start();
  updateEnabled();
  Q_EMIT startRequested(request, worker_->issueTicket());
}

void MainWindow::stop() {
  if (running_) worker_->stop();
}

void MainWindow::onModelsLoaded(const QString& summary, const QString& backend, const QString& isolation,
                                bool fillInMiddle, bool chatTemplate) {
  loading_ = false;
  model_loaded_ = true;
  model_fills_middle_ = fillInMiddle;
  model_has_chat_template_ = chatTemplate;
  prompt_style_label_->clear();  // the last run's style was another model's
  prompt_style_label_->setToolTip({});
  cancel_load_->hide();
  progress_->setValue(0);
  progress_->setFormat(tr("ready"));
  in_use_ = {.source = loading_source_, .backend = backend, .isolation = isolation};
  if (loading_source_ == "files") {
    in_use_.target = model_picker_->path();
    in_use_.tokenizer = tokenizer_picker_->path();
    in_use_.draft = draft_picker_->path();
    for (FilePicker* picker : {model_picker_, tokenizer_picker_, draft_picker_}) picker->keep();  // recent files: loaded ones only
  }
  model_picker_->setSummary(summary);
  backend_label_->setText(backend);
  backend_label_->setToolTip(summary);
  isolation_label_->setText(isolation);
  updateEnabled();
  Q_EMIT modelsReady();
}

void MainWindow::onPromptStyleUsed(const QString& summary, const QString& reason, const QString& chatPrefix) {
  prompt_style_label_->setText(summary);
  prompt_style_label_->setToolTip(chatPrefix.isEmpty() ? reason
                                                       : tr("%1\n\nWhat the model read before the code:\n%2")
                                                             .arg(reason, chatPrefix));
}

void MainWindow::onRunStarted(int candidates, double budget_seconds) {
  if (grid_->count() != candidates) grid_->setCount(candidates);
  run_budget_seconds_ = budget_seconds;
}

void MainWindow::onCandidateDelta(int index, const QString& text, int tokens, int accepted, int proposed) {
  if (index < 0 || index >= grid_->count()) return;
  grid_->pane(index)->appendText(text, tokens, accepted, proposed, run_clock_.elapsed() / 1000.0);
}

void MainWindow::onCandidateState(int index, int state, const QString& detail) {
  if (index < 0 || index >= grid_->count()) return;
  grid_->pane(index)->setState(static_cast<CandidateState>(state), detail);
}

void MainWindow::onStats(const RunStats& stats) {
#ifdef SPECULA_HAVE_CHARTS
  if (chart_) {
    chart_->setStats(stats);
    for (int i = 0; i < grid_->count() && i < chart_->candidates(); ++i) {
      const CandidatePane* pane = grid_->pane(i);
      chart_->setCandidate(i, pane->tokens(), pane->accepted(), pane->proposed());
    }
  }
#endif
  throughput_label_->setText(tr("%1 tok/s").arg(stats.tokensPerSecond, 0, 'f', 1));
  latency_label_->setText(tr("%1 ms/tok/seq").arg(stats.msPerTokenPerSequence, 0, 'f', 1));
  acceptance_label_->setText(stats.acceptance > 0 ? tr("acceptance %1%").arg(100 * stats.acceptance, 0, 'f', 0)
                                                  : QString());
}

void MainWindow::tickElapsed() {
  const double elapsed = run_clock_.elapsed() / 1000.0;
  if (run_budget_seconds_ > 0) {
    progress_->setValue(int(std::min(1.0, elapsed / run_budget_seconds_) * 1000));
    // the budget as set, decimals and all: 0.2 s read "0 s" when rounded to whole seconds
    progress_->setFormat(tr("%1 / %2 s").arg(elapsed, 0, 'f', 1).arg(run_budget_seconds_, 0, 'g', 3));
  } else {
    progress_->setValue(0);
    progress_->setFormat(tr("%1 s").arg(elapsed, 0, 'f', 1));
  }
}

void MainWindow::onRunFinished(const QVector<int>& ranking, const RunStats& stats) {
  elapsed_timer_.stop();
  tickElapsed();
  onStats(stats);
  running_ = false;
  last_ranking_ = ranking;
  grid_->applyRanking(ranking);
  grid_->applyGroups(last_groups_);
  saveNow();
  updateEnabled();
}

void MainWindow::onError(const QString& message) {
  if (loading_) {
    loading_ = false;
    cancel_load_->hide();
    progress_->setValue(0);
    if (in_use_.source.isEmpty()) {
      progress_->setFormat(tr("no model"));
      backend_label_->setText(tr("no model"));
      showMessage(message);
    } else {
      // the engine still holds the model in use: the window shows it again, selected
      progress_->setFormat(tr("ready"));
      backend_label_->setText(in_use_.backend);
      isolation_label_->setText(in_use_.isolation);
      // a failed file goes back to the source and files in use (no files when a server is);
      // a failed connection keeps the server panel up, its URL there to correct
      if (loading_source_ == "files") {
        source_->setCurrentIndex(source_->findData(in_use_.source));
        showSource();
        model_picker_->setPath(in_use_.target);
        tokenizer_picker_->setPath(in_use_.tokenizer);
        draft_picker_->setPath(in_use_.draft);
        loaded_draft_ = in_use_.draft;
        showFoundModels();
        drafter_->setCurrentIndex(drafter_->findData(drafter_before_load_));
      }
      const QString kept = in_use_.source == "files" ? QFileInfo(in_use_.target).fileName() : tr("the server");
      showMessage(tr("%1\nStill using %2.").arg(message, kept));
    }
    updateEnabled();
    Q_EMIT loadFailed();
    return;
  }
  showMessage(message);
  updateEnabled();
}

void MainWindow::showMessage(const QString& text, bool error) {
  use_suggestion_->hide();
  message_label_->setText(text);
  message_bar_->setStyleSheet(error ? QStringLiteral("#messageBar { background: #f8d7da; } #messageBar QLabel { color: #58151c; }")
                                    : QStringLiteral("#messageBar { background: #d1e7dd; } #messageBar QLabel { color: #0a3622; }"));
  message_bar_->show();
}

QString MainWindow::message() const { return message_bar_->isHidden() ? QString() : message_label_->text(); }

QString MainWindow::statusText() const {
  QStringList parts{progress_->text()};
  for (QLabel* label :
       {throughput_label_, latency_label_, acceptance_label_, prompt_style_label_, backend_label_, isolation_label_})
    if (!label->text().isEmpty()) parts << label->text();
  return parts.join(QStringLiteral(" | "));
}

void MainWindow::updateEnabled() {
  const bool can_generate = model_loaded_ && !running_ && !loading_;
  generate_button_->setEnabled(can_generate);
  generate_action_->setEnabled(can_generate);
  stop_button_->setEnabled(running_);
  stop_action_->setEnabled(running_);
  candidates_->setEnabled(!running_);
  prompt_style_->setToolTip(
      tr("How the code is put to the model. Raw: the code as it is (base models). Chat: a request to complete "
         "the function through the model's chat template (instruct models). Auto: Chat for a model with a chat "
         "template, unless filling at the cursor; Raw otherwise.") +
      (!model_loaded_ || in_use_.source == "server" ? QString()
       : model_has_chat_template_                   ? tr("\nThe model in use has a chat template.")
                                                    : tr("\nThe model in use has no chat template.")));
  fill_at_cursor_->setEnabled(model_loaded_ && model_fills_middle_ && !running_);
  fill_at_cursor_->setToolTip(!model_loaded_         ? tr("Load a model first: filling in the middle needs its FIM tokens")
                              : !model_fills_middle_ ? tr("This model has no fill-in-the-middle tokens")
                                                     : tr("Generate the code that goes at the cursor: the text before "
                                                          "it is the prompt, the text after it follows each candidate"));
}

DiffView* MainWindow::openDiff(int index) {
  if (grid_->count() < 2 || index < 0 || index >= grid_->count()) {
    showMessage(tr("A diff needs at least two candidates."), false);
    return nullptr;
  }
  // the best-ranked other candidate, preferring one whose lines differ (not just a final
  // newline, which the diff does not show): that is the diff worth seeing
  const auto lines = [](QString text) {
    while (text.endsWith('\n')) text.chop(1);
    return text;
  };
  int other = -1;
  for (int i : grid_->order()) {
    if (i == index) continue;
    if (other < 0) other = i;
    if (lines(grid_->pane(i)->text()) != lines(grid_->pane(index)->text())) {
      other = i;
      break;
    }
  }
  auto* view = new DiffView(tr("Candidate %1").arg(index + 1), grid_->pane(index)->text(),
                            tr("Candidate %1").arg(other + 1), grid_->pane(other)->text(), this);
  view->setAttribute(Qt::WA_DeleteOnClose);
  view->show();
  return view;
}

BehaviourView* MainWindow::openBehaviour(int index) {
  if (last_groups_.inputs.isEmpty()) {
    showMessage(tr("No candidate of the last run could be called on inputs."), false);
    return nullptr;
  }
  auto* view = new BehaviourView(last_groups_, grid_->order(), index, this);
  view->setAttribute(Qt::WA_DeleteOnClose);
  view->show();
  return view;
}

ProblemBrowser* MainWindow::openProblems() {
  if (!problems_) {
    problems_ = new ProblemBrowser(this);
    connect(problems_, &ProblemBrowser::problemChosen, this, [this](const QString& prompt, const QString& tests) {
      prompt_->setPlainText(prompt);
      tests_->setPlainText(tests);
      activateWindow();
      prompt_->setFocus();
    });
    connect(problems_, &ProblemBrowser::runAllRequested, this, [this](const std::vector<Problem>& problems) {
      if (running_ || loading_ || closing_) return;
      if (!model_loaded_) {
        showMessage(tr("No model is loaded. Choose a model file (File → Open model…, Ctrl+O)."));
        return;
      }
      try {  // once here, not once per task: a problem with a suffix alone is refused by the worker
        runPromptStyle(prompt_style_->currentData().toString(), {.chat_template = model_has_chat_template_,
                                                                 .server = in_use_.source == "server"});
      } catch (const std::invalid_argument& e) {
        showMessage(QString::fromStdString(e.what()));
        return;
      }
      running_ = true;
      problems_->setRunning(true);
      run_budget_seconds_ = 0.0;  // the budget is per task; the bar shows the time so far
      run_clock_.start();
      elapsed_timer_.start();
      updateEnabled();
      Q_EMIT evaluateRequested(problems, currentRequest(), worker_->issueTicket());
    });
    connect(problems_, &ProblemBrowser::stopRequested, this, &MainWindow::stop);
  }
  problems_->show();
  problems_->raise();
  problems_->activateWindow();
  return problems_;
}

void MainWindow::saveNow() {
  autosave_timer_.stop();
  SavedState state;
  state.prompt = prompt_->toPlainText();
  state.tests = tests_->toPlainText();
  for (int i = 0; i < grid_->count(); ++i) {
    const CandidatePane* pane = grid_->pane(i);
    state.candidates.push_back({.text = pane->text(),
                                .state = int(pane->state()),
                                .detail = pane->detail(),
                                .tokens = pane->tokens(),
                                .accepted = pane->accepted(),
                                .proposed = pane->proposed(),
                                .tokensPerSecond = pane->tokensPerSecond()});
  }
  state.ranking = last_ranking_;
  state.groups = last_groups_;
  state.runPrefix = grid_->prefix();
  state.runSuffix = grid_->suffix();
  QString error;
  if (!writeAutosave(state, autosavePath(), &error))
    showMessage(tr("Autosave failed: %1").arg(error));
}

void MainWindow::restoreAutosave() {
  const std::optional<SavedState> saved = readAutosave(autosavePath());
  if (!saved) {
    // the first start: an example the user can run at once, edit or replace
    prompt_->setPlainText(QStringLiteral("def add(a: int, b: int) -> int:\n    \"\"\"Return the sum of a and b.\"\"\"\n"));
    tests_->setPlainText(QStringLiteral("assert add(2, 3) == 5\nassert add(-1, 1) == 0\n"));
    return;
  }
  prompt_->setPlainText(saved->prompt);
  tests_->setPlainText(saved->tests);
  if (saved->candidates.isEmpty()) return;
  grid_->setCount(int(saved->candidates.size()));
  grid_->setContext(saved->runPrefix, saved->runSuffix);  // Copy and Save: the whole function again
  for (int i = 0; i < saved->candidates.size(); ++i) {
    const SavedCandidate& c = saved->candidates[i];
    grid_->pane(i)->setText(c.text);
    grid_->pane(i)->setNumbers(c.tokens, c.accepted, c.proposed, c.tokensPerSecond);
    grid_->pane(i)->setState(static_cast<CandidateState>(c.state), c.detail);
  }
  last_ranking_ = saved->ranking;
  last_groups_ = saved->groups;
  grid_->applyRanking(saved->ranking);
  grid_->applyGroups(saved->groups);  // ignored when it does not fit the candidates
}

void MainWindow::readSettings() {
  QSettings settings;
  candidates_->setValue(settings.value("generation/candidates", candidates_->value()).toInt());
  fill_at_cursor_->setChecked(settings.value("generation/fillAtCursor", false).toBool());
  temperature_->setValue(settings.value("generation/temperature", temperature_->value()).toDouble());
  top_p_->setValue(settings.value("generation/topP", top_p_->value()).toDouble());
  max_new_tokens_->setValue(settings.value("generation/maxNewTokens", max_new_tokens_->value()).toInt());
  budget_->setValue(settings.value("generation/budgetSeconds", budget_->value()).toDouble());
  auto select = [](QComboBox* combo, const QVariant& data) {
    const int i = combo->findData(data);
    if (i >= 0) combo->setCurrentIndex(i);
  };
  select(drafter_, settings.value("generation/drafter", drafter_->currentData()));
  select(policy_, settings.value("generation/policy", policy_->currentData()));
  select(device_, settings.value("engine/device", device_->currentData()));
  select(prompt_style_, settings.value("engine/promptStyle", prompt_style_->currentData()));
  restoreGeometry(settings.value("window/geometry").toByteArray());
  if (auto* splitter = findChild<QSplitter*>("mainSplitter"))
    splitter->restoreState(settings.value("window/splitter").toByteArray());
}

void MainWindow::writeSettings() const {
  QSettings settings;
  settings.setValue("generation/candidates", candidates_->value());
  settings.setValue("generation/fillAtCursor", fill_at_cursor_->isChecked());
  settings.setValue("generation/temperature", temperature_->value());
  settings.setValue("generation/topP", top_p_->value());
  settings.setValue("generation/maxNewTokens", max_new_tokens_->value());
  settings.setValue("generation/budgetSeconds", budget_->value());
  settings.setValue("generation/drafter", drafter_->currentData());
  settings.setValue("generation/policy", policy_->currentData());
  settings.setValue("engine/device", device_->currentData());
  settings.setValue("engine/promptStyle", prompt_style_->currentData());
  settings.setValue("window/geometry", saveGeometry());
  if (auto* splitter = findChild<QSplitter*>("mainSplitter"))
    settings.setValue("window/splitter", splitter->saveState());
  settings.sync();
}

void MainWindow::shutdownWorker() {
  if (!engine_thread_.isRunning()) return;
  closing_ = true;
  worker_->shutdown();
  engine_thread_.quit();
  engine_thread_.wait();
  delete worker_;
  worker_ = nullptr;
}

void MainWindow::closeEvent(QCloseEvent* event) {
  writeSettings();
  saveNow();
  shutdownWorker();
  event->accept();
}

}  // namespace specula::ui
