// `specula-cli check` end to end: HumanEval's 164 canonical solutions pass and the same
// functions returning None fail; warm and cold runs agree; --run chooses the tests, the
// docstring's examples or the checks alone; bad input gets clear messages and
// the documented exit codes.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>
#include <csignal>
#include <map>
#include <fstream>
#include <nlohmann/json.hpp>

#include "eval/problems.h"
#include "shared_data.h"

namespace {

struct Outcome {
  int code = -1;
  QString out;
  QString err;
};

Outcome run_cli(const QStringList& arguments, int timeout_ms = 240000) {
  QProcess process;
  process.start(QStringLiteral(SPECULA_CLI), arguments);
  Outcome outcome;
  if (!process.waitForFinished(timeout_ms)) {
    process.kill();
    process.waitForFinished();
    outcome.err = "specula-cli did not finish";
    return outcome;
  }
  outcome.code = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
  outcome.out = QString::fromUtf8(process.readAllStandardOutput());
  outcome.err = QString::fromUtf8(process.readAllStandardError());
  return outcome;
}

QString write_file(const QTemporaryDir& dir, const char* name, const std::string& text) {
  const QString path = dir.filePath(name);
  std::ofstream(path.toStdString()) << text;
  return path;
}

const std::string kAdd =
    R"J({"task_id": "t/add", "prompt": "def add(a, b):\n", "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n", "entry_point": "add"})J" "\n";
const std::string kProblems = kAdd +
    R"J({"task_id": "t/none", "prompt": "def f():\n", "test": "   ", "entry_point": "f"})J" "\n"
    R"J({"task_id": 11, "text": "Double a number.", "test_list": ["assert double(2) == 4"]})J" "\n";

// The pids of live processes named `name` (a zombie is dead, only not yet reaped).
QList<int> processes_named(const QString& name) {
  QList<int> pids;
  for (const QString& pid : QDir("/proc").entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    QFile comm("/proc/" + pid + "/comm"), stat("/proc/" + pid + "/stat");
    if (!comm.open(QIODevice::ReadOnly) || comm.readAll().trimmed() != name.toUtf8()) continue;
    if (!stat.open(QIODevice::ReadOnly)) continue;
    const QByteArray fields = stat.readAll();  // "pid (comm) STATE ..."
    const qsizetype close = fields.lastIndexOf(')');
    if (close >= 0 && fields.mid(close + 2, 1) != "Z") pids.append(pid.toInt());
  }
  return pids;
}

// The text output of `check --run RUN`: its verdicts with their details.
QString results_detail(const QString& problems, const QString& samples, const QString& run) {
  const Outcome o = run_cli({"check", "--problems", problems, "--samples", samples, "--run", run});
  return o.out + o.err;
}

}  // namespace

class TestCliCheck : public QObject {
  Q_OBJECT

 private slots:
  void humaneval_canonical_pass_and_none_fails() {
    SPECULA_SHARED_FILE(path, "data/humaneval/HumanEval.jsonl.gz");
    const specula::ProblemSet set = specula::load_problems(path);
    QCOMPARE(set.problems.size(), std::size_t{164});
    QTemporaryDir dir;
    std::string samples;
    for (const specula::Problem& p : set.problems) {
      samples += nlohmann::json{{"task_id", p.task_id}, {"completion", p.canonical_solution}}.dump() + "\n";
      samples += nlohmann::json{{"task_id", p.task_id}, {"completion", "    return None\n"}}.dump() + "\n";
    }
    const QString samples_path = write_file(dir, "samples.jsonl", samples);
    QElapsedTimer clock;
    clock.start();
    const Outcome o = run_cli({"check", "--problems", QString::fromStdString(path), "--samples", samples_path,
                               "--jobs", "2", "--timeout", "10", "--json"});
    qInfo("328 runs (164 canonical + 164 'return None') with --jobs 2: %.1f s", clock.elapsed() / 1000.0);
    QVERIFY2(o.code == 0, qPrintable(o.err));
    const QJsonObject result = QJsonDocument::fromJson(o.out.toUtf8()).object();
    const QJsonArray rows = result["results"].toArray();
    QCOMPARE(rows.size(), 328);
    for (const QJsonValue& value : rows) {
      const QJsonObject row = value.toObject();
      const bool canonical = row["completion_index"].toInt() == 0;
      QVERIFY2(row["verdict"].toString() == (canonical ? "passed" : "failed"),
               qPrintable(row["task_id"].toString() + " #" + QString::number(row["completion_index"].toInt()) +
                          ": " + row["verdict"].toString() + " " + row["detail"].toString()));
      QCOMPARE(row["isolation"].toString(), result["isolation"].toString());
    }
    // Two samples per task, one correct: pass@1 = 0.5.
    QCOMPARE(result["pass_at_k"].toObject()["pass@1"].toDouble(), 0.5);
  }

