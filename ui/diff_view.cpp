#include "diff_view.h"

#include <QDialogButtonBox>
#include <QFontDatabase>
#include <QGridLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QTextBlock>
#include <QVBoxLayout>

namespace specula::ui {

std::vector<DiffRow> diff_lines(const QStringList& left, const QStringList& right) {
  const auto n = size_t(left.size()), m = size_t(right.size());
  // lcs[i][j]: length of the longest common subsequence of left[i:] and right[j:].
  std::vector<std::vector<int>> lcs(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      lcs[i][j] = left[qsizetype(i)] == right[qsizetype(j)] ? lcs[i + 1][j + 1] + 1
                                                            : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  std::vector<DiffRow> rows;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && left[qsizetype(i)] == right[qsizetype(j)]) {
      rows.push_back({DiffRow::Same, int(i++), int(j++)});
    } else if (j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j])) {
      rows.push_back({DiffRow::Added, -1, int(j++)});
    } else {
      rows.push_back({DiffRow::Removed, int(i++), -1});
    }
  }
  // Within each run of differing rows, pair removals with additions in order: the k-th
  // removed line faces the k-th added one as a changed row; the rest stay one-sided.
  std::vector<DiffRow> paired;
  for (size_t k = 0; k < rows.size();) {
    if (rows[k].kind == DiffRow::Same) {
      paired.push_back(rows[k++]);
      continue;
    }
    std::vector<int> removed, added;
    for (; k < rows.size() && rows[k].kind != DiffRow::Same; ++k)
      (rows[k].kind == DiffRow::Removed ? removed : added).push_back(rows[k].kind == DiffRow::Removed ? rows[k].left : rows[k].right);
    for (size_t r = 0; r < std::max(removed.size(), added.size()); ++r) {
      if (r < removed.size() && r < added.size())
        paired.push_back({DiffRow::Changed, removed[r], added[r]});
      else if (r < removed.size())
        paired.push_back({DiffRow::Removed, removed[r], -1});
      else
        paired.push_back({DiffRow::Added, -1, added[r]});
    }
  }
  return paired;
}

namespace {

void tint_block(QPlainTextEdit* edit, int block_number, const QColor& colour) {
  QTextCursor cursor(edit->document()->findBlockByNumber(block_number));
  QTextBlockFormat format;
  format.setBackground(colour);
  cursor.setBlockFormat(format);
}

}  // namespace

DiffView::DiffView(const QString& left_title, const QString& left, const QString& right_title,
                   const QString& right, QWidget* parent)
    : QDialog(parent), left_(new QPlainTextEdit), right_(new QPlainTextEdit) {
  setObjectName("diffView");
  setWindowTitle(tr("Diff: %1 ↔ %2").arg(left_title, right_title));
  const QStringList a = left.split('\n'), b = right.split('\n');
  const std::vector<DiffRow> rows = diff_lines(a, b);

  QStringList left_lines, right_lines;
  for (const DiffRow& row : rows) {
    left_lines << (row.left >= 0 ? a[row.left] : QString());
    right_lines << (row.right >= 0 ? b[row.right] : QString());
  }
  for (QPlainTextEdit* edit : {left_, right_}) {
    edit->setReadOnly(true);
    edit->setLineWrapMode(QPlainTextEdit::NoWrap);
    edit->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    edit->setTabChangesFocus(true);
  }
  left_->setPlainText(left_lines.join('\n'));
  right_->setPlainText(right_lines.join('\n'));
  const bool dark = palette().color(QPalette::Base).lightness() < 128;
  const QColor removed = dark ? QColor(0x5c, 0x23, 0x23) : QColor(0xff, 0xd7, 0xd5);
  const QColor added = dark ? QColor(0x1f, 0x4a, 0x2a) : QColor(0xd4, 0xf7, 0xd9);
  const QColor missing = dark ? QColor(0x33, 0x33, 0x33) : QColor(0xee, 0xee, 0xee);
  for (int r = 0; r < int(rows.size()); ++r) {
    if (rows[size_t(r)].kind == DiffRow::Same) continue;
    ++changed_rows_;
    tint_block(left_, r, rows[size_t(r)].left >= 0 ? removed : missing);
    tint_block(right_, r, rows[size_t(r)].right >= 0 ? added : missing);
  }
  connect(left_->verticalScrollBar(), &QScrollBar::valueChanged, right_->verticalScrollBar(), &QScrollBar::setValue);
  connect(right_->verticalScrollBar(), &QScrollBar::valueChanged, left_->verticalScrollBar(), &QScrollBar::setValue);

  auto* grid = new QGridLayout;
  grid->addWidget(new QLabel(left_title), 0, 0);
  grid->addWidget(new QLabel(right_title), 0, 1);
  grid->addWidget(left_, 1, 0);
  grid->addWidget(right_, 1, 1);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(grid, 1);
  layout->addWidget(new QLabel(tr("%n line(s) differ", nullptr, changed_rows_)));
  layout->addWidget(buttons);
  resize(900, 560);
}

}  // namespace specula::ui
