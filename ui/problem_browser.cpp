#include "problem_browser.h"

#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPushButton>
#include <QSaveFile>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <exception>

namespace specula::ui {

namespace {

const int kPassAtK[] = {1, 5, 10};  // the columns of the results table

QString first_line(const std::string& text) {
  const QString all = QString::fromStdString(text).trimmed();
  for (const QString& line : all.split('\n')) {
    const QString trimmed = line.trimmed();
    if (!trimmed.isEmpty() && !trimmed.startsWith("from ") && !trimmed.startsWith("import ")) return trimmed;
  }
  return all.left(80);
}

QString pass_at(const ProblemEvaluation& e, int k) {
  for (const auto& [kk, value] : e.pass_at_k)
    if (kk == k) return QString::number(value, 'f', 3);
  return {};
}

bool write_atomically(const QString& path, const QByteArray& bytes) {
  QSaveFile file(path);
  return file.open(QIODevice::WriteOnly) && file.write(bytes) == bytes.size() && file.commit();
}

}  // namespace

ProblemBrowser::ProblemBrowser(QWidget* parent)
    : QDialog(parent),
      file_label_(new QLabel(tr("No problem file open."))),
      tasks_(new QTableWidget(0, 2)),
      results_(new QTableWidget(0, 6 + int(std::size(kPassAtK)))),
      summary_(new QLabel),
      run_all_(new QPushButton(tr("&Run all"))),
      stop_(new QPushButton(tr("S&top"))),
      export_csv_(new QPushButton(tr("Export &CSV…"))),
      export_samples_(new QPushButton(tr("Export &samples…"))) {
  setObjectName("problemBrowser");
  setWindowTitle(tr("Problems"));
  auto* open = new QPushButton(tr("&Open…"));
  connect(open, &QPushButton::clicked, this, &ProblemBrowser::browse);

  tasks_->setObjectName("tasksTable");
  tasks_->setHorizontalHeaderLabels({tr("Task"), tr("Prompt")});
  tasks_->horizontalHeader()->setStretchLastSection(true);
  tasks_->setSelectionBehavior(QAbstractItemView::SelectRows);
  tasks_->setSelectionMode(QAbstractItemView::SingleSelection);
  tasks_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  tasks_->verticalHeader()->hide();
  connect(tasks_, &QTableWidget::cellDoubleClicked, this, &ProblemBrowser::chooseCurrent);
  auto* use = new QPushButton(tr("&Use this task"));
  use->setToolTip(tr("Put the task's prompt and tests into the editors (Enter)"));
  // Enter anywhere in the dialog uses the selected task; no other button is pressed by Enter.
  for (QPushButton* button : {open, run_all_, stop_, export_csv_, export_samples_}) button->setAutoDefault(false);
  use->setDefault(true);
  connect(use, &QPushButton::clicked, this, &ProblemBrowser::chooseCurrent);

  QStringList headers{tr("Task"), tr("n"), tr("passed"), tr("Pass@First"), tr("Pass@All"), tr("seconds")};
  for (int k : kPassAtK) headers << QStringLiteral("pass@%1").arg(k);
  results_->setObjectName("resultsTable");
  results_->setHorizontalHeaderLabels(headers);
  results_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  results_->verticalHeader()->hide();
  summary_->setObjectName("summary");
  run_all_->setObjectName("runAllButton");
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  connect(run_all_, &QPushButton::clicked, this, [this] {
    evaluations_.clear();
    results_->setRowCount(0);
    updateSummary();
    Q_EMIT runAllRequested(problems_);
  });
  connect(stop_, &QPushButton::clicked, this, &ProblemBrowser::stopRequested);
  connect(export_csv_, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export results"), "results.csv", tr("CSV (*.csv)"));
    if (!path.isEmpty() && !exportCsv(path)) summary_->setText(tr("Could not write %1").arg(path));
  });
  connect(export_samples_, &QPushButton::clicked, this, [this] {
    const QString path =
        QFileDialog::getSaveFileName(this, tr("Export samples"), "samples.jsonl", tr("JSON lines (*.jsonl)"));
    if (!path.isEmpty() && !exportSamples(path)) summary_->setText(tr("Could not write %1").arg(path));
  });

  auto* top = new QHBoxLayout;
  top->addWidget(open);
  top->addWidget(file_label_, 1);
  auto* task_buttons = new QHBoxLayout;
  task_buttons->addWidget(use);
  task_buttons->addStretch(1);
  task_buttons->addWidget(run_all_);
  task_buttons->addWidget(stop_);
  auto* export_buttons = new QHBoxLayout;
  export_buttons->addWidget(summary_, 1);
  export_buttons->addWidget(export_csv_);
  export_buttons->addWidget(export_samples_);

  auto* task_side = new QWidget;
  auto* task_layout = new QVBoxLayout(task_side);
  task_layout->setContentsMargins(0, 0, 0, 0);
  task_layout->addWidget(tasks_);
  task_layout->addLayout(task_buttons);
  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->addWidget(task_side);
  splitter->addWidget(results_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(splitter, 1);
  layout->addLayout(export_buttons);
  setRunning(false);
  resize(900, 640);
}

void ProblemBrowser::browse() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open problems"), {},
                                                    tr("Problem sets (*.jsonl *.jsonl.gz *.gz);;All files (*)"));
  if (!path.isEmpty()) openFile(path);
}

