// One candidate: a header (number, state, tokens, tokens/s, acceptance, best mark), its
// streamed completion, and copy / save / diff actions.
#pragma once

#include <QFrame>
#include <QString>

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
  QString text() const;
  CodeEditor* editor() const { return editor_; }

  void reset();
  void appendText(const QString& text, int tokens, int accepted, int proposed, double elapsed_seconds);
  void setState(CandidateState state, const QString& detail = {});
  void setRank(int rank, bool best);  // rank 0: not ranked
  void setText(const QString& text);   // restoring a saved run

 Q_SIGNALS:
  void diffRequested(int index);

 private:
  void updateHeader();
  void copyToClipboard();
  void saveToFile();

  int index_;
  CandidateState state_ = CandidateState::Queued;
  int tokens_ = 0, accepted_ = 0, proposed_ = 0;
  double tokens_per_second_ = 0.0;
  int rank_ = 0;
  bool best_ = false;
  QLabel* title_;
  QLabel* state_label_;
  QLabel* numbers_;
  CodeEditor* editor_;
};

}  // namespace specula::ui