  // `--sandbox warm` and `--sandbox cold` give the same result, field by field but the
  // seconds, for programs that pass, fail on the tests, fail in the prompt's function, exit
  // early or run out of memory: the warm path runs what the cold one runs.
  void warm_and_cold_agree() {
    SPECULA_SHARED_FILE(path, "data/humaneval/HumanEval.jsonl.gz");
    const specula::ProblemSet set = specula::load_problems(path);
    QVERIFY(set.problems.size() >= 30);
    QTemporaryDir dir;
    std::string samples;
    for (std::size_t i = 0; i < 30; ++i) {
      const specula::Problem& p = set.problems[i];
      for (const std::string& completion :
           {p.canonical_solution, set.problems[i + 1].canonical_solution, std::string("    return None\n"),
            std::string("    import sys\n    sys.exit(0)\n"), std::string("    raise MemoryError\n")})
        samples += nlohmann::json{{"task_id", p.task_id}, {"completion", completion}}.dump() + "\n";
    }
    const QString samples_path = write_file(dir, "samples.jsonl", samples);
    std::map<QString, QJsonObject> results;
    for (const QString mode : {"warm", "cold"}) {
      QElapsedTimer clock;
      clock.start();
      const Outcome o = run_cli({"check", "--problems", QString::fromStdString(path), "--samples", samples_path,
                                 "--jobs", "2", "--timeout", "10", "--sandbox", mode, "--json"});
      qInfo("150 runs %s with --jobs 2: %.1f s", qPrintable(mode), clock.elapsed() / 1000.0);
      QVERIFY2(o.code == 0, qPrintable(o.err));
      results[mode] = QJsonDocument::fromJson(o.out.toUtf8()).object();
      QCOMPARE(results[mode]["sandbox"].toString(), mode);
    }
    const QJsonArray warm = results["warm"]["results"].toArray(), cold = results["cold"]["results"].toArray();
    QCOMPARE(warm.size(), 150);
    QCOMPARE(cold.size(), 150);
    QSet<QString> verdicts;
    for (qsizetype i = 0; i < warm.size(); ++i) {
      QJsonObject w = warm[i].toObject(), c = cold[i].toObject();
      w.remove("seconds");
      c.remove("seconds");
      QVERIFY2(w == c, qPrintable(QJsonDocument(w).toJson() + " warm, cold:\n" + QJsonDocument(c).toJson()));
      verdicts.insert(w["verdict"].toString());
    }
    QCOMPARE(verdicts, (QSet<QString>{"passed", "failed", "memory"}));
  }

  void bad_lines_are_reported_and_the_rest_runs() {
    QTemporaryDir dir;
    const QString problems = write_file(dir, "problems.jsonl", kProblems);
    const QString samples = write_file(dir, "samples.jsonl",
        R"J({"task_id": "t/add", "completion": "    return a + b\n"})J" "\n"
        "this is not json\n"
        R"J({"task_id": "t/unknown", "completion": "    pass\n"})J" "\n"
        R"J({"task_id": "11", "completion": "def double(x):\n    return x + x\n"})J" "\n"
        R"J({"task_id": "t/add", "completion": "    return a - b\n"})J" "\n");
    const Outcome o = run_cli({"check", "--problems", problems, "--samples", samples, "--timeout", "5"});
    QCOMPARE(o.code, 4);
    QVERIFY2(o.err.contains("problems.jsonl:2: task 't/none' has no tests"), qPrintable(o.err));
    QVERIFY2(o.err.contains("samples.jsonl:2: malformed JSON"), qPrintable(o.err));
    QVERIFY2(o.err.contains("samples.jsonl:3: unknown task id 't/unknown'"), qPrintable(o.err));
    QVERIFY2(o.out.contains("t/add #0: passed"), qPrintable(o.out));
    QVERIFY2(o.out.contains("t/add #1: failed"), qPrintable(o.out));
    QVERIFY2(o.out.contains("11 #0: passed"), qPrintable(o.out));
    QVERIFY2(o.out.contains("pass@1: 0.7500"), qPrintable(o.out));  // (1/2 + 1) / 2
  }

