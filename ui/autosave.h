// The current prompt, tests and last results, saved atomically (QSaveFile writes a
// temporary file and renames it over the old one) so that a crash at any moment leaves
// either the previous or the new state on disk, never a torn file.
#pragma once

#include <QString>
#include <QVector>
#include <optional>

#include "run_types.h"

namespace specula::ui {

struct SavedCandidate {
  QString text;
  int state = 0;                  // CandidateState
  QString detail;                 // the verdict's detail, as the pane shows it
  int tokens = 0, accepted = 0, proposed = 0;
  double tokensPerSecond = 0.0;
};

struct SavedState {
  QString prompt;
  QString tests;
  QVector<SavedCandidate> candidates;  // the last run, in index order
  QVector<int> ranking;                // best first; empty when unranked
  RunGroups groups;                    // duplicates, behaviour groups and the probe's outputs
  // What the last run put around its candidates, for Copy and Save: the prompt it sent and,
  // filling in the middle, the code after the hole.
  QString runPrefix, runSuffix;
};

// The autosave file in the application's data directory.
QString autosavePath();
// Returns false (and sets `error`) when the file could not be written.
bool writeAutosave(const SavedState& state, const QString& path, QString* error = nullptr);
// Nothing when the file is absent or unreadable.
std::optional<SavedState> readAutosave(const QString& path);

}  // namespace specula::ui
