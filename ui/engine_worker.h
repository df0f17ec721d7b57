// The engine worker: a QObject that lives on its own QThread and owns the engine (models,
// backend, sessions). The window reaches it only through queued slots and hears from it
// only through signals; no widget ever holds an engine pointer.
//
// A running session blocks the worker's thread, so a queued stop() would arrive too late:
// stop() is therefore thread-safe and called directly; it sets the flag that run_session
// checks every decoding step (and that model loading checks between tensors). Every request
// carries a ticket from issueTicket(), so that stop() also cancels requests still waiting in
// the queue, and never one issued after it.
#pragma once

#include <QObject>
#include <QString>
#include <QVector>
#include <atomic>
#include <memory>
#include <optional>

#include "engine_port.h"
#include "run_types.h"

namespace specula::ui {

class EngineWorker : public QObject {
  Q_OBJECT

 public:
  explicit EngineWorker(std::unique_ptr<EnginePort> engine, QObject* parent = nullptr);
  ~EngineWorker() override;

  // Thread-safe: the number to pass with the next request.
  int issueTicket();
  // Thread-safe: ends a running session within one decoding step, or cancels a load, and
  // cancels every request issued so far.
  void stop();
  // Thread-safe: stops for good; runs and loads still queued are skipped. Called on close.
  void shutdown();

 public Q_SLOTS:
  // device: 0 auto, 1 cpu, 2 cuda (DeviceChoice order).
  void loadModels(const QString& target, const QString& tokenizer, const QString& draft, int device, int ticket);
  // Generation on an OpenAI-compatible server from now on, once it answers (modelsLoaded or error).
  void connectServer(const QString& url, const QString& apiKey, const QString& model, bool insecure, int ticket);
  // The connection test: serverTested says what the server answers, nothing else changes.
  void testServer(const QString& url, const QString& apiKey, const QString& model, bool insecure);
  void start(const specula::ui::RunRequest& request, int ticket);
  // "Run all": each problem in turn, request.candidates candidates within request.budgetSeconds each.
  void evaluateProblems(const std::vector<specula::Problem>& problems, const specula::ui::RunRequest& request,
                        int ticket);

 Q_SIGNALS:
  void loadProgress(double fraction);
  // fillInMiddle: the model has FIM tokens, so a RunRequest may carry a suffix; chatTemplate:
  // it carries a chat template, so it can be prompted in the chat style.
  void modelsLoaded(const QString& summary, const QString& backend, const QString& isolation, bool fillInMiddle,
                    bool chatTemplate);
  // The prompt style a run uses (prompt_choice.h), before its runStarted: the status bar's
  // words, why that style, and the chat the model reads before the code (empty: raw).
  void promptStyleUsed(const QString& summary, const QString& reason, const QString& chatPrefix);
  void runStarted(int candidates, double budgetSeconds);
  void candidateDelta(int index, const QString& text, int tokens, int accepted, int proposed);
  void candidateState(int index, int state, const QString& detail);  // CandidateState
  void stats(const specula::ui::RunStats& stats);
  void groupsFound(const specula::ui::RunGroups& groups);  // just before runFinished
  void runFinished(const QVector<int>& ranking, const specula::ui::RunStats& stats);
  void problemEvaluated(const specula::ProblemEvaluation& evaluation);
  void evaluationFinished();
  void error(const QString& message);
  void serverTested(bool ok, const QString& message);

 private:
  std::unique_ptr<EnginePort> engine_;
  bool loaded_ = false;
  std::optional<ModelChatTemplate> chat_template_;  // the model in use's, for the chat prompt style
  bool server_ = false;                             // the model in use is a server's
  // Sets stop_ for the request `ticket`; returns false when the worker is shut down.
  bool begin(int ticket);
  // Why the run's prompt does not parse on its own, with a stub for its body (and then stop_
  // is set); empty when it does, with a suffix, or when the sandbox cannot say.
  std::string checkPrompt(const GenerationRequest& generation);
  // Puts `generation` to the model in the style `choice` means for it (chat: its chat_prefix
  // and the closing fence's stop) and says so with promptStyleUsed when `announce`. Throws
  // std::invalid_argument with the window's message where the choice cannot be.
  void applyPromptStyle(GenerationRequest& generation, const QString& choice, bool announce);

  std::atomic<bool> stop_{false};       // the current request's stop flag
  std::atomic<int> issued_{0};          // the last ticket handed out
  std::atomic<int> cancelled_upto_{0};  // every ticket up to this one is cancelled
  std::atomic<bool> shut_down_{false};
};

}  // namespace specula::ui