  // --run: the same wrong sample fails the tests, fails the docstring's example without them,
  // and passes the checks alone (nothing tested); one that does not parse fails at every
  // level. The summary's median and 95th percentile lie within the runs' own seconds.
  void run_selects_tests_examples_or_checks() {
    QTemporaryDir dir;
    const nlohmann::json add = {{"task_id", "t/add"},
                                {"prompt", "def add(a, b):\n    '''\n    >>> add(2, 3)\n    5\n    '''\n"},
                                {"test", "def check(candidate):\n    assert candidate(1, 2) == 3\n"},
                                {"entry_point", "add"}};
    const QString problems = write_file(dir, "problems.jsonl", add.dump() + "\n");
    const QString samples = write_file(dir, "samples.jsonl",
        R"J({"task_id": "t/add", "completion": "    return a - b\n"})J" "\n"
        R"J({"task_id": "t/add", "completion": "    return a +\n"})J" "\n");
    const std::map<QString, QStringList> expected = {{"tests", {"failed", "failed"}},
                                                     {"examples", {"failed", "failed"}},
                                                     {"checks", {"untested", "failed"}}};
    for (const auto& [run, verdicts] : expected) {
      const Outcome o = run_cli({"check", "--problems", problems, "--samples", samples, "--run", run, "--json"});
      QVERIFY2(o.code == 0, qPrintable(o.err));
      const QJsonObject out = QJsonDocument::fromJson(o.out.toUtf8()).object();
      QCOMPARE(out["run"].toString(), run);
      const QJsonArray results = out["results"].toArray();
      QCOMPARE(results.size(), 2);
      QStringList got;
      double least = 1e9, most = 0;
      for (const QJsonValue& r : results) {
        got << r.toObject()["verdict"].toString();
        least = std::min(least, r.toObject()["seconds"].toDouble());
        most = std::max(most, r.toObject()["seconds"].toDouble());
      }
      QCOMPARE(got, verdicts);
      const QJsonObject seconds = out["seconds"].toObject();
      QVERIFY2(seconds["median"].toDouble() >= least && seconds["median"].toDouble() <= most, qPrintable(o.out));
      QCOMPARE(seconds["p95"].toDouble(), most);  // two runs: the nearest rank is the larger
    }
    const QString checks = results_detail(problems, samples, "checks");
    QVERIFY2(checks.contains("SyntaxError"), qPrintable(checks));
    const QString examples = results_detail(problems, samples, "examples");
    QVERIFY2(examples.contains("add(2, 3)"), qPrintable(examples));
    const Outcome bad = run_cli({"check", "--problems", problems, "--samples", samples, "--run", "doctest"});
    QVERIFY(bad.code != 0);
    QVERIFY2(bad.err.contains("--run"), qPrintable(bad.err));
  }

  void json_survives_invalid_utf8_in_tracebacks() {
    QTemporaryDir dir;
    const QString problems = write_file(dir, "problems.jsonl", kAdd);
    const QString samples = write_file(dir, "samples.jsonl",
        R"J({"task_id": "t/add", "completion": "    import os\n    os.write(2, b'bad bytes: ' + bytes([0xff, 0xfe, 10]))\n    os._exit(1)\n"})J" "\n");
    const Outcome o = run_cli({"check", "--problems", problems, "--samples", samples, "--json"});
    QVERIFY2(o.code == 0, qPrintable(o.err));
    const QJsonObject row = QJsonDocument::fromJson(o.out.toUtf8()).object()["results"].toArray()[0].toObject();
    QCOMPARE(row["verdict"].toString(), QString("failed"));
    QVERIFY2(row["detail"].toString().contains("bad bytes: \uFFFD"), qPrintable(o.out));
  }

  void missing_python_is_reported() {
    QTemporaryDir dir;
    const QString problems = write_file(dir, "problems.jsonl", kProblems);
    const QString samples = write_file(dir, "samples.jsonl", R"J({"task_id": "t/add", "completion": "    return a + b\n"})J" "\n");
    const Outcome o = run_cli({"check", "--problems", problems, "--samples", samples, "--python", "/nonexistent/python3"});
    QCOMPARE(o.code, 5);
    QVERIFY2(o.err.contains("Python interpreter '/nonexistent/python3' not found"), qPrintable(o.err));
    QProcessEnvironment no_python;
    no_python.insert("PATH", dir.path());
    QProcess process;
    process.setProcessEnvironment(no_python);
    process.start(QStringLiteral(SPECULA_CLI), {"check", "--problems", problems, "--samples", samples});
    QVERIFY(process.waitForFinished(60000));
    QCOMPARE(process.exitCode(), 5);
    QVERIFY(QString::fromUtf8(process.readAllStandardError()).contains("'python3' not found on PATH"));
  }

