#include "candidate_grid.h"

#include <QGridLayout>
#include <QLabel>
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
  // Before the first run the area says what will appear in it, rather than nothing.
  hint_ = new QLabel(tr("The candidates appear here, side by side, as they are written; then each is tested "
                        "and ranked.\nWrite a function's signature and docstring (and tests if you have them), "
                        "then press Generate (Ctrl+Return)."),
                     content_);
  hint_->setObjectName("emptyHint");
  hint_->setAlignment(Qt::AlignCenter);
  hint_->setWordWrap(true);
  hint_->setEnabled(false);  // drawn in the disabled (grey) text colour
  static_cast<QGridLayout*>(content_->layout())->addWidget(hint_, 0, 0);
}

int CandidateGrid::shownCount() const { return int(std::count(collapsed_.begin(), collapsed_.end(), false)); }

int CandidateGrid::columns() const {
  const int n = std::max(1, shownCount());
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
    connect(pane, &CandidatePane::behaviourRequested, this, &CandidateGrid::behaviourRequested);
    panes_.push_back(pane);
  }
  collapsed_.assign(size_t(n), false);
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), 0);
  ranked_ = false;
  hint_->setVisible(n == 0);
  relayout();
}

void CandidateGrid::setContext(const QString& prefix, const QString& suffix) {
  prefix_ = prefix;
  suffix_ = suffix;
  for (CandidatePane* pane : panes_) pane->setContext(prefix, suffix);
}

void CandidateGrid::applyRanking(const QVector<int>& ranking) {
  QVector<int> order;
  for (int i : ranking)
    if (i >= 0 && i < count() && !order.contains(i)) order.push_back(i);
  for (int i = 0; i < count(); ++i)  // any candidate the ranking left out keeps its place at the end
    if (!order.contains(i)) order.push_back(i);
  order_ = order;
  ranked_ = !ranking.isEmpty();
  renumber();
  relayout();
}

void CandidateGrid::applyGroups(const RunGroups& groups) {
  if (groups.sameText.size() != count() || groups.group.size() != count()) return;
  for (int i = 0; i < count(); ++i) collapsed_[size_t(i)] = groups.sameText[i] != i;
  for (int i : order_) {
    if (collapsed_[size_t(i)]) continue;
    QVector<int> duplicates, alike;
    for (int j : order_) {
      if (j == i) continue;
      if (groups.sameText[j] == i) duplicates.push_back(j);
      // the engine's groups never join candidates the tests tell apart (group_candidates)
      else if (!collapsed_[size_t(j)] && groups.group[j] == groups.group[i]) alike.push_back(j);
    }
    CandidatePane* pane = panes_[size_t(i)];
    pane->setDuplicates(duplicates);
    pane->setSameBehaviour(alike);
    pane->setBehaviourAvailable(i < groups.outputs.size() && !groups.outputs[i].isEmpty());
  }
  renumber();
  relayout();
}

void CandidateGrid::renumber() {
  int shown = 0;
  for (int i : order_) {
    if (collapsed_[size_t(i)]) continue;
    ++shown;
    panes_[size_t(i)]->setRank(ranked_ ? shown : 0, ranked_ && shown == 1);
  }
}

void CandidateGrid::relayout() {
  auto* grid = static_cast<QGridLayout*>(content_->layout());
  for (CandidatePane* pane : panes_) grid->removeWidget(pane);
  const int cols = columns();
  int position = 0;
  CandidatePane* previous = nullptr;
  for (int i : order_) {
    CandidatePane* pane = panes_[size_t(i)];
    if (collapsed_[size_t(i)]) {
      pane->hide();
      continue;
    }
    grid->addWidget(pane, position / cols, position % cols);
    pane->show();
    ++position;
    if (previous) setTabOrder(previous->editor(), pane->editor());  // the tab order follows the visual order
    previous = pane;
  }
  laid_out_columns_ = cols;
}

void CandidateGrid::resizeEvent(QResizeEvent* event) {
  QScrollArea::resizeEvent(event);
  if (columns() != laid_out_columns_) relayout();
}

}  // namespace specula::ui
