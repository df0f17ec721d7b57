// The main window: prompt and tests editors, model pickers, generation settings, the
// candidate grid and a status bar with live throughput. It owns the engine worker's
// thread and talks to the worker only through queued signals (and its thread-safe stop()).
#pragma once

#include <QElapsedTimer>
#include <QMainWindow>
#include <QThread>
#include <QTimer>
#include <memory>

#include "autosave.h"
#include "engine_port.h"
#include "prompt_choice.h"
#include "run_types.h"

class QAction;
class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QGroupBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QToolButton;

namespace specula::ui {

class BehaviourView;
class CandidateGrid;
class CodeEditor;
class EngineWorker;
class DiffView;
class FilePicker;
class ModelScanner;
class ProblemBrowser;
class ServerPanel;
class ThroughputChart;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(std::unique_ptr<EnginePort> engine, QWidget* parent = nullptr);
  ~MainWindow() override;

  CodeEditor* promptEditor() const { return prompt_; }
  CodeEditor* testsEditor() const { return tests_; }
  CandidateGrid* grid() const { return grid_; }
  // The worker on the engine thread; tests connect to its signals directly to act in step with it.
  EngineWorker* worker() const { return worker_; }
  bool isRunning() const { return running_; }  // a generation or a "Run all" evaluation
  bool isLoading() const { return loading_; }
  bool hasModel() const { return model_loaded_; }
  QString message() const;  // the message bar's text; empty when hidden
  QString statusText() const;  // the status bar's labels joined, for tests and screenshots

 public Q_SLOTS:
  // Loads the target model (and tokenizer / draft when given) on the engine thread.
  void loadModels(const QString& target, const QString& tokenizer = {}, const QString& draft = {});
  // Generates on an OpenAI-compatible server instead (the Models panel's "Server" choice).
  void connectServer(const QString& url, const QString& apiKey, const QString& model, bool insecure);
  void chooseModel();  // the file dialog for the target model
  void generate();
  void stop();
  void saveNow();  // autosave immediately
  void showMessage(const QString& text, bool error = true);
  // The side-by-side diff of candidate `index` against the best-ranked other one.
  DiffView* openDiff(int index);
  // The last run's behaviour probe: inputs, and each group's outputs, `index`'s group selected.
  BehaviourView* openBehaviour(int index);
  // The problem browser (created on first use), shown and raised.
  ProblemBrowser* openProblems();
  // Looks for the models on this computer again (in the background; the pickers list them).
  void rescanModels();

 Q_SIGNALS:
  void modelsReady();
  void loadFailed();
  // To the worker (queued).
  void loadRequested(const QString& target, const QString& tokenizer, const QString& draft, int device, int ticket);
  void connectRequested(const QString& url, const QString& apiKey, const QString& model, bool insecure, int ticket);
  void startRequested(const specula::ui::RunRequest& request, int ticket);
  void evaluateRequested(const std::vector<specula::Problem>& problems, const specula::ui::RunRequest& request,
                         int ticket);

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void buildUi();
  void buildEditors();
  QGroupBox* buildModelsPanel();
  QGroupBox* buildGenerationPanel();
  QWidget* buildResultsArea();
  void buildStatusBar();
  void buildActions();
  void connectWorker();
  void readSettings();
  void writeSettings() const;
  void restoreAutosave();
  void updateEnabled();
  void reloadForDevice();
  void showFoundModels();  // the scan's models in the model picker, the target's drafts in the draft picker
  void beginLoading(const QString& progress_format, const QString& what);
  void showSource();  // the file pickers or the server panel
  void shutdownWorker();
  RunRequest currentRequest() const;
  bool fillsAtCursor() const;  // the next run fills in the middle at the prompt editor's cursor
  PromptContext promptContext() const;  // the model in use and the next run, for its prompt style

  // Worker signal handlers.
  void onModelsLoaded(const QString& summary, const QString& backend, const QString& isolation, bool fillInMiddle,
                      bool chatTemplate);
  void onPromptStyleUsed(const QString& summary, const QString& reason, const QString& chatPrefix);
  void onRunStarted(int candidates, double budget_seconds);
  void onCandidateDelta(int index, const QString& text, int tokens, int accepted, int proposed);
  void onCandidateState(int index, int state, const QString& detail);
  void onStats(const RunStats& stats);
  void onRunFinished(const QVector<int>& ranking, const RunStats& stats);
  void onError(const QString& message);
  void tickElapsed();

  QThread engine_thread_;
  EngineWorker* worker_;  // lives on engine_thread_; deleted after the thread ends

  CodeEditor* prompt_;
  CodeEditor* tests_;
  QCheckBox* fill_at_cursor_;  // "Fill at cursor": the prompt editor is the code box around the hole
  FilePicker* model_picker_;
  FilePicker* tokenizer_picker_;
  FilePicker* draft_picker_;
  ModelScanner* scanner_;  // the models found on this computer
  QString loaded_draft_;  // the draft model of the last load request
  // What the engine holds, by the last load or connection that succeeded; a failed one
  // leaves it in use, and the pickers go back to it.
  struct InUse {
    QString source;  // "files" or "server"; empty: nothing loaded yet
    QString target, tokenizer, draft;  // the files, for "files"
    QString backend, isolation;        // the status bar's labels
  };
  InUse in_use_;
  QString loading_source_;  // the source of the load or connection under way
  QVariant drafter_before_load_;  // the drafter chosen before loadModels changed it, back on failure
  QSpinBox* candidates_;
  QDoubleSpinBox* temperature_;
  QDoubleSpinBox* top_p_;
  QSpinBox* max_new_tokens_;
  QDoubleSpinBox* budget_;
  QComboBox* drafter_;
  QComboBox* policy_;
  QComboBox* device_;
  QComboBox* prompt_style_;  // "auto", "raw" or "chat" (prompt_choice.h)
  QLabel* device_label_;
  QComboBox* source_;  // "files" or "server"
  ServerPanel* server_panel_;
  QPushButton* generate_button_;
  QPushButton* stop_button_;
  CandidateGrid* grid_;
  QWidget* message_bar_;
  QLabel* message_label_;
  QToolButton* use_suggestion_;  // in the message bar: puts suggested_prompt_ in the prompt box
  QString suggested_prompt_;     // a function start for a request written in words
  QProgressBar* progress_;
  QToolButton* cancel_load_;
  QLabel* throughput_label_;
  QLabel* latency_label_;
  QLabel* acceptance_label_;
  QLabel* prompt_style_label_;  // the style the last run used
  QLabel* backend_label_;
  QLabel* isolation_label_;
  QAction* generate_action_;
  QAction* stop_action_;
  ProblemBrowser* problems_ = nullptr;
  ThroughputChart* chart_ = nullptr;  // null when built without Qt Charts

  QTimer autosave_timer_;  // debounces edits
  QTimer elapsed_timer_;   // moves the budget bar between statistics updates
  QElapsedTimer run_clock_;
  double run_budget_seconds_ = 0.0;
  bool running_ = false;
  bool loading_ = false;
  bool model_loaded_ = false;
  bool model_fills_middle_ = false;  // the loaded model has FIM tokens
  bool model_has_chat_template_ = false;  // the loaded model carries a chat template
  bool closing_ = false;
  QVector<int> last_ranking_;
  RunGroups last_groups_;  // the last run's groups (empty until it has them)
};

}  // namespace specula::ui
