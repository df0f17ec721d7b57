// Running specula-cli as a user would, from suites built with the CLI keyword of
// specula_add_test (which defines SPECULA_CLI as the path of the built executable).
#pragma once

#include <QByteArray>
#include <QProcess>
#include <QStringList>

#ifndef SPECULA_CLI
#error "register this suite with specula_add_test(... CLI) so that SPECULA_CLI names specula-cli"
#endif

namespace specula::test {

struct CliRun {
  int code = -1;        // the exit code; -1 when the program crashed or did not finish in time
  QByteArray out, err;  // everything it wrote to stdout and stderr
};

// `env`: the environment it runs in (this process's when empty).
inline CliRun run_cli(const QStringList& args, int timeout_ms = 180000, const QProcessEnvironment& env = {}) {
  QProcess p;
  if (!env.isEmpty()) p.setProcessEnvironment(env);
  p.start(QStringLiteral(SPECULA_CLI), args);
  const bool finished = p.waitForFinished(timeout_ms) && p.exitStatus() == QProcess::NormalExit;
  return {finished ? p.exitCode() : -1, p.readAllStandardOutput(), p.readAllStandardError()};
}

}  // namespace specula::test
