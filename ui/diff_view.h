// Two candidates side by side, aligned line by line (longest common subsequence), with
// removed lines tinted red on the left and added lines green on the right; the two sides
// scroll together.
#pragma once

#include <QDialog>
#include <QString>
#include <QStringList>
#include <vector>

class QPlainTextEdit;

namespace specula::ui {

// One row of an aligned diff: a line on the left, the right, or both (equal).
struct DiffRow {
  enum Kind { Same, Removed, Added, Changed } kind;
  int left = -1;   // line index in the left text, -1 for none
  int right = -1;  // line index in the right text, -1 for none
};

// Aligns two texts line by line; within a run of differences, removed and added lines pair up
// in order as Changed rows.
std::vector<DiffRow> diff_lines(const QStringList& left, const QStringList& right);

class DiffView : public QDialog {
  Q_OBJECT

 public:
  DiffView(const QString& left_title, const QString& left, const QString& right_title, const QString& right,
           QWidget* parent = nullptr);

  int changedRows() const { return changed_rows_; }

 private:
  QPlainTextEdit* left_;
  QPlainTextEdit* right_;
  int changed_rows_ = 0;
};

}  // namespace specula::ui
