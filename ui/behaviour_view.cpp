#include "behaviour_view.h"

#include <QDialogButtonBox>
#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>

namespace specula::ui {

BehaviourView::BehaviourView(const RunGroups& groups, const QVector<int>& order, int index, QWidget* parent)
    : QDialog(parent), table_(new QTableWidget(this)) {
  setObjectName("behaviourView");
  setWindowTitle(tr("Behaviour of the candidates"));
  // One column per group that was probed, named by its members, best-ranked group first.
  QVector<int> columns;  // the group (its best-ranked member) of each column
  QStringList headers;
  for (int i : order) {
    if (i >= groups.outputs.size() || groups.outputs[i].isEmpty() || columns.contains(groups.group[i])) continue;
    columns.push_back(groups.group[i]);
    QStringList members;
    for (int j : order)
      if (groups.group[j] == groups.group[i]) members << QStringLiteral("#%1").arg(j + 1);
    headers << members.join(QStringLiteral(", "));
  }
  table_->setObjectName("behaviourTable");
  table_->setRowCount(int(groups.inputs.size()));
  table_->setColumnCount(int(columns.size()));
  table_->setVerticalHeaderLabels(groups.inputs);
  table_->setHorizontalHeaderLabels(headers);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectColumns);
  for (int c = 0; c < columns.size(); ++c) {
    const QStringList& outputs = groups.outputs[columns[c]];
    for (int r = 0; r < groups.inputs.size() && r < outputs.size(); ++r)
      table_->setItem(r, c, new QTableWidgetItem(outputs[r]));
  }
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  if (index >= 0 && index < groups.group.size()) selected_ = int(columns.indexOf(groups.group[index]));
  if (selected_ >= 0) table_->selectColumn(selected_);

  auto* note = new QLabel(groups.inputs.isEmpty()
                              ? tr("No candidate could be called: the prompt names no function, or no check passed.")
                              : tr("Every candidate that passed its checks was called on these inputs; candidates "
                                   "with the same outcome on each (a value, or the type of an exception) form a group."));
  note->setWordWrap(true);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(note);
  layout->addWidget(table_, 1);
  layout->addWidget(buttons);
  resize(760, 420);
}

}  // namespace specula::ui
