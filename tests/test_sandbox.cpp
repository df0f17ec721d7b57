// The sandbox against hostile completions: each gets the right verdict within its limit
// + 2 s, planted files stay untouched, the listener sees no connection, and no process of
// the run remains afterwards; at every level, and warm (full isolation through a warm
// process, where the next candidate on the same warm process must pass too). Also what a
// warm candidate leaves for the next, warm siblings, a dead warm process, the verdicts of
// ordinary programs and per-assert counts, in both modes.
// Other processes may run sandboxes at the same time (ctest runs suites in parallel): every
// check counts only this process's runs, by a process name and work directories of its own.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <signal.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>

#include "eval/sandbox.h"
#include "eval/test_runner.h"
#include "eval/warm_sandbox.h"
#include "sandbox_levels.h"

#include <thread>

using namespace specula;

Q_DECLARE_METATYPE(specula::Verdict)
Q_DECLARE_METATYPE(specula::SandboxMode)

namespace {

constexpr double kLimit = 2.0;  // wall-clock limit of every run here
// The process name every hostile program takes: unique to this test process (at most 15
// characters, the kernel's limit).
const std::string kMarker = "spx-h" + std::to_string(getpid());
// The prefix of this process's reduced-level work directories (see Sandbox::run).
const QString kOwnRuns = "specula-run-" + QString::number(getpid()) + "-";

const std::string kPrompt = "def add(a, b):\n    \"\"\"Adds two numbers.\"\"\"\n";
const std::string kTest = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(2, 2) == 4\n";

// A completion that first renames its process (PR_SET_NAME: inherited by every child; the
// reduced level may deny /proc), then does `body`.
std::string hostile_program(const std::string& body) {
  return std::string("    import ctypes\n    ctypes.CDLL(None).prctl(15, b'") + kMarker + "', 0, 0, 0)\n" + body;
}

QString read_file(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QStringLiteral("<missing>");
}

// Live processes still carrying this process's hostile programs' name (a zombie is dead,
// only not yet reaped).
int marked_processes() {
  int count = 0;
  for (const QString& pid : QDir("/proc").entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    bool numeric = false;
    pid.toInt(&numeric);
    if (!numeric || read_file("/proc/" + pid + "/comm").trimmed() != QString::fromStdString(kMarker)) continue;
    const QString stat = read_file("/proc/" + pid + "/stat");  // "pid (comm) STATE ..."
    const qsizetype close = stat.lastIndexOf(')');
    if (close >= 0 && stat.mid(close + 2, 1) != "Z") ++count;
  }
  return count;
}

}  // namespace

class TestSandbox : public QObject {
  Q_OBJECT

 private:
  test::SandboxLevels sandboxes_;  // every level the suite runs at
  QTemporaryDir planted_dir_;  // a directory outside any work directory
  QString planted_home_;       // a file planted in $HOME
  QString planted_tmp_;        // a file planted in /tmp
  QString secret_;             // a file with content no run may read
  QString decoy_run_;          // a work directory as another process's run would leave it
  int listener_ = -1;
  int port_ = 0;

  TestResult run(const Sandbox& sandbox, const std::string& completion, SandboxMode mode = SandboxMode::Cold) {
    SandboxLimits limits;
    limits.wall_seconds = kLimit;
    TestRunner runner(sandbox, limits, 1, mode);
    return runner.run(make_test_program(kPrompt, completion, "", kTest, "add"));
  }

