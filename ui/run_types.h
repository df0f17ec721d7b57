// Values that travel between the window and the engine worker through queued signals.
#pragma once

#include <QMetaType>
#include <QString>
#include <QStringList>
#include <QVector>
#include <optional>
#include <vector>

#include "eval/evaluation.h"
#include "eval/problems.h"

namespace specula::ui {

// What one candidate pane shows in its header, in the order a candidate passes through them;
// Checked: nothing to test, and the checks that need no tests passed (last: saved runs keep
// their numbers).
enum class CandidateState { Queued, Generating, Testing, Passed, Failed, Timeout, Budget, Stopped, Done, Error, Checked };
QString stateName(CandidateState state);  // "queued", "generating", ...

struct RunRequest {
  QString prompt;           // with a suffix: the code before the insertion point
  std::optional<QString> suffix;  // set: fill in the middle, the candidates go between prompt and
                                  // suffix (the code after the insertion point; may be empty)
  QString tests;            // asserts or a check(candidate) function; empty: no testing
  int candidates = 4;       // N, 1..16
  double temperature = 0.8;
  double topP = 0.95;
  int maxNewTokens = 256;
  double budgetSeconds = 30.0;  // 0: none
  QString drafter = "ngram";    // "none", "ngram", "layers:K", "model"
  QString policy = "goodput";   // "goodput", "fixed:K", "bass", "adaptive"
  quint64 seed = 1;             // candidate i samples with seed + i
  QString promptStyle = "auto";  // "auto", "raw", "chat" (decode/prompt_style.h)
};

struct RunStats {
  double elapsedSeconds = 0.0;
  double budgetSeconds = 0.0;
  int tokens = 0;                // generated so far, all candidates
  double tokensPerSecond = 0.0;  // generated tokens per wall-clock second
  double msPerTokenPerSequence = 0.0;
  double acceptance = 0.0;       // accepted / proposed draft tokens; 0 without a drafter
};

// How the finished candidates of a run relate (the engine's group_candidates), for the grid
// and the behaviour view. A group is named by its best-ranked member.
struct RunGroups {
  QVector<int> sameText;         // per candidate: the best-ranked candidate with the same text
  QVector<int> group;            // per candidate: the best-ranked candidate of its behaviour group
  QStringList inputs;            // the behaviour probe's calls, e.g. "add(2, 3)"; empty: no probe
  QVector<QStringList> outputs;  // per candidate: each call's outcome as shown; empty when not probed
};

}  // namespace specula::ui

Q_DECLARE_METATYPE(specula::ui::RunRequest)
Q_DECLARE_METATYPE(specula::ui::RunGroups)
Q_DECLARE_METATYPE(specula::ui::RunStats)
Q_DECLARE_METATYPE(specula::ProblemEvaluation)
Q_DECLARE_METATYPE(std::vector<specula::Problem>)
