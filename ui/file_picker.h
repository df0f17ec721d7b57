// A file chooser row: a combo box of recently used files (kept in QSettings), then the
// files found on this computer, and a Browse button. Choosing a file, from the list or the
// dialog, emits chosen().
#pragma once

#include <QString>
#include <QVector>
#include <QWidget>

class QComboBox;
class QToolButton;

namespace specula::ui {

class FilePicker : public QWidget {
  Q_OBJECT

 public:
  // `settings_key` names the recent-files list; `filter` is a QFileDialog name filter.
  FilePicker(const QString& settings_key, const QString& dialog_title, const QString& filter,
             bool optional, QWidget* parent = nullptr);

  // A file offered in the list besides the recent ones.
  struct Entry {
    QString path;
    QString label;    // what the list shows
    QString details;  // its tooltip
    bool usable = true;  // false: shown, greyed, not choosable
  };

  QString path() const;
  // Selects `path` (empty: none), adding it to the list for now, without emitting chosen().
  // It joins the recent files only with keep(); until then, the next setPath drops it.
  void setPath(const QString& path);
  // Puts the selected file first in the recent files (kept in the settings): it loaded.
  void keep();
  void setSummary(const QString& summary);  // the tooltip: what the file holds
  // Replaces the list's section after the recent files: a `heading`, then `entries` (no
  // section when there are none).
  void setFound(const QString& heading, const QVector<Entry>& entries);

 public Q_SLOTS:
  void browse();

 Q_SIGNALS:
  void chosen(const QString& path);

 private:
  void remember(const QString& path);

  QString settings_key_, dialog_title_, filter_;
  bool optional_;  // the first entry is "(none)"
  QString unkept_;  // a file setPath added to the list that keep() has not kept yet
  int found_items_ = 0;  // the last items of the list: the found section (separator, heading, entries)
  QComboBox* combo_;
  QToolButton* browse_;
};

}  // namespace specula::ui