 private slots:
  void initTestCase() {
    try {
      sandboxes_.open();
    } catch (const SandboxError& e) {
      QFAIL(e.what());
    }
    qInfo("isolation: %s %s", isolation_name(sandboxes_.full->isolation()), sandboxes_.full->isolation_note().c_str());
    QVERIFY(planted_dir_.isValid());
    const QString tag = QString::number(QCoreApplication::applicationPid());
    planted_home_ = QDir::home().filePath(".specula-planted-" + tag);
    planted_tmp_ = "/tmp/specula-planted-" + tag;
    secret_ = planted_dir_.filePath("secret.txt");
    for (const QString& path : {planted_home_, planted_tmp_, secret_}) {
      QFile f(path);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(("planted " + path).toUtf8());
      f.close();
      QVERIFY(f.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner));
    }
    // Pid 0 is no process's: this stands for another process's run in progress.
    decoy_run_ = "/tmp/specula-run-0-decoy" + tag;
    QVERIFY(QDir().mkpath(decoy_run_));
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    QVERIFY(listener_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    QVERIFY(bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    QVERIFY(listen(listener_, 16) == 0);
    socklen_t length = sizeof address;
    QVERIFY(getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port_ = ntohs(address.sin_port);
  }

  void cleanupTestCase() {
    QFile::remove(planted_home_);
    QFile::remove(planted_tmp_);
    QFile::remove(QDir::home().filePath(".specula-new-file"));
    QFile::remove("/tmp/specula-new-file");
    QDir().rmdir(decoy_run_);
    if (listener_ >= 0) close(listener_);
  }

  void hostile_data() {
    QTest::addColumn<QString>("level");  // "full", "warm" (full, warm mode), "reduced", "reduced, system python"
    QTest::addColumn<QString>("completion");
    QTest::addColumn<specula::Verdict>("expected");
    QTest::addColumn<bool>("needs_process_limit");
    QTest::addColumn<bool>("needs_confinement");
    const std::string home = planted_home_.toStdString(), tmp = planted_tmp_.toStdString();
    const std::string home_new = QDir::home().filePath(".specula-new-file").toStdString();
    struct Case {
      const char* name;
      std::string body;
      Verdict full;     // expected verdict with full isolation
      // Whether the reduced level guarantees its outcome only where Sandbox::confines_files()
      // (Landlock): the host's files are otherwise open to it.
      bool reduced_needs_confinement;
      Verdict reduced;
      // Outcomes that hold only where Sandbox::limits_processes(): a fork bomb needs the
      // process limit; without namespaces, only the run's own uid finds processes that left
      // the process group.
      bool full_needs_limit = false;
      bool reduced_needs_limit = false;
    };
    const std::vector<Case> cases = {
        {"infinite loop", "    while True:\n        pass\n", Verdict::Timeout, true, Verdict::Timeout},
        {"sleep forever", "    import time\n    time.sleep(10**6)\n", Verdict::Timeout, true, Verdict::Timeout},
        {"fork bomb",
         "    import os\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass\n",
         Verdict::Timeout, true, Verdict::Timeout, true, true},
        {"double fork and setsid survivor",
         "    import os, time\n    if os.fork() == 0:\n        os.setsid()\n        if os.fork() == 0:\n"
         "            time.sleep(10**6)\n        os._exit(0)\n    os.wait()\n    return a + b\n",
         Verdict::Passed, false, Verdict::Passed, false, true},
        {"print 1 GB", "    import sys\n    chunk = 'x' * (1 << 20)\n    for _ in range(1024):\n"
                       "        sys.stdout.write(chunk)\n    return a + b\n",
         Verdict::Failed, false, Verdict::Failed},
        {"allocate 64 GB", "    hog = bytearray(64 << 30)\n    return a + b\n", Verdict::Memory, false, Verdict::Memory},
        {"write to HOME", "    open('" + home + "', 'w').write('overwritten')\n", Verdict::Failed, true, Verdict::Failed},
        {"create in HOME", "    open('" + home_new + "', 'w').write('new')\n", Verdict::Failed, true, Verdict::Failed},
        {"write to /tmp", "    open('" + tmp + "', 'a').write('appended')\n", Verdict::Failed, true, Verdict::Failed},
        {"create in /tmp", "    open('/tmp/specula-new-file', 'w').write('new')\n", Verdict::Failed, true, Verdict::Failed},
        {"read a planted file", "    print(open('" + secret_.toStdString() + "').read())\n    return a + b\n",
         Verdict::Failed, true, Verdict::Failed},
        {"tcp connect", "    import socket\n    s = socket.create_connection(('127.0.0.1', " + std::to_string(port_) +
                            "), timeout=1)\n    s.sendall(b'x')\n    return a + b\n",
         Verdict::Failed, false, Verdict::Failed},
        // Inside the pid namespace the parent is its init, which ignores the signal; in the
        // reduced level it is the intermediate process, so the run dies but the caller lives.
        {"kill the parent", "    import os\n    os.kill(os.getppid(), 9)\n    return a + b\n",
         Verdict::Passed, false, Verdict::Crashed},
        {"close stdout", "    import sys\n    if not sys.stdout.closed:\n        sys.stdout.close()\n    return a + b\n",
         Verdict::Passed, false, Verdict::Passed},
        {"read stdin forever", "    import sys\n    data = sys.stdin.read()\n    return a + b + len(data)\n",
         Verdict::Passed, false, Verdict::Passed},
        {"exit before the asserts", "    import sys\n    sys.exit(0)\n", Verdict::Failed, false, Verdict::Failed},
    };
    for (const Case& c : cases) {
      const QString completion = QString::fromStdString(hostile_program(c.body));
      for (const char* level : {"full", "warm"})
        QTest::newRow((std::string(level) + ": " + c.name).c_str())
            << level << completion << c.full << c.full_needs_limit << false;
      for (const char* level : {test::kSandboxLevels[1], test::kSandboxLevels[2]})
        QTest::newRow((std::string(level) + ": " + c.name).c_str())
            << level << completion << c.reduced << c.reduced_needs_limit << c.reduced_needs_confinement;
    }
  }

  void hostile() {
    QFETCH(QString, level);
    QFETCH(QString, completion);
    QFETCH(specula::Verdict, expected);
    QFETCH(bool, needs_process_limit);
    QFETCH(bool, needs_confinement);
    const bool warm = level == "warm";
    if (!sandboxes_[warm ? "full" : level]) QSKIP("no /usr/bin/python3");
    const Sandbox& sandbox = *sandboxes_[warm ? "full" : level];
    if ((level == "full" || warm) && sandbox.isolation() != Isolation::Full)
      QSKIP(("full isolation unavailable: " + sandbox.isolation_note()).c_str());
    if (needs_process_limit && !sandbox.limits_processes())
      QSKIP(("processes are not limited here: " + sandbox.isolation_note()).c_str());
    if (needs_confinement && !sandbox.confines_files())
      QSKIP(("the host's files are open here: " + sandbox.isolation_note()).c_str());

    SandboxLimits limits;
    limits.wall_seconds = kLimit;
    TestRunner runner(sandbox, limits, 1, warm ? SandboxMode::Warm : SandboxMode::Cold);
    QElapsedTimer clock;
    clock.start();
    const TestResult result = runner.run(make_test_program(kPrompt, completion.toStdString(), "", kTest, "add"));
    const double seconds = clock.elapsed() / 1000.0;
    qInfo("%s in %.2f s: %s", verdict_name(result.verdict), seconds, result.detail.c_str());
    QCOMPARE(verdict_name(result.verdict), verdict_name(expected));
    QCOMPARE(result.isolation, sandbox.isolation());
    QVERIFY2(seconds < kLimit + 2.0, qPrintable(QString("took %1 s").arg(seconds)));

    // Nothing outside the work directory changed, leaked or connected.
    for (const QString& path : {planted_home_, planted_tmp_, secret_})
      QCOMPARE(read_file(path), "planted " + path);
    QVERIFY(!QFile::exists(QDir::home().filePath(".specula-new-file")));
    QVERIFY(!QFile::exists("/tmp/specula-new-file"));
    QVERIFY(result.detail.find(("planted " + secret_).toStdString()) == std::string::npos);
    const int accepted = accept(listener_, nullptr, nullptr);
    if (accepted >= 0) close(accepted);
    QVERIFY2(accepted < 0, "the listener saw a connection");

    // No process of the run remains (killed ones may take a moment to be reaped).
    int remaining = marked_processes();
    for (int i = 0; i < 40 && remaining > 0; ++i) {
      QThread::msleep(50);
      remaining = marked_processes();
    }
    QCOMPARE(remaining, 0);
    if (warm) {
      // The warm process survived it (no restart, no cold run), and the next candidate on it
      // gets its own verdict.
      const TestResult next = runner.run(make_test_program(kPrompt, "    return a + b\n", "", kTest, "add"));
      QCOMPARE(verdict_name(next.verdict), "passed");
      QCOMPARE(runner.warm_starts(), 1);
      QCOMPARE(runner.cold_fallbacks(), 0);
    }
    // The reduced level's host work directories are gone too (another's run is not ours).
    QCOMPARE(QDir("/tmp").entryList({kOwnRuns + "*"}, QDir::Dirs | QDir::Hidden).size(), 0);
    QVERIFY(QFileInfo::exists(decoy_run_));
  }

  // A reduced run works in a host directory named after the process that started it.
  void reduced_work_directory_names_its_process() {
    SandboxLimits limits;
    limits.wall_seconds = 10.0;
    const SandboxRun r = sandboxes_.reduced->run({{"cwd.py", "import os\nprint(os.getcwd())\n"}}, "cwd.py", {}, limits);
    QCOMPARE(r.exit_code, 0);
    const QString cwd = QString::fromStdString(r.out).trimmed();
    QVERIFY2(cwd.startsWith("/tmp/" + kOwnRuns), qPrintable(cwd));
    QVERIFY2(!QFileInfo::exists(cwd), "the work directory outlived its run");
  }

  void verdicts_of_ordinary_programs_data() {
    QTest::addColumn<specula::SandboxMode>("mode");
    QTest::newRow("cold") << SandboxMode::Cold;
    QTest::newRow("warm") << SandboxMode::Warm;
  }

  void verdicts_of_ordinary_programs() {
    QFETCH(specula::SandboxMode, mode);
    auto run = [&](const Sandbox& sandbox, const std::string& completion) { return this->run(sandbox, completion, mode); };
    const TestResult passed = run(*sandboxes_.full, "    return a + b\n");
    QCOMPARE(verdict_name(passed.verdict), "passed");
    QCOMPARE(passed.asserts_passed, 2);
    QCOMPARE(passed.asserts_total, 2);

    const TestResult partial = run(*sandboxes_.full, "    return 3\n");  // right for (1, 2) only
    QCOMPARE(verdict_name(partial.verdict), "failed");
    QCOMPARE(partial.asserts_passed, 1);
    QCOMPARE(partial.asserts_total, 2);
    QVERIFY2(partial.detail.find("AssertionError") != std::string::npos, partial.detail.c_str());
    // a failed `assert x == y` says what each side was
    QVERIFY2(partial.detail.find("expected 4, got 3") != std::string::npos, partial.detail.c_str());

    const TestResult raised = run(*sandboxes_.full, "    raise ValueError('no sum today')\n");
    QCOMPARE(verdict_name(raised.verdict), "failed");
    QCOMPARE(raised.asserts_passed, 0);
    QVERIFY2(raised.detail.find("ValueError: no sum today") != std::string::npos, raised.detail.c_str());

    const TestResult syntax = run(*sandboxes_.full, "    return a +\n");
    QCOMPARE(verdict_name(syntax.verdict), "failed");
    QVERIFY2(syntax.detail.find("SyntaxError") != std::string::npos, syntax.detail.c_str());

    const TestResult segfault = run(*sandboxes_.full, "    import ctypes\n    ctypes.string_at(0)\n");
    QCOMPARE(verdict_name(segfault.verdict), "crashed");
    QVERIFY2(segfault.detail.find("signal 11") != std::string::npos, segfault.detail.c_str());
  }

  void asserts_counted_one_by_one_data() { verdicts_of_ordinary_programs_data(); }

  // A plain list of asserts (MBPP style) is counted assert by assert.
  void asserts_counted_one_by_one() {
    QFETCH(specula::SandboxMode, mode);
    SandboxLimits limits;
    limits.wall_seconds = kLimit;
    TestRunner runner(*sandboxes_.full, limits, 1, mode);
    const TestResult r = runner.run(make_test_program(
        "", "def square(x):\n    return x * x if x < 3 else 0\n", "",
        "assert square(1) == 1\nassert square(2) == 4\nassert square(3) == 9\nassert square(4) == 16\n", ""));
    QCOMPARE(verdict_name(r.verdict), "failed");
    QCOMPARE(r.asserts_passed, 2);
    QCOMPARE(r.asserts_total, 4);
    // An assert in the completion itself is not one of the tests.
    const TestResult own = runner.run(make_test_program(
        "", "def one():\n    return 1\nassert one() == 1\n", "", "assert one() == 1\n", ""));
    QCOMPARE(verdict_name(own.verdict), "passed");
    QCOMPARE(own.asserts_total, 1);
  }

  // Warm runs, one after another on one warm process: what the first candidate leaves or
  // changes never reaches the second, whose verdict is the cold path's; the warm process
  // survives (it is restarted only where it cannot put its namespace back). Each pair runs
  // cold too: the first candidate's verdict is the same in both modes.
  void warm_candidate_does_not_reach_the_next_data() {
    QTest::addColumn<QString>("first");
    QTest::addColumn<specula::Verdict>("first_verdict");
    QTest::addColumn<QString>("second");
    QTest::addColumn<int>("warm_starts");  // warm processes the pair needs
    const std::string clean_scratch =
        "    import os, time\n"
        "    own = ['main.py', 'probe.json', 'program.py']\n"
        "    for _ in range(3):\n"
        "        work = sorted(os.listdir('/work'))\n"
        "        if sorted(os.listdir('.')) != own or work not in (['run'], own):\n"
        "            return -1\n"
        "        time.sleep(0.2)\n"
        "    return a + b\n";
    struct Pair {
      const char* name;
      std::string first;
      Verdict first_verdict;
      std::string second;
      int warm_starts = 1;
    };
    const std::vector<Pair> pairs = {
        {"files in its scratch, beside it, and a writer left behind",
         "    import os, time\n    open('left', 'w').write('x')\n    open('/work/left', 'w').write('x')\n"
         "    os.makedirs('/work/run2', exist_ok=True)\n"
         "    if os.fork() == 0:\n        os.setsid()\n        if os.fork() == 0:\n"
         "            for i in range(400):\n"
         "                for where in ('/work/run/late', '/work/late'):\n"
         "                    try:\n                        open(where, 'w').write('x')\n"
         "                    except OSError:\n                        pass\n"
         "                time.sleep(0.01)\n"
         "            os._exit(0)\n        os._exit(0)\n    os.wait()\n    return a + b\n",
         Verdict::Passed, clean_scratch},
        {"signals its parent and init",
         "    import os, signal\n"
         "    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGSTOP, signal.SIGHUP):\n"
         "        os.kill(os.getppid(), sig)\n        os.kill(1, sig)\n    return a + b\n",
         Verdict::Passed, "    return a + b\n"},
        {"kills every process it may",
         "    import os, signal\n    try:\n        os.kill(-1, signal.SIGKILL)\n    except ProcessLookupError:\n"
         "        pass\n    return a + b\n",
         Verdict::Passed, "    return a + b\n"},
        {"changes modules, builtins, environment",
         "    import builtins, os, sys\n    if not hasattr(builtins, 'specula_left'):\n        import json\n"
         "        builtins.divmod = None\n        builtins.abs = None\n        builtins.specula_left = 1\n"
         "        json.dumps = None\n        sys.modules['json'] = None\n        sys.path.insert(0, '/specula-left')\n"
         "        os.environ['SPECULA_LEFT'] = '1'\n        sys.setrecursionlimit(200)\n    return a + b\n",
         Verdict::Passed,
         "    import json, os, sys\n"
         "    if divmod(7, 2) != (3, 1) or abs(-1) != 1 or json.dumps([]) != '[]' or 'SPECULA_LEFT' in os.environ:\n"
         "        return -1\n"
         "    if hasattr(__builtins__, 'specula_left') or 'specula_left' in dir(__import__('builtins')):\n"
         "        return -1\n"
         "    if '/specula-left' in sys.path or sys.getrecursionlimit() < 1000:\n"
         "        return -1\n"
         "    return a + b\n"},
        {"exhausts memory", "    hog = [bytes(64 << 20) for _ in range(1 << 10)]\n    return a + b\n", Verdict::Memory,
         "    hog = bytes(1 << 30)\n    return a + b\n"},
        {"exhausts file descriptors",
         "    import os\n    held = []\n    while True:\n        held.append(os.open('/dev/null', os.O_RDONLY))\n",
         Verdict::Failed,
         "    import os\n    held = [os.open('/dev/null', os.O_RDONLY) for _ in range(32)]\n"
         "    for fd in held:\n        os.close(fd)\n    return a + b\n"},
        {"fills the work directory",
         "    import os\n    for i in range(64):\n        try:\n"
         "            open('/work/fill%d' % i, 'wb').write(b'x' * (15 << 20))\n        except OSError:\n"
         "            pass\n    return a + b\n",
         Verdict::Passed,
         "    open('big', 'wb').write(b'x' * (15 << 20))\n    return a + b\n"},
        {"leaves /dev and shared memory",
         "    import ctypes, os\n    open('/dev/specula-left', 'w').write('x')\n    open('/dev/shm/left', 'w').write('x')\n"
         "    libc = ctypes.CDLL(None)\n    assert libc.shmget(0x5bec, 4096, 0o1600) >= 0\n    return a + b\n",
         Verdict::Passed,
         "    import ctypes, os\n"
         "    if os.path.exists('/dev/specula-left') or os.listdir('/dev/shm'):\n        return -1\n"
         "    if ctypes.CDLL(None).shmget(0x5bec, 0, 0) >= 0:\n        return -1\n"
         "    return a + b\n"},
        {"replaces a /dev entry",
         "    import os\n    os.unlink('/dev/stdin')\n    os.symlink('/work/run/main.py', '/dev/stdin')\n    return a + b\n",
         Verdict::Passed,
         "    import os\n    return a + b if os.readlink('/dev/stdin') == '/proc/self/fd/0' else -1\n", 2},
    };
    for (const Pair& p : pairs)
      QTest::newRow(p.name) << QString::fromStdString(hostile_program(p.first)) << p.first_verdict
                            << QString::fromStdString(p.second) << p.warm_starts;
  }

  void warm_candidate_does_not_reach_the_next() {
    QFETCH(QString, first);
    QFETCH(specula::Verdict, first_verdict);
    QFETCH(QString, second);
    QFETCH(int, warm_starts);
    const Sandbox& sandbox = *sandboxes_.full;
    if (sandbox.isolation() != Isolation::Full) QSKIP(("no warm runs without full isolation: " + sandbox.isolation_note()).c_str());
    for (SandboxMode mode : {SandboxMode::Cold, SandboxMode::Warm}) {
      SandboxLimits limits;
      limits.wall_seconds = kLimit;
      TestRunner runner(sandbox, limits, 1, mode);
      const TestResult r1 = runner.run(make_test_program(kPrompt, first.toStdString(), "", kTest, "add"));
      qInfo("%s: first %s: %s", sandbox_mode_name(mode), verdict_name(r1.verdict), r1.detail.c_str());
      QCOMPARE(verdict_name(r1.verdict), verdict_name(first_verdict));
      const TestResult r2 = runner.run(make_test_program(kPrompt, second.toStdString(), "", kTest, "add"));
      qInfo("%s: second %s: %s", sandbox_mode_name(mode), verdict_name(r2.verdict), r2.detail.c_str());
      QCOMPARE(verdict_name(r2.verdict), "passed");
      if (mode == SandboxMode::Warm) {
        QCOMPARE(runner.warm_starts(), warm_starts);
        QCOMPARE(runner.cold_fallbacks(), 0);
      }
    }
    int remaining = marked_processes();
    for (int i = 0; i < 40 && remaining > 0; ++i) {
      QThread::msleep(50);
      remaining = marked_processes();
    }
    QCOMPARE(remaining, 0);
  }

  // Concurrent warm runs have warm processes of their own: one that kills every process it
  // can see, while the other sleeps, leaves the other alone.
  void warm_siblings_cannot_signal_each_other() {
    const Sandbox& sandbox = *sandboxes_.full;
    if (sandbox.isolation() != Isolation::Full) QSKIP(("no warm runs without full isolation: " + sandbox.isolation_note()).c_str());
    SandboxLimits limits;
    limits.wall_seconds = 10.0;
    TestRunner runner(sandbox, limits, 2, SandboxMode::Warm);
    const std::string killer = hostile_program(
        "    import os, signal, time\n    time.sleep(0.5)\n"
        "    for pid in range(1, 1 << 15):\n        if pid != os.getpid():\n"
        "            try:\n                os.kill(pid, signal.SIGKILL)\n            except OSError:\n                pass\n"
        "    return a + b\n");
    const std::string sleeper = "    import time\n    time.sleep(2.5)\n    return a + b\n";
    auto killed = runner.submit(make_test_program(kPrompt, killer, "", kTest, "add"));
    auto slept = runner.submit(make_test_program(kPrompt, sleeper, "", kTest, "add"));
    const TestResult k = killed.get(), s = slept.get();
    QCOMPARE(verdict_name(k.verdict), "passed");
    QVERIFY2(s.verdict == Verdict::Passed, s.detail.c_str());
    QCOMPARE(runner.warm_starts(), 2);
  }

  // warm_up starts one warm process per worker before any run; the runs then start none,
  // and a second warm_up (all of them idle and alive) starts none either. Cold: nothing.
  void warm_up_starts_one_process_per_worker() {
    const Sandbox& sandbox = *sandboxes_.full;
    if (sandbox.isolation() != Isolation::Full) QSKIP(("no warm runs without full isolation: " + sandbox.isolation_note()).c_str());
    TestRunner runner(sandbox, SandboxLimits{}, 2, SandboxMode::Warm);
    runner.warm_up();
    QCOMPARE(runner.warm_starts(), 2);
    const std::vector<TestResult> results = runner.run_all({make_test_program(kPrompt, "    return a + b\n", "", kTest, "add"),
                                                            make_test_program(kPrompt, "    return a - b\n", "", kTest, "add")});
    QCOMPARE(verdict_name(results[0].verdict), "passed");
    QCOMPARE(verdict_name(results[1].verdict), "failed");
    runner.warm_up();
    QCOMPARE(runner.warm_starts(), 2);
    QCOMPARE(runner.cold_fallbacks(), 0);
    TestRunner cold(sandbox, SandboxLimits{}, 2, SandboxMode::Cold);
    cold.warm_up();
    QCOMPARE(cold.warm_starts(), 0);
  }

  // A warm process killed between runs is restarted for the next; one killed during a run
  // hands that run to the cold path: its verdict is the candidate's either way.
  void dead_warm_process_never_gives_a_verdict() {
    const Sandbox& sandbox = *sandboxes_.full;
    if (sandbox.isolation() != Isolation::Full) QSKIP(("no warm runs without full isolation: " + sandbox.isolation_note()).c_str());
    SandboxLimits limits;
    limits.wall_seconds = 10.0;
    WarmSandbox warm(sandbox, {"main.py", test_harness_source()});
    auto run = [&](const std::string& completion) {
      const TestProgram program = make_test_program(kPrompt, completion, "", kTest, "add");
      return classify_run(warm.run({{"main.py", test_harness_source()}, {"program.py", program.source},
                                    {"probe.json", probe_options_json(program)}},
                                   "main.py", {std::to_string(program.test_first_line)}, limits));
    };
    QCOMPARE(verdict_name(run("    return a + b\n").verdict), "passed");
    QCOMPARE(warm.starts(), 1);
    QVERIFY(warm.pid() > 0);
    QCOMPARE(kill(warm.pid(), SIGKILL), 0);
    // Dead before the next request: a zombie, not yet reaped (the warm sandbox reaps it).
    for (int i = 0; i < 100 && !read_file("/proc/" + QString::number(warm.pid()) + "/stat").contains(") Z "); ++i)
      QThread::msleep(10);
    QCOMPARE(verdict_name(run("    return a + b\n").verdict), "passed");
    QCOMPARE(verdict_name(run("    return a - b\n").verdict), "failed");
    QCOMPARE(warm.starts(), 2);
    QCOMPARE(warm.cold_fallbacks(), 0);

    const pid_t victim = warm.pid();
    std::thread killer([victim] {
      QThread::msleep(400);
      kill(victim, SIGKILL);
    });
    const TestResult during = run("    import time\n    time.sleep(1.5)\n    return a + b\n");
    killer.join();
    QCOMPARE(verdict_name(during.verdict), "passed");
    QCOMPARE(warm.cold_fallbacks(), 1);
    QCOMPARE(verdict_name(run("    return a + b\n").verdict), "passed");
    QCOMPARE(warm.starts(), 3);
  }

  void missing_interpreter_is_reported() {
    SandboxOptions options;
    options.python = "/nonexistent/python3";
    QVERIFY_THROWS_EXCEPTION(SandboxError, Sandbox{options});
    try {
      Sandbox sandbox(options);
    } catch (const SandboxError& e) {
      QVERIFY2(std::string(e.what()).find("/nonexistent/python3") != std::string::npos, e.what());
    }
  }

  void runs_concurrently_on_the_pool_data() { verdicts_of_ordinary_programs_data(); }

  void runs_concurrently_on_the_pool() {
    QFETCH(specula::SandboxMode, mode);
    SandboxLimits limits;
    limits.wall_seconds = 10.0;
    TestRunner runner(*sandboxes_.full, limits, 2, mode);
    std::vector<TestProgram> programs;
    for (int i = 0; i < 6; ++i)
      programs.push_back(make_test_program(kPrompt, i % 2 ? "    return a + b\n" : "    return a - b\n", "", kTest, "add"));
    const std::vector<TestResult> results = runner.run_all(programs);
    QCOMPARE(results.size(), programs.size());
    for (int i = 0; i < 6; ++i) QCOMPARE(verdict_name(results[i].verdict), i % 2 ? "passed" : "failed");
  }
};

QTEST_GUILESS_MAIN(TestSandbox)
#include "test_sandbox.moc"
