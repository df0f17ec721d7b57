// Python syntax colouring for the prompt, the tests and every candidate pane.
#pragma once

#include <QRegularExpression>
#include <QSyntaxHighlighter>
#include <QTextCharFormat>
#include <vector>

namespace specula::ui {

class PythonHighlighter : public QSyntaxHighlighter {
  Q_OBJECT

 public:
  explicit PythonHighlighter(QTextDocument* document);

 protected:
  void highlightBlock(const QString& text) override;

 private:
  struct Rule {
    QRegularExpression pattern;
    QTextCharFormat format;
    int group = 0;  // capture group to colour; 0 is the whole match
  };
  // A triple-quoted string (docstring) may span lines: block state 1 is inside """, 2 inside '''.
  bool continueTripleQuote(const QString& text, int& offset, int state, const QString& quote);

  std::vector<Rule> rules_;
  QTextCharFormat string_, comment_;
};

}  // namespace specula::ui
