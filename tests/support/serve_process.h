// `specula-cli serve` run as a user would, on an ephemeral loopback port, for suites built
// with the CLI keyword of specula_add_test, and the few HTTP calls the suites make to it.
#pragma once

#include <QProcess>
#include <QRegularExpression>
#include <QString>
#include <QStringList>

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#ifndef SPECULA_CLI
#error "register this suite with specula_add_test(... CLI) so that SPECULA_CLI names specula-cli"
#endif

namespace specula::test {

class ServeProcess {
 public:
  // Starts `specula-cli serve ARGS --port 0` and waits until it says where it listens.
  explicit ServeProcess(const QStringList& args, int timeout_ms = 120000) {
    process_.start(QStringLiteral(SPECULA_CLI), QStringList{"serve"} + args + QStringList{"--port", "0"});
    const QRegularExpression listening(QStringLiteral("listening on (http://[0-9.]+:([0-9]+))"));
    QByteArray out;
    while (process_.waitForReadyRead(timeout_ms)) {
      out += process_.readAllStandardOutput();
      const QRegularExpressionMatch m = listening.match(QString::fromUtf8(out));
      if (m.hasMatch()) {
        url_ = m.captured(1);
        port_ = m.captured(2).toInt();
        return;
      }
    }
  }
  ~ServeProcess() {
    if (process_.state() == QProcess::NotRunning) return;
    process_.terminate();
    if (!process_.waitForFinished(20000)) process_.kill();
    process_.waitForFinished(5000);
  }

  bool started() const { return port_ > 0; }
  QString url() const { return url_; }
  int port() const { return port_; }
  qint64 pid() const { return process_.processId(); }
  QString errors() { return QString::fromUtf8(process_.readAllStandardError()); }
  // SIGTERM, then whether it exited on its own with code 0.
  bool stopsCleanly() {
    process_.terminate();
    return process_.waitForFinished(20000) && process_.exitStatus() == QProcess::NormalExit && process_.exitCode() == 0;
  }

 private:
  QProcess process_;
  QString url_;
  int port_ = -1;
};

inline httplib::Client http_client(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  return client;
}

// GET /health as JSON (null when it does not answer).
inline nlohmann::json health(int port) {
  auto client = http_client(port);
  const auto res = client.Get("/health");
  return res && res->status == 200 ? nlohmann::json::parse(res->body, nullptr, false) : nlohmann::json();
}

}  // namespace specula::test
