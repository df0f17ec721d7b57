// One candidate: a header (number, state, how many identical candidates it stands for, the
// candidates that behave the same, tokens, tokens/s, acceptance, best mark), the summary of
// its verdict, its streamed completion, and copy / save / diff / behaviour actions.
#pragma once

#include <QFrame>
#include <QString>
#include <QVector>

#include "run_types.h"

class QLabel;
class QToolButton;

namespace specula::ui {

class CodeEditor;

class CandidatePane : public QFrame {
  Q_OBJECT

 public:
  CandidatePane(int index, QWidget* parent = nullptr);

  CandidateState state() const { return state_; }
  QString text() const;  // the completion alone
  // The code a user takes away (Copy, Save): the prompt, the completion and, when filling
  // in the middle, the code after it. The completion alone would not run.
  QString code() const { return prefix_ + text() + suffix_; }
  // What the run put around the completion: its prompt and its suffix (empty when none).
  void setContext(const QString& prefix, const QString& suffix);
  bool saveTo(const QString& path, QString* error = nullptr) const;  // code() to `path`
  CodeEditor* editor() const { return editor_; }
  int tokens() const { return tokens_; }
  int accepted() const { return accepted_; }
  int proposed() const { return proposed_; }
  double tokensPerSecond() const { return tokens_per_second_; }
  QString detail() const { return detail_; }  // the verdict's detail (setState)

  void reset();
  void appendText(const QString& text, int tokens, int accepted, int proposed, double elapsed_seconds);
  // `detail`'s first line is shown under the header, all of it as the tooltip.
  void setState(CandidateState state, const QString& detail = {});
  // rank 0: not ranked; `top`: the first shown, marked "best" when it passed, else "closest"
  void setRank(int rank, bool top);
  bool isBest() const;  // the top candidate, and it passed
  void setText(const QString& text);   // restoring a saved run, with its numbers:
  void setNumbers(int tokens, int accepted, int proposed, double tokens_per_second);
  // The other candidates (indices) with this one's text, collapsed into this pane.
  void setDuplicates(const QVector<int>& others);
  // The other shown candidates (indices) that behave as this one does: the badge.
  void setSameBehaviour(const QVector<int>& others);
  void setBehaviourAvailable(bool available);  // whether "Behaviour…" has outputs to show

 Q_SIGNALS:
  void diffRequested(int index);
  void behaviourRequested(int index);

 private:
  void updateHeader();
  void copyToClipboard();
  void saveToFile();

  int index_;
  QString prefix_, suffix_;
  CandidateState state_ = CandidateState::Queued;
  QString detail_;  // what setState was told: first line under the header, all as the tooltip
  int tokens_ = 0, accepted_ = 0, proposed_ = 0;
  double tokens_per_second_ = 0.0;
  int rank_ = 0;
  bool top_ = false;  // ranked first
  QLabel* title_;
  QLabel* state_label_;
  QLabel* duplicates_;     // "×3" when identical candidates are collapsed into this pane
  QLabel* badge_;          // "same behaviour as #3, #5"
  QLabel* numbers_;
  QLabel* note_;           // the first line of the verdict's detail
  QToolButton* behaviour_;
  CodeEditor* editor_;
};

}  // namespace specula::ui
