#include "code_editor.h"

#include <QFontDatabase>
#include <QKeyEvent>
#include <QPainter>
#include <QScrollBar>
#include <QTextBlock>

#include "python_highlighter.h"

namespace specula::ui {

namespace {

constexpr int kTabWidthSpaces = 4;

class LineNumberArea : public QWidget {
 public:
  explicit LineNumberArea(CodeEditor* editor) : QWidget(editor), editor_(editor) {}
  QSize sizeHint() const override { return {editor_->lineNumberAreaWidth(), 0}; }

 protected:
  void paintEvent(QPaintEvent* event) override { editor_->paintLineNumbers(event); }

 private:
  CodeEditor* editor_;
};

}  // namespace

CodeEditor::CodeEditor(QWidget* parent) : QPlainTextEdit(parent), line_numbers_(new LineNumberArea(this)) {
  setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  setLineWrapMode(QPlainTextEdit::NoWrap);
  setTabStopDistance(fontMetrics().horizontalAdvance(QLatin1Char(' ')) * kTabWidthSpaces);
  new PythonHighlighter(document());
  connect(this, &QPlainTextEdit::blockCountChanged, this, &CodeEditor::updateLineNumberAreaWidth);
  connect(this, &QPlainTextEdit::updateRequest, this, &CodeEditor::updateLineNumberArea);
  updateLineNumberAreaWidth();
}

int CodeEditor::lineNumberAreaWidth() const {
  int digits = 1;
  for (int max = std::max(1, blockCount()); max >= 10; max /= 10) ++digits;
  return 8 + fontMetrics().horizontalAdvance(QLatin1Char('9')) * std::max(2, digits);
}

void CodeEditor::updateLineNumberAreaWidth() { setViewportMargins(lineNumberAreaWidth(), 0, 0, 0); }

void CodeEditor::updateLineNumberArea(const QRect& rect, int dy) {
  if (dy != 0)
    line_numbers_->scroll(0, dy);
  else
    line_numbers_->update(0, rect.y(), line_numbers_->width(), rect.height());
  if (rect.contains(viewport()->rect())) updateLineNumberAreaWidth();
}

void CodeEditor::resizeEvent(QResizeEvent* event) {
  QPlainTextEdit::resizeEvent(event);
  const QRect area = contentsRect();
  line_numbers_->setGeometry(QRect(area.left(), area.top(), lineNumberAreaWidth(), area.height()));
}

void CodeEditor::paintLineNumbers(QPaintEvent* event) {
  QPainter painter(line_numbers_);
  painter.fillRect(event->rect(), palette().color(QPalette::AlternateBase));
  painter.setPen(palette().color(QPalette::PlaceholderText));
  QTextBlock block = firstVisibleBlock();
  int top = qRound(blockBoundingGeometry(block).translated(contentOffset()).top());
  while (block.isValid() && top <= event->rect().bottom()) {
    const int height = qRound(blockBoundingRect(block).height());
    if (block.isVisible() && top + height >= event->rect().top()) {
      painter.drawText(0, top, line_numbers_->width() - 4, fontMetrics().height(), Qt::AlignRight,
                       QString::number(block.blockNumber() + 1));
    }
    block = block.next();
    top += height;
  }
}

void CodeEditor::keyPressEvent(QKeyEvent* event) {
  const bool ctrl = event->modifiers() & Qt::ControlModifier;
  if (!isReadOnly() && event->key() == Qt::Key_Tab && !ctrl) {
    insertPlainText(QString(kTabWidthSpaces, QLatin1Char(' ')));
    return;
  }
  const bool plain_enter = (event->key() == Qt::Key_Return || event->key() == Qt::Key_Enter) &&
                           !(event->modifiers() & ~Qt::KeypadModifier);
  if (!isReadOnly() && plain_enter) {
    // A new line keeps the indentation of the current one, and one level more after a line
    // ending with ':' (a signature, an if): a body typed after `def f(x):` + Enter is indented.
    const QTextCursor cursor = textCursor();
    const QString before = cursor.block().text().left(cursor.positionInBlock());
    qsizetype indent = 0;
    while (indent < before.size() && before[indent] == QLatin1Char(' ')) ++indent;
    if (before.trimmed().endsWith(QLatin1Char(':'))) indent += kTabWidthSpaces;
    insertPlainText(QLatin1Char('\n') + QString(indent, QLatin1Char(' ')));
    ensureCursorVisible();
    return;
  }
  if (ctrl && (event->key() == Qt::Key_Tab || event->key() == Qt::Key_Backtab)) {
    // QPlainTextEdit refuses to move focus while it is editable; its base class does not.
    QAbstractScrollArea::focusNextPrevChild(event->key() == Qt::Key_Tab && !(event->modifiers() & Qt::ShiftModifier));
    return;
  }
  QPlainTextEdit::keyPressEvent(event);
}

void CodeEditor::appendStreamed(const QString& text) {
  if (text.isEmpty()) return;
  QScrollBar* bar = verticalScrollBar();
  const bool following = bar->value() == bar->maximum();
  const int kept = bar->value();
  QTextCursor cursor(document());
  cursor.movePosition(QTextCursor::End);
  cursor.insertText(text);
  bar->setValue(following ? bar->maximum() : kept);
}

}  // namespace specula::ui
