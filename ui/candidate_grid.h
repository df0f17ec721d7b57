// N candidate panes side by side, wrapping into rows inside a scroll area. Reordering by
// rank moves the existing panes in the layout, so each keeps its text and scroll position.
// Once a run has its groups, candidates whose text another pane already shows are
// collapsed into that pane (its count says how many), and the others fill the grid.
#pragma once

#include <QScrollArea>
#include <QVector>
#include <vector>

#include "run_types.h"

class QLabel;

namespace specula::ui {

class CandidatePane;

class CandidateGrid : public QScrollArea {
  Q_OBJECT

 public:
  explicit CandidateGrid(QWidget* parent = nullptr);

  void setCount(int n);  // keeps existing panes, clears them, adds or removes the difference
  // The run's prompt and suffix, which every pane's Copy and Save put around its completion.
  void setContext(const QString& prefix, const QString& suffix);
  const QString& prefix() const { return prefix_; }
  const QString& suffix() const { return suffix_; }
  int count() const { return int(panes_.size()); }
  CandidatePane* pane(int index) const { return panes_.at(size_t(index)); }
  const QVector<int>& order() const { return order_; }  // every pane, collapsed ones too
  // Shows panes in `ranking` order (best first) and marks the best; an empty ranking
  // restores index order.
  void applyRanking(const QVector<int>& ranking);
  // Collapses identical texts into their best-ranked pane, and badges the panes that
  // behave alike (after applyRanking, with the same run's groups).
  void applyGroups(const RunGroups& groups);
  bool isCollapsed(int index) const { return collapsed_.at(size_t(index)); }
  int shownCount() const;  // panes not collapsed

 Q_SIGNALS:
  void diffRequested(int index);
  void behaviourRequested(int index);

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void relayout();
  void renumber();
  int columns() const;

  QWidget* content_;
  QLabel* hint_;  // shown while there are no panes
  QString prefix_, suffix_;  // setContext's
  std::vector<CandidatePane*> panes_;
  std::vector<bool> collapsed_;  // per pane: its text is shown by another pane
  QVector<int> order_;  // pane indices in display order
  bool ranked_ = false;  // panes carry rank numbers
  int laid_out_columns_ = 0;
};

}  // namespace specula::ui
