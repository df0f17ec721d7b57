// N candidate panes side by side, wrapping into rows inside a scroll area. Reordering by
// rank moves the existing panes in the layout, so each keeps its text and scroll position.
#pragma once

#include <QScrollArea>
#include <QVector>
#include <vector>

namespace specula::ui {

class CandidatePane;

class CandidateGrid : public QScrollArea {
  Q_OBJECT

 public:
  explicit CandidateGrid(QWidget* parent = nullptr);

  void setCount(int n);  // keeps existing panes, clears them, adds or removes the difference
  int count() const { return int(panes_.size()); }
  CandidatePane* pane(int index) const { return panes_.at(size_t(index)); }
  const QVector<int>& order() const { return order_; }
  // Shows panes in `ranking` order (best first) and marks the best; an empty ranking
  // restores index order.
  void applyRanking(const QVector<int>& ranking);

 Q_SIGNALS:
  void diffRequested(int index);

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void relayout();
  int columns() const;

  QWidget* content_;
  std::vector<CandidatePane*> panes_;
  QVector<int> order_;  // pane indices in display order
  int laid_out_columns_ = 0;
};

}  // namespace specula::ui
