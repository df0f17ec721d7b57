#include "python_highlighter.h"

#include <QGuiApplication>
#include <QPalette>

namespace specula::ui {

namespace {

QTextCharFormat char_format(const QColor& colour, bool bold = false, bool italic = false) {
  QTextCharFormat f;
  f.setForeground(colour);
  if (bold) f.setFontWeight(QFont::Bold);
  f.setFontItalic(italic);
  return f;
}

// Colours readable on both light and dark palettes: lighter hues when the base is dark.
bool dark_palette() { return QGuiApplication::palette().color(QPalette::Base).lightness() < 128; }

}  // namespace

PythonHighlighter::PythonHighlighter(QTextDocument* document) : QSyntaxHighlighter(document) {
  const bool dark = dark_palette();
  const QColor keyword = dark ? QColor(0xc6, 0x78, 0xdd) : QColor(0x80, 0x00, 0x80);
  const QColor builtin = dark ? QColor(0x56, 0xb6, 0xc2) : QColor(0x00, 0x60, 0x80);
  const QColor name = dark ? QColor(0x61, 0xaf, 0xef) : QColor(0x00, 0x33, 0xb3);
  const QColor number = dark ? QColor(0xd1, 0x9a, 0x66) : QColor(0x17, 0x50, 0xeb);
  string_ = char_format(dark ? QColor(0x98, 0xc3, 0x79) : QColor(0x06, 0x7d, 0x17));
  comment_ = char_format(dark ? QColor(0x7f, 0x84, 0x8e) : QColor(0x8c, 0x8c, 0x8c), false, true);

  const QString keywords = QStringLiteral(
      "and|as|assert|async|await|break|class|continue|def|del|elif|else|except|finally|for|from|"
      "global|if|import|in|is|lambda|nonlocal|not|or|pass|raise|return|try|while|with|yield|"
      "None|True|False");
  const QString builtins = QStringLiteral(
      "abs|all|any|bool|dict|enumerate|filter|float|int|isinstance|len|list|map|max|min|print|"
      "range|reversed|set|sorted|str|sum|tuple|zip|self");
  rules_.push_back({QRegularExpression("\\b(" + keywords + ")\\b"), char_format(keyword, true)});
  rules_.push_back({QRegularExpression("\\b(" + builtins + ")\\b"), char_format(builtin)});
  rules_.push_back({QRegularExpression("\\b(?:def|class)\\s+(\\w+)"), char_format(name, true), 1});
  rules_.push_back({QRegularExpression("^\\s*@[\\w.]+"), char_format(keyword)});
  rules_.push_back({QRegularExpression("\\b\\d+(?:\\.\\d*)?(?:[eE][+-]?\\d+)?\\b"), char_format(number)});
  rules_.push_back({QRegularExpression(R"("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"), string_});
  rules_.push_back({QRegularExpression("#[^\\n]*"), comment_});
}

bool PythonHighlighter::continueTripleQuote(const QString& text, int& offset, int state,
                                            const QString& quote) {
  const int end = text.indexOf(quote, offset);
  if (end < 0) {
    setFormat(offset, int(text.size()) - offset, string_);
    setCurrentBlockState(state);
    return false;
  }
  setFormat(offset, end + 3 - offset, string_);
  offset = end + 3;
  return true;
}

void PythonHighlighter::highlightBlock(const QString& text) {
  for (const Rule& rule : rules_) {
    for (auto it = rule.pattern.globalMatch(text); it.hasNext();) {
      const auto match = it.next();
      setFormat(int(match.capturedStart(rule.group)), int(match.capturedLength(rule.group)), rule.format);
    }
  }
  // Triple-quoted strings last, so that they override anything matched inside them.
  setCurrentBlockState(0);
  int offset = 0;
  const int previous = previousBlockState();
  if (previous == 1 || previous == 2) {
    if (!continueTripleQuote(text, offset, previous, previous == 1 ? "\"\"\"" : "'''")) return;
  }
  static const QRegularExpression opening(R"(\"\"\"|''')");
  for (;;) {
    const auto match = opening.match(text, offset);
    if (!match.hasMatch()) return;
    const int start = int(match.capturedStart());
    const QString quote = match.captured();
    const int state = quote == "\"\"\"" ? 1 : 2;
    setFormat(start, 3, string_);
    offset = start + 3;
    if (!continueTripleQuote(text, offset, state, quote)) return;
  }
}

}  // namespace specula::ui
