// Locating the reference data in ../shared (SPECULA_SHARED_DIR) from QtTest suites.
//
// Missing reference data fails a test under CI (CI=true) and skips it elsewhere, with a
// message naming the file.
#pragma once

#include <QDir>
#include <QFileInfo>
#include <QString>
#include <QtTest>

namespace specula::test {

inline QString sharedDir() {
  const QByteArray fromEnv = qgetenv("SPECULA_SHARED_DIR");
  return fromEnv.isEmpty() ? QStringLiteral(SPECULA_SHARED_DIR) : QString::fromLocal8Bit(fromEnv);
}

// tests/data of the checkout: SPECULA_TEST_DATA_DIR from the environment (for executables
// built elsewhere, as tests/device/run.sh runs them), else the one they were built from.
inline QString testDataDir() {
  const QByteArray fromEnv = qgetenv("SPECULA_TEST_DATA_DIR");
  return fromEnv.isEmpty() ? QStringLiteral(SPECULA_TEST_DATA_DIR) : QString::fromLocal8Bit(fromEnv);
}

inline bool runningInCi() { return qgetenv("CI") == "true" || qgetenv("CI") == "1"; }

// The real downloaded models (SPECULA_REAL_MODELS_DIR, filled by the shared data's
// models/real/fetch.sh), or the environment's SPECULA_REAL_MODELS_DIR.
inline QString realModelsDir() {
  const QByteArray fromEnv = qgetenv("SPECULA_REAL_MODELS_DIR");
  return fromEnv.isEmpty() ? QStringLiteral(SPECULA_REAL_MODELS_DIR) : QString::fromLocal8Bit(fromEnv);
}

// Absolute path of a file under the shared directory, or an empty string when absent.
inline QString sharedFile(const QString& relative) {
  const QString path = QDir(sharedDir()).filePath(relative);
  return QFileInfo::exists(path) ? QFileInfo(path).absoluteFilePath() : QString();
}

}  // namespace specula::test

// Declares `var` as the std::string path of a shared file, or fails (CI) / skips the test.
#define SPECULA_SHARED_FILE(var, relative) SPECULA_SHARED_PATH(var, QStringLiteral(relative))

// The same for a path computed at run time (a QString relative to the shared directory).
#define SPECULA_SHARED_PATH(var, relative)                                                   \
  const QString var##_r = (relative);                                                        \
  const QString var##_q = ::specula::test::sharedFile(var##_r);                              \
  if (var##_q.isEmpty()) {                                                                   \
    const QByteArray why = QStringLiteral("reference data missing: %1/%2")                   \
                               .arg(::specula::test::sharedDir(), var##_r)                   \
                               .toLocal8Bit();                                               \
    if (::specula::test::runningInCi()) QFAIL(why.constData());                              \
    QSKIP(why.constData());                                                                  \
  }                                                                                          \
  const std::string var = var##_q.toStdString()

// Declares `var` as the std::string path of a real model file (realModelsDir()), or fails
// (CI) / skips the test, naming the file and how to fetch it.
#define SPECULA_REAL_MODEL(var, name)                                                          \
  const QString var##_q = QDir(::specula::test::realModelsDir()).filePath(QStringLiteral(name)); \
  if (!QFileInfo::exists(var##_q)) {                                                           \
    const QByteArray why = QStringLiteral("real model missing: %1 (bash models/real/fetch.sh of the shared data)") \
                               .arg(var##_q)                                                   \
                               .toLocal8Bit();                                                 \
    if (::specula::test::runningInCi()) QFAIL(why.constData());                                \
    QSKIP(why.constData());                                                                    \
  }                                                                                            \
  const std::string var = var##_q.toStdString()
