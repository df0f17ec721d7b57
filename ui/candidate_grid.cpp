#include "candidate_grid.h"

#include <QGridLayout>
#include <QResizeEvent>
#include <algorithm>
#include <numeric>

#include "candidate_pane.h"
#include "code_editor.h"

namespace specula::ui {

namespace {
constexpr int kPaneMinWidth = 340;  // px: about 40 columns of code at a normal font size
}

CandidateGrid::CandidateGrid(QWidget* parent) : QScrollArea(parent), content_(new QWidget) {
  setObjectName("candidateGrid");
  setWidgetResizable(true);
  setWidget(content_);
  new QGridLayout(content_);
}

int CandidateGrid::columns() const {
  const int n = std::max(1, count());
  const int fit = std::max(1, viewport()->width() / kPaneMinWidth);
  // Balanced rows: 4 candidates on a wide screen are 4 columns, 8 are 2 rows of 4.
  const int cols = std::min(n, fit);
  const int rows = (n + cols - 1) / cols;
  return (n + rows - 1) / rows;
}

void CandidateGrid::setCount(int n) {
  while (count() > n) {
    delete panes_.back();
    panes_.pop_back();
  }
  for (CandidatePane* pane : panes_) pane->reset();
  while (count() < n) {
    auto* pane = new CandidatePane(count(), content_);
    connect(pane, &CandidatePane::diffRequested, this, &CandidateGrid::diffRequested);
    panes_.push_back(pane);
  }
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), 0);
  relayout();
}

void CandidateGrid::applyRanking(const QVector<int>& ranking) {
  QVector<int> order;
  for (int i : ranking)
    if (i >= 0 && i < count() && !order.contains(i)) order.push_back(i);
  for (int i = 0; i < count(); ++i)  // any candidate the ranking left out keeps its place at the end
    if (!order.contains(i)) order.push_back(i);
  order_ = order;
  for (int position = 0; position < count(); ++position) {
    const bool ranked = !ranking.isEmpty();
    panes_[size_t(order_[position])]->setRank(ranked ? position + 1 : 0, ranked && position == 0);
  }
  relayout();
}

void CandidateGrid::relayout() {
  auto* grid = static_cast<QGridLayout*>(content_->layout());
  for (CandidatePane* pane : panes_) grid->removeWidget(pane);
  const int cols = columns();
  for (int position = 0; position < order_.size(); ++position) {
    CandidatePane* pane = panes_[size_t(order_[position])];
    grid->addWidget(pane, position / cols, position % cols);
    pane->show();
  }
  // The tab order follows the visual order.
  for (int position = 1; position < order_.size(); ++position)
    setTabOrder(panes_[size_t(order_[position - 1])]->editor(), panes_[size_t(order_[position])]->editor());
  laid_out_columns_ = cols;
}

void CandidateGrid::resizeEvent(QResizeEvent* event) {
  QScrollArea::resizeEvent(event);
  if (columns() != laid_out_columns_) relayout();
}

}  // namespace specula::ui