  void unreadable_or_empty_inputs() {
    QTemporaryDir dir;
    const QString samples = write_file(dir, "samples.jsonl", R"J({"task_id": "t/add", "completion": ""})J" "\n");
    Outcome o = run_cli({"check", "--problems", dir.filePath("absent.jsonl"), "--samples", samples});
    QCOMPARE(o.code, 3);
    QVERIFY2(o.err.contains("cannot open"), qPrintable(o.err));
    const QString garbage = write_file(dir, "garbage.jsonl", "not json at all\n");
    o = run_cli({"check", "--problems", garbage, "--samples", samples});
    QCOMPARE(o.code, 3);
    QVERIFY2(o.err.contains("garbage.jsonl:1: malformed JSON"), qPrintable(o.err));
    QVERIFY2(o.err.contains("no usable problem"), qPrintable(o.err));
  }

  void no_namespaces_selects_the_reduced_level() {
    QTemporaryDir dir;
    const QString problems = write_file(dir, "problems.jsonl", kAdd);
    const QString samples = write_file(dir, "samples.jsonl", R"J({"task_id": "t/add", "completion": "    return a + b\n"})J" "\n");
    const Outcome o = run_cli({"check", "--problems", problems, "--samples", samples, "--no-namespaces", "--json"});
    QVERIFY2(o.code == 0, qPrintable(o.err));
    const QJsonObject result = QJsonDocument::fromJson(o.out.toUtf8()).object();
    QCOMPARE(result["isolation"].toString(), QString("reduced"));
    QCOMPARE(result["results"].toArray()[0].toObject()["verdict"].toString(), QString("passed"));
  }

  // Killing the checker mid-run takes its runs with it, also a process the run forked
  // (full: --die-with-parent and the pid namespace; reduced: the intermediate process).
  void runs_die_with_the_checker_data() {
    QTest::addColumn<QStringList>("level");
    QTest::newRow("default level") << QStringList{};
    QTest::newRow("reduced") << QStringList{"--no-namespaces"};
    // As root with an interpreter an unprivileged uid can reach, each run has its own uid.
    if (QFileInfo::exists("/usr/bin/python3"))
      QTest::newRow("reduced, system python") << QStringList{"--no-namespaces", "--python", "/usr/bin/python3"};
  }

  void runs_die_with_the_checker() {
    QFETCH(QStringList, level);
    // A name no other process has: ctest may run other suites' sandboxes at the same time.
    const QString marker = "spx-o" + QString::number(QCoreApplication::applicationPid());
    QTemporaryDir dir;
    const QString problems = write_file(dir, "problems.jsonl", kProblems);
    const QString samples = write_file(dir, "samples.jsonl",
        R"J({"task_id": "t/add", "completion": "    import ctypes\n    ctypes.CDLL(None).prctl(15, b')J" + marker.toStdString() +
            R"J(', 0, 0, 0)\n    import os, time\n    os.fork()\n    time.sleep(10**6)\n"})J" "\n");
    struct Sweep {  // leave nothing behind, also when a check fails
      QString marker;
      ~Sweep() {
        for (int pid : processes_named(marker)) kill(pid, SIGKILL);
      }
    } sweep{marker};
    QProcess process;
    process.start(QStringLiteral(SPECULA_CLI),
                  QStringList{"check", "--problems", problems, "--samples", samples, "--timeout", "120"} + level);
    QVERIFY(process.waitForStarted());
    // The reduced level's work directories of this checker (none with full isolation).
    const QStringList work_dirs{"specula-run-" + QString::number(process.processId()) + "-*"};
    qsizetype running = 0;
    for (int i = 0; i < 400 && running < 2; ++i) {
      QThread::msleep(50);
      running = processes_named(marker).size();
    }
    QCOMPARE(running, qsizetype{2});
    process.kill();
    QVERIFY(process.waitForFinished());
    QList<int> remaining = processes_named(marker);
    for (int i = 0; i < 100 && !remaining.isEmpty(); ++i) {
      QThread::msleep(50);
      remaining = processes_named(marker);
    }
    QCOMPARE(remaining.size(), qsizetype{0});
    // Nor does the run's work directory outlive it, though its checker could not remove it.
    qsizetype left = QDir("/tmp").entryList(work_dirs, QDir::Dirs | QDir::Hidden).size();
    for (int i = 0; i < 100 && left > 0; ++i) {
      QThread::msleep(50);
      left = QDir("/tmp").entryList(work_dirs, QDir::Dirs | QDir::Hidden).size();
    }
    QCOMPARE(left, qsizetype{0});
  }

  void help_documents_exit_codes() {
    const Outcome o = run_cli({"check", "--help"});
    QCOMPARE(o.code, 0);
    QVERIFY2(o.out.contains("Exit codes:") && o.out.contains("5  the Python interpreter"), qPrintable(o.out));
  }
};

QTEST_GUILESS_MAIN(TestCliCheck)
#include "test_cli_check.moc"
