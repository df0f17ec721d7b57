#include "file_picker.h"

#include <QAbstractItemView>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QScrollBar>
#include <QSettings>
#include <QStandardItemModel>
#include <QToolButton>

namespace specula::ui {

namespace {
constexpr int kRecentFiles = 8;
}

FilePicker::FilePicker(const QString& settings_key, const QString& dialog_title, const QString& filter,
                       bool optional, QWidget* parent)
    : QWidget(parent),
      settings_key_(settings_key),
      dialog_title_(dialog_title),
      filter_(filter),
      optional_(optional),
      combo_(new QComboBox),
      browse_(new QToolButton) {
  combo_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  // room for a model's whole file name, such as "specula-demo-target.gguf"
  combo_->setMinimumContentsLength(26);
  browse_->setText(tr("Browse…"));
  browse_->setToolTip(dialog_title);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(combo_, 1);
  layout->addWidget(browse_);
  setFocusProxy(combo_);
  if (optional_) combo_->addItem(tr("(none)"), QString());
  for (const QString& path : QSettings().value(settings_key_).toStringList())
    combo_->addItem(QFileInfo(path).fileName(), path);
  for (int i = 0; i < combo_->count(); ++i) combo_->setItemData(i, combo_->itemData(i), Qt::ToolTipRole);
  combo_->setCurrentIndex(optional_ ? 0 : -1);
  connect(browse_, &QToolButton::clicked, this, &FilePicker::browse);
  connect(combo_, &QComboBox::activated, this, [this](int index) { Q_EMIT chosen(combo_->itemData(index).toString()); });
}

QString FilePicker::path() const { return combo_->currentData().toString(); }

void FilePicker::setPath(const QString& path) {
  const QString absolute = path.isEmpty() ? QString() : QFileInfo(path).absoluteFilePath();
  // a file shown but never kept leaves the list when another is chosen: a path that failed
  // to load is not offered again
  if (!unkept_.isEmpty() && unkept_ != absolute) {
    const int at = combo_->findData(unkept_);
    if (at >= 0 && at < combo_->count() - found_items_) combo_->removeItem(at);
    unkept_.clear();
  }
  if (absolute.isEmpty()) {
    combo_->setCurrentIndex(optional_ ? 0 : -1);
    return;
  }
  int at = combo_->findData(absolute);
  if (at < 0) {
    at = optional_ ? 1 : 0;
    combo_->insertItem(at, QFileInfo(absolute).fileName(), absolute);
    combo_->setItemData(at, absolute, Qt::ToolTipRole);
    unkept_ = absolute;
  }
  combo_->setCurrentIndex(at);
}

void FilePicker::keep() {
  const QString current = path();
  if (current.isEmpty()) return;
  unkept_.clear();
  remember(current);
}

void FilePicker::setSummary(const QString& summary) {
  combo_->setToolTip(summary);
  browse_->setToolTip(summary.isEmpty() ? dialog_title_ : summary);
}

void FilePicker::setFound(const QString& heading, const QVector<Entry>& entries) {
  const QString current = path();
  while (found_items_ > 0) {
    combo_->removeItem(combo_->count() - 1);
    --found_items_;
  }
  if (!entries.isEmpty()) {
    auto* items = qobject_cast<QStandardItemModel*>(combo_->model());
    combo_->insertSeparator(combo_->count());
    combo_->addItem(heading);
    items->item(combo_->count() - 1)->setEnabled(false);
    for (const Entry& e : entries) {
      combo_->addItem(e.label, e.path);
      combo_->setItemData(combo_->count() - 1, e.details, Qt::ToolTipRole);
      items->item(combo_->count() - 1)->setEnabled(e.usable);
    }
    found_items_ = int(entries.size()) + 2;
  }
  // the list opens wide enough for its longest entry, however narrow the row
  combo_->view()->setMinimumWidth(combo_->view()->sizeHintForColumn(0) + combo_->view()->verticalScrollBar()->sizeHint().width());
  // the choice stays what it was: among the recent files when it is one
  const int at = combo_->findData(current);
  if (!current.isEmpty() && at >= 0) combo_->setCurrentIndex(at);
}

void FilePicker::browse() {
  const QString start = path().isEmpty() ? QString() : QFileInfo(path()).absolutePath();
  const QString chosen_path = QFileDialog::getOpenFileName(this, dialog_title_, start, filter_);
  if (chosen_path.isEmpty()) return;
  setPath(chosen_path);  // kept in the recent files once it loads
  Q_EMIT chosen(chosen_path);
}

void FilePicker::remember(const QString& path) {
  const QString absolute = QFileInfo(path).absoluteFilePath();
  QStringList recent = QSettings().value(settings_key_).toStringList();
  recent.removeAll(absolute);
  recent.prepend(absolute);
  while (recent.size() > kRecentFiles) recent.removeLast();
  QSettings().setValue(settings_key_, recent);
  const int existing = combo_->findData(absolute);
  if (existing >= 0 && existing < combo_->count() - found_items_) combo_->removeItem(existing);
  const int at = optional_ ? 1 : 0;
  combo_->insertItem(at, QFileInfo(absolute).fileName(), absolute);
  combo_->setItemData(at, absolute, Qt::ToolTipRole);
  combo_->setCurrentIndex(at);
}

}  // namespace specula::ui
