// A monospace Python editor with line numbers; Tab inserts four spaces, Enter keeps the
// line's indentation (one level more after a ':'), and Ctrl+Tab /
// Ctrl+Shift+Tab leave the editor so that the window stays keyboard-navigable.
// Read-only editors (candidate panes) let Tab move focus as usual.
#pragma once

#include <QPlainTextEdit>

namespace specula::ui {

class CodeEditor : public QPlainTextEdit {
  Q_OBJECT

 public:
  explicit CodeEditor(QWidget* parent = nullptr);

  int lineNumberAreaWidth() const;
  void paintLineNumbers(QPaintEvent* event);
  // Appends text at the end without moving the user's view unless it was following the end.
  void appendStreamed(const QString& text);

 protected:
  void keyPressEvent(QKeyEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  void updateLineNumberAreaWidth();
  void updateLineNumberArea(const QRect& rect, int dy);

  QWidget* line_numbers_;
};

}  // namespace specula::ui
