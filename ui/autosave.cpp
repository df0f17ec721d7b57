#include "autosave.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>
#include <QStandardPaths>

#include "decode/session.h"

namespace specula::ui {

QString autosavePath() {
  return QDir(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation)).filePath("autosave.json");
}

bool writeAutosave(const SavedState& state, const QString& path, QString* error) {
  QJsonArray candidates;
  for (const SavedCandidate& c : state.candidates)
    candidates.append(QJsonObject{{"text", c.text}, {"state", c.state}});
  QJsonArray ranking;
  for (int i : state.ranking) ranking.append(i);
  const QJsonObject root{{"prompt", state.prompt},
                         {"tests", state.tests},
                         {"candidates", candidates},
                         {"ranking", ranking},
                         {"run_prefix", state.runPrefix},
                         {"run_suffix", state.runSuffix}};
  QDir().mkpath(QFileInfo(path).absolutePath());
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly) || file.write(QJsonDocument(root).toJson()) < 0 || !file.commit()) {
    if (error) *error = file.errorString();
    return false;
  }
  return true;
}

std::optional<SavedState> readAutosave(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return std::nullopt;
  const QJsonDocument document = QJsonDocument::fromJson(file.readAll());
  if (!document.isObject()) return std::nullopt;
  const QJsonObject root = document.object();
  SavedState state;
  state.prompt = root["prompt"].toString();
  state.tests = root["tests"].toString();
  for (const QJsonValue& value : root["candidates"].toArray()) {
    const QJsonObject c = value.toObject();
    state.candidates.push_back({c["text"].toString(), c["state"].toInt()});
  }
  for (const QJsonValue& value : root["ranking"].toArray()) state.ranking.push_back(value.toInt());
  // a file from before these were saved: the prompt, as a run without a suffix sent it
  state.runPrefix = root.contains("run_prefix") ? root["run_prefix"].toString()
                                                : QString::fromStdString(code_prompt(state.prompt.toStdString()));
  state.runSuffix = root["run_suffix"].toString();
  return state;
}

}  // namespace specula::ui
