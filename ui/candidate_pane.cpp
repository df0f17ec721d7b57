#include "candidate_pane.h"

#include <QApplication>
#include <QClipboard>
#include <QFile>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QMessageBox>
#include <QSaveFile>
#include <QToolButton>
#include <QVBoxLayout>

#include "code_editor.h"

namespace specula::ui {

namespace {

// Header chip colours: the meaning (green pass, red fail, amber timeout) reads on light and dark.
QString chip_style(CandidateState state) {
  QString colour = "#7f7f7f";
  switch (state) {
    case CandidateState::Generating: colour = "#2f7bd8"; break;
    case CandidateState::Testing: colour = "#8a5cd0"; break;
    case CandidateState::Passed: colour = "#2e9d48"; break;
    case CandidateState::Checked: colour = "#2b8a8a"; break;
    case CandidateState::Failed:
    case CandidateState::Error: colour = "#d0403b"; break;
    case CandidateState::Timeout:
    case CandidateState::Budget: colour = "#c98a14"; break;
    default: break;
  }
  return QStringLiteral("QLabel { background: %1; color: white; border-radius: 4px; padding: 1px 6px; }")
      .arg(colour);
}

}  // namespace

CandidatePane::CandidatePane(int index, QWidget* parent)
    : QFrame(parent),
      index_(index),
      title_(new QLabel),
      state_label_(new QLabel),
      duplicates_(new QLabel),
      badge_(new QLabel),
      numbers_(new QLabel),
      note_(new QLabel),
      behaviour_(new QToolButton),
      editor_(new CodeEditor) {
  setObjectName(QStringLiteral("candidate%1").arg(index));
  setFrameShape(QFrame::StyledPanel);
  setMinimumSize(300, 220);
  editor_->setReadOnly(true);
  editor_->setLineWrapMode(QPlainTextEdit::WidgetWidth);  // a narrow pane shows every character
  editor_->setTabChangesFocus(true);
  editor_->setAccessibleName(tr("Candidate %1").arg(index + 1));

  auto* copy = new QToolButton;
  copy->setText(tr("Copy"));
  copy->setObjectName("copyButton");
  copy->setToolTip(tr("Copy this candidate's whole code, prompt included, to the clipboard"));
  connect(copy, &QToolButton::clicked, this, &CandidatePane::copyToClipboard);
  auto* save = new QToolButton;
  save->setText(tr("Save…"));
  save->setToolTip(tr("Save this candidate's whole code, prompt included, as a Python file"));
  connect(save, &QToolButton::clicked, this, &CandidatePane::saveToFile);
  auto* diff = new QToolButton;
  diff->setText(tr("Diff…"));
  diff->setToolTip(tr("Compare this candidate side by side with another"));
  connect(diff, &QToolButton::clicked, this, [this] { Q_EMIT diffRequested(index_); });
  behaviour_->setText(tr("Behaviour…"));
  behaviour_->setObjectName("behaviourButton");
  behaviour_->setToolTip(tr("The inputs every candidate was run on, and each group's outputs"));
  behaviour_->setEnabled(false);
  connect(behaviour_, &QToolButton::clicked, this, [this] { Q_EMIT behaviourRequested(index_); });

  // The actions have a row of their own under the code: beside the title they left it too
  // little room in a narrow pane ("★ #6 rank 1 be").
  auto* header = new QHBoxLayout;
  header->addWidget(title_);
  header->addWidget(state_label_);
  header->addWidget(duplicates_);
  header->addStretch(1);
  auto* actions = new QHBoxLayout;
  actions->addStretch(1);
  actions->addWidget(copy);
  actions->addWidget(save);
  actions->addWidget(diff);
  actions->addWidget(behaviour_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->setSpacing(2);
  layout->addLayout(header);
  layout->addWidget(numbers_);
  layout->addWidget(badge_);
  layout->addWidget(note_);
  layout->addWidget(editor_, 1);
  layout->addLayout(actions);
  title_->setObjectName("title");
  numbers_->setObjectName("numbers");
  state_label_->setObjectName("state");
  duplicates_->setObjectName("duplicateCount");
  duplicates_->setStyleSheet(QStringLiteral("QLabel { border: 1px solid palette(mid); border-radius: 4px; padding: 0 4px; }"));
  badge_->setObjectName("groupBadge");
  note_->setObjectName("note");
  note_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  note_->setWordWrap(true);
  reset();
}

QString CandidatePane::text() const { return editor_->toPlainText(); }

void CandidatePane::reset() {
  editor_->clear();
  state_ = CandidateState::Queued;
  detail_.clear();
  tokens_ = accepted_ = proposed_ = 0;
  tokens_per_second_ = 0.0;
  rank_ = 0;
  top_ = false;
  setToolTip({});
  note_->clear();
  note_->hide();
  setDuplicates({});
  setSameBehaviour({});
  setBehaviourAvailable(false);
  updateHeader();
}

namespace {

QString numbered(const QVector<int>& indices) {
  QStringList names;
  for (int i : indices) names << QStringLiteral("#%1").arg(i + 1);
  return names.join(QStringLiteral(", "));
}

}  // namespace

void CandidatePane::setDuplicates(const QVector<int>& others) {
  duplicates_->setVisible(!others.isEmpty());
  duplicates_->setText(QStringLiteral("×%1").arg(others.size() + 1));
  duplicates_->setToolTip(tr("Also the text of %1").arg(numbered(others)));
}

void CandidatePane::setSameBehaviour(const QVector<int>& others) {
  badge_->setVisible(!others.isEmpty());
  badge_->setText(others.isEmpty() ? QString() : tr("same behaviour as %1").arg(numbered(others)));
}

void CandidatePane::setBehaviourAvailable(bool available) { behaviour_->setEnabled(available); }

void CandidatePane::appendText(const QString& text, int tokens, int accepted, int proposed,
                               double elapsed_seconds) {
  editor_->appendStreamed(text);
  tokens_ = tokens;
  accepted_ = accepted;
  proposed_ = proposed;
  tokens_per_second_ = elapsed_seconds > 0 ? tokens / elapsed_seconds : 0.0;
  updateHeader();
}

void CandidatePane::setText(const QString& text) {
  editor_->setPlainText(text);
  updateHeader();
}

void CandidatePane::setNumbers(int tokens, int accepted, int proposed, double tokens_per_second) {
  tokens_ = tokens;
  accepted_ = accepted;
  proposed_ = proposed;
  tokens_per_second_ = tokens_per_second;
  updateHeader();
}

void CandidatePane::setState(CandidateState state, const QString& detail) {
  state_ = state;
  detail_ = detail;
  setToolTip(detail);
  note_->setText(detail.section(QLatin1Char('\n'), 0, 0));
  note_->setVisible(!detail.isEmpty());
  updateHeader();
}

void CandidatePane::setRank(int rank, bool top) {
  rank_ = rank;
  top_ = top;
  updateHeader();
}

bool CandidatePane::isBest() const { return top_ && state_ == CandidateState::Passed; }

void CandidatePane::updateHeader() {
  QString title = QStringLiteral("#%1").arg(index_ + 1);
  // "best" is a promise that the code works: only for a top candidate that passed. When
  // nothing passed, the top one is only the closest by the ranking.
  const bool best = isBest();
  if (rank_ > 0) title += tr("  rank %1").arg(rank_);
  if (best) title = QStringLiteral("★ ") + title + tr("  best");
  else if (top_) title += tr("  closest");
  title_->setText(title);
  title_->setToolTip(best || !top_ ? QString() : tr("No candidate passed: this one ranks first, but it did not pass"));
  QFont font = title_->font();
  font.setBold(best);
  title_->setFont(font);
  state_label_->setText(stateName(state_));
  state_label_->setStyleSheet(chip_style(state_));
  QString numbers = tr("%1 tok").arg(tokens_);
  if (tokens_per_second_ > 0) numbers += tr(" · %1 tok/s").arg(tokens_per_second_, 0, 'f', 1);
  if (proposed_ > 0) numbers += tr(" · acc %1%").arg(100.0 * accepted_ / proposed_, 0, 'f', 0);
  numbers_->setText(numbers);
  setStyleSheet(best ? QStringLiteral("QFrame#%1 { border: 2px solid #2e9d48; }").arg(objectName())
                      : QString());
}

void CandidatePane::setContext(const QString& prefix, const QString& suffix) {
  prefix_ = prefix;
  suffix_ = suffix;
}

void CandidatePane::copyToClipboard() { QApplication::clipboard()->setText(code()); }

bool CandidatePane::saveTo(const QString& path, QString* error) const {
  QSaveFile file(path);
  if (file.open(QIODevice::WriteOnly) && file.write(code().toUtf8()) >= 0 && file.commit()) return true;
  if (error) *error = file.errorString();
  return false;
}

void CandidatePane::saveToFile() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Save candidate %1").arg(index_ + 1),
                                                    QStringLiteral("candidate_%1.py").arg(index_ + 1),
                                                    tr("Python (*.py);;All files (*)"));
  if (path.isEmpty()) return;
  QString error;
  if (!saveTo(path, &error))
    QMessageBox::warning(this, tr("Save failed"), tr("Could not write %1: %2").arg(path, error));
}

}  // namespace specula::ui
