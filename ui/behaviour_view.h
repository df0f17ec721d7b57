// The behaviour probe of a run, on demand: one row per input every candidate was called
// on, one column per behaviour group (its members in rank order), each cell the group's
// outcome for that input. The group of the candidate it was opened from is selected.
#pragma once

#include <QDialog>
#include <QVector>

#include "run_types.h"

class QTableWidget;

namespace specula::ui {

class BehaviourView : public QDialog {
  Q_OBJECT

 public:
  // `order`: every candidate, best first (the grid's order); `index`: the candidate asked about.
  BehaviourView(const RunGroups& groups, const QVector<int>& order, int index, QWidget* parent = nullptr);

  QTableWidget* table() const { return table_; }
  int selectedGroup() const { return selected_; }  // column of `index`'s group, -1 when not probed

 private:
  QTableWidget* table_;
  int selected_ = -1;
};

}  // namespace specula::ui
