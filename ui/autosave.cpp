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

namespace {

QJsonArray ints_json(const QVector<int>& values) {
  QJsonArray out;
  for (int v : values) out.append(v);
  return out;
}

QVector<int> ints_from_json(const QJsonValue& value) {
  QVector<int> out;
  for (const QJsonValue& v : value.toArray()) out.push_back(v.toInt());
  return out;
}

QJsonObject groups_json(const RunGroups& groups) {
  QJsonArray outputs;
  for (const QStringList& row : groups.outputs) outputs.append(QJsonArray::fromStringList(row));
  return {{"same_text", ints_json(groups.sameText)},
          {"group", ints_json(groups.group)},
          {"inputs", QJsonArray::fromStringList(groups.inputs)},
          {"outputs", outputs}};
}

RunGroups groups_from_json(const QJsonObject& object) {
  RunGroups groups;
  groups.sameText = ints_from_json(object["same_text"]);
  groups.group = ints_from_json(object["group"]);
  for (const QJsonValue& v : object["inputs"].toArray()) groups.inputs << v.toString();
  for (const QJsonValue& row : object["outputs"].toArray()) {
    QStringList shown;
    for (const QJsonValue& v : row.toArray()) shown << v.toString();
    groups.outputs.push_back(shown);
  }
  return groups;
}

}  // namespace

QString autosavePath() {
  return QDir(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation)).filePath("autosave.json");
}

bool writeAutosave(const SavedState& state, const QString& path, QString* error) {
  QJsonArray candidates;
  for (const SavedCandidate& c : state.candidates)
    candidates.append(QJsonObject{{"text", c.text},
                                  {"state", c.state},
                                  {"detail", c.detail},
                                  {"tokens", c.tokens},
                                  {"accepted", c.accepted},
                                  {"proposed", c.proposed},
                                  {"tokens_per_second", c.tokensPerSecond}});
  QJsonArray ranking;
  for (int i : state.ranking) ranking.append(i);
  const QJsonObject root{{"prompt", state.prompt},
                         {"tests", state.tests},
                         {"candidates", candidates},
                         {"ranking", ranking},
                         {"groups", groups_json(state.groups)},
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
    state.candidates.push_back({.text = c["text"].toString(),
                                .state = c["state"].toInt(),
                                .detail = c["detail"].toString(),
                                .tokens = c["tokens"].toInt(),
                                .accepted = c["accepted"].toInt(),
                                .proposed = c["proposed"].toInt(),
                                .tokensPerSecond = c["tokens_per_second"].toDouble()});
  }
  for (const QJsonValue& value : root["ranking"].toArray()) state.ranking.push_back(value.toInt());
  state.groups = groups_from_json(root["groups"].toObject());
  // a file from before these were saved: the prompt, as a run without a suffix sent it
  state.runPrefix = root.contains("run_prefix") ? root["run_prefix"].toString()
                                                : QString::fromStdString(code_prompt(state.prompt.toStdString()));
  state.runSuffix = root["run_suffix"].toString();
  return state;
}

}  // namespace specula::ui