bool ProblemBrowser::openFile(const QString& path) {
  ProblemSet set;
  try {
    set = load_problems(path.toStdString());
  } catch (const std::exception& e) {
    file_label_->setText(tr("Could not open %1: %2").arg(path, QString::fromStdString(e.what())));
    return false;
  }
  problems_ = std::move(set.problems);
  evaluations_.clear();
  results_->setRowCount(0);
  QString label = tr("%1: %n task(s)", nullptr, int(problems_.size())).arg(QFileInfo(path).fileName());
  if (!set.issues.empty())
    label += tr(", %n line(s) skipped (first: line %1, %2)", nullptr, int(set.issues.size()))
                 .arg(set.issues.front().line)
                 .arg(QString::fromStdString(set.issues.front().message));
  file_label_->setText(label);
  tasks_->setRowCount(int(problems_.size()));
  for (int row = 0; row < int(problems_.size()); ++row) {
    tasks_->setItem(row, 0, new QTableWidgetItem(QString::fromStdString(problems_[size_t(row)].task_id)));
    tasks_->setItem(row, 1, new QTableWidgetItem(first_line(problems_[size_t(row)].prompt)));
  }
  tasks_->resizeColumnToContents(0);
  if (!problems_.empty()) tasks_->selectRow(0);
  updateSummary();
  setRunning(false);
  return true;
}

void ProblemBrowser::chooseCurrent() {
  const int row = tasks_->currentRow();
  if (row < 0 || row >= int(problems_.size())) return;
  const Problem& p = problems_[size_t(row)];
  // The editors hold what the model sees and tests the app can run as they are: HumanEval's
  // check(candidate) gets called on the entry point by the test program.
  Q_EMIT problemChosen(QString::fromStdString(p.prompt), QString::fromStdString(p.test));
}

void ProblemBrowser::addEvaluation(const ProblemEvaluation& e) {
  evaluations_.push_back(e);
  const int row = results_->rowCount();
  results_->insertRow(row);
  QStringList cells{QString::fromStdString(e.task_id), QString::number(e.n), QString::number(e.c),
                    e.pass_first ? tr("yes") : tr("no"), e.pass_all ? tr("yes") : tr("no"),
                    QString::number(e.seconds, 'f', 1)};
  for (int k : kPassAtK) cells << pass_at(e, k);
  for (int column = 0; column < cells.size(); ++column) results_->setItem(row, column, new QTableWidgetItem(cells[column]));
  results_->scrollToBottom();
  updateSummary();
}

void ProblemBrowser::setRunning(bool running) {
  run_all_->setEnabled(!running && !problems_.empty());
  stop_->setEnabled(running);
  export_csv_->setEnabled(!running && !evaluations_.empty());
  export_samples_->setEnabled(!running && !evaluations_.empty());
}

QString ProblemBrowser::summary() const { return summary_->text(); }

void ProblemBrowser::updateSummary() {
  if (evaluations_.empty()) {
    summary_->setText(problems_.empty() ? QString() : tr("Not run yet."));
    return;
  }
  int first = 0, all = 0;
  std::vector<std::pair<int, int>> tasks;
  for (const ProblemEvaluation& e : evaluations_) {
    first += e.pass_first;
    all += e.pass_all;
    if (e.n > 0) tasks.emplace_back(e.n, e.c);
  }
  const int total = int(evaluations_.size());
  QString text = tr("%1 of %2 tasks · Pass@First %3% · Pass@All %4%")
                     .arg(total)
                     .arg(problems_.size())
                     .arg(100.0 * first / total, 0, 'f', 1)
                     .arg(100.0 * all / total, 0, 'f', 1);
  if (!tasks.empty())
    for (const auto& [k, value] : mean_pass_at_ks(tasks)) text += tr(" · pass@%1 %2%").arg(k).arg(100 * value, 0, 'f', 1);
  summary_->setText(text);
}

bool ProblemBrowser::exportCsv(const QString& path) const {
  QByteArray csv = "task_id,n,passed,pass_first,pass_all,seconds";
  for (int k : kPassAtK) csv += ",pass@" + QByteArray::number(k);
  csv += '\n';
  for (const ProblemEvaluation& e : evaluations_) {
    QString task = QString::fromStdString(e.task_id);
    task.replace('"', "\"\"");
    csv += QStringLiteral("\"%1\",%2,%3,%4,%5,%6")
               .arg(task)
               .arg(e.n)
               .arg(e.c)
               .arg(int(e.pass_first))
               .arg(int(e.pass_all))
               .arg(e.seconds, 0, 'f', 3)
               .toUtf8();
    for (int k : kPassAtK) csv += ',' + pass_at(e, k).toUtf8();
    csv += '\n';
  }
  return write_atomically(path, csv);
}

bool ProblemBrowser::exportSamples(const QString& path) const {
  QByteArray lines;
  for (const ProblemEvaluation& e : evaluations_)
    for (const EvaluatedCandidate& c : e.candidates)
      lines += QJsonDocument(QJsonObject{{"task_id", QString::fromStdString(e.task_id)},
                                         {"completion", QString::fromStdString(c.completion)}})
                   .toJson(QJsonDocument::Compact) +
               '\n';
  return write_atomically(path, lines);
}

}  // namespace specula::ui
