#include "run_types.h"

namespace specula::ui {

QString stateName(CandidateState state) {
  switch (state) {
    case CandidateState::Queued: return QStringLiteral("queued");
    case CandidateState::Generating: return QStringLiteral("generating");
    case CandidateState::Testing: return QStringLiteral("testing");
    case CandidateState::Passed: return QStringLiteral("passed");
    case CandidateState::Failed: return QStringLiteral("failed");
    case CandidateState::Timeout: return QStringLiteral("timeout");
    case CandidateState::Budget: return QStringLiteral("budget");
    case CandidateState::Stopped: return QStringLiteral("stopped");
    case CandidateState::Done: return QStringLiteral("done");
    case CandidateState::Error: return QStringLiteral("error");
    case CandidateState::Checked: return QStringLiteral("checked");
  }
  return {};
}

}  // namespace specula::ui
