// What a run learns about the host, at every isolation level, and through a warm process. Before its tests, this process
// plants a token of its own wherever a careless sandbox would hand it on, and executes
// itself again so that the kernel shows it: in its environment (as an API key would be),
// its command line, the name of its working directory, a descriptor left open (not
// close-on-exec) on a file holding it, a key in its session keyring and one in its user
// keyring; it also takes a pseudo-terminal as its controlling terminal. A run then searches
// every readable place for the token: names, link targets and contents under /proc, /sys,
// /dev, /etc and /tmp, the memory of every process it may read, its open descriptors and
// the keyrings it can reach, and says what else it sees (processes' command lines,
// environments, working directories and descriptors, mounts, host and user name, /sys, the
// terminal). The same search run outside any sandbox finds the token through each channel:
// the search can fail.
#include <fcntl.h>
#include <linux/keyctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QtTest>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <map>
#include <random>

#include "eval/sandbox.h"
#include "eval/warm_sandbox.h"
#include "sandbox_levels.h"

using namespace specula;

namespace {

// Holds the token in the re-executed process's environment, as an API key would be held.
constexpr const char* kTokenVariable = "SPECULA_TEST_API_KEY";

struct Planted {
  std::string token;        // the secret: "spx" and 24 hex digits
  std::string directory;    // the working directory, named after the token
  int descriptor = -1;      // open on a file holding the token, inherited through exec
  long keys[2] = {-1, -1};  // in the session and the user keyring (kKeyrings)
};
Planted planted;

// Searches for the secret (argv[1], reversed and in hex, so that no command line holds it)
// and for a control string (argv[2], given plainly) under the roots that follow (the memory
// of each process whose /proc directory it walks), and prints what it found and saw as
// JSON. It never reads its own memory (the secret is there once decoded) and reads no
// stream: terminals, pipes and character devices by name only.
const char* const kExplore = R"PY(import ctypes, json, os, socket, stat, struct, sys

secret = bytes.fromhex(sys.argv[1])[::-1]
control = sys.argv[2].encode()
roots = sys.argv[3:]
me = str(os.getpid())
hits = {"secret": [], "control": []}


def look(data, where):
    for name, needle in (("secret", secret), ("control", control)):
        if needle in data and len(hits[name]) < 100:
            hits[name].append(where)


def read_file(path, cap=4 << 20):
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY)
    try:
        chunks, size = [], 0
        while size < cap:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def descriptors():
    found = []
    for fd in range(1024):
        try:
            info = os.fstat(fd)
        except OSError:
            continue
        found.append(fd)
        try:
            look(os.fsencode(os.readlink("/proc/self/fd/%d" % fd)), "fd %d (link)" % fd)
        except OSError:
            pass
        try:
            if stat.S_ISREG(info.st_mode):
                look(os.pread(fd, 4 << 20, 0), "fd %d" % fd)
            elif stat.S_ISDIR(info.st_mode):
                look(os.fsencode("/".join(os.listdir(fd))), "fd %d (directory)" % fd)
        except OSError:
            pass
    return found


def memory(pid):
    try:
        maps = read_file("/proc/%s/maps" % pid).decode().splitlines()
        fd = os.open("/proc/%s/mem" % pid, os.O_RDONLY)
    except OSError:
        return
    try:
        for line in maps:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if fields[1][0] != "r":
                continue
            try:
                look(os.pread(fd, min(end - start, 256 << 20), start), "/proc/%s/mem" % pid)
            except (OSError, OverflowError):
                pass
    finally:
        os.close(fd)


def walk(path, depth=0):
    look(os.fsencode(path), path + " (name)")
    try:
        info = os.lstat(path)
    except OSError:
        return
    if stat.S_ISLNK(info.st_mode):
        try:
            look(os.fsencode(os.readlink(path)), path + " (link)")
        except OSError:
            pass
    elif stat.S_ISDIR(info.st_mode) and depth < 16:
        try:
            names = os.listdir(path)
        except OSError:
            return
        pid = os.path.basename(path)
        if os.path.dirname(path) == "/proc" and pid.isdigit() and pid != me:
            memory(pid)
        for name in names:
            walk(os.path.join(path, name), depth + 1)
    elif stat.S_ISREG(info.st_mode) and os.path.basename(path) != "mem":
        try:
            look(read_file(path), path)
        except OSError:
            pass


def keyrings():
    number = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)
    if number is None:
        return "unknown architecture"
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    def call(operation, key):
        out = ctypes.create_string_buffer(65536)
        n = libc.syscall(number, operation, ctypes.c_long(key), out, ctypes.c_long(65536))
        return out.raw[:n] if n > 0 else b""

    def ring(key, depth):
        members = call(11, key)
        for (member,) in struct.iter_unpack("i", members[: len(members) // 4 * 4]):
            description = call(6, member)
            look(description, "keyring key %d" % member)
            look(call(11, member), "keyring key %d" % member)
            if description.startswith(b"keyring;") and depth < 4:
                ring(member, depth + 1)

    for special in (-1, -2, -3, -4, -5):  # thread, process, session, user, user session
        ring(special, 0)
    try:  # and every key listed, by its serial number
        listed = [int(line.split()[0], 16) for line in read_file("/proc/keys").decode().splitlines()]
    except (OSError, ValueError, IndexError):
        listed = []
    for key in listed:
        look(call(6, key) + call(11, key), "keyring key %d" % key)
    # Whether the keyring system calls work at all: the session keyring's serial number.
    serial = libc.syscall(number, 0, ctypes.c_long(-3), ctypes.c_long(0))
    return "serial" if serial > 0 else os.strerror(ctypes.get_errno())


def attempt(action):
    try:
        return action()
    except Exception as error:  # what stopped it, for the report
        return {"error": type(error).__name__}


def processes():
    result = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        entry = result[pid] = {}
        entry["cmdline"] = attempt(lambda: [a.decode() for a in read_file("/proc/%s/cmdline" % pid).split(b"\0")[:-1]])
        entry["environ"] = attempt(lambda: [v.split(b"=")[0].decode() for v in read_file("/proc/%s/environ" % pid).split(b"\0") if v])
        entry["cwd"] = attempt(lambda: os.readlink("/proc/%s/cwd" % pid))
        if pid != me:
            entry["fds"] = attempt(lambda: {fd: os.readlink("/proc/%s/fd/%s" % (pid, fd)) for fd in os.listdir("/proc/%s/fd" % pid)})
    return result


def mounts():
    result = []
    for line in read_file("/proc/self/mountinfo").decode().splitlines():
        fields = line.split()
        result.append({"root": fields[3], "point": fields[4], "type": fields[fields.index("-") + 1]})
    return result


def terminal():
    fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    os.close(fd)
    return "opened"


def user():
    import pwd
    return pwd.getpwuid(os.getuid()).pw_name


report = {"descriptors": descriptors()}
look(b"\0".join(os.fsencode(k) + b"=" + os.fsencode(v) for k, v in os.environ.items()), "environment")
for root in roots:
    walk(root)
report.update({
    "keyrings": keyrings(),
    "secret": hits["secret"], "control": hits["control"],
    "environment": sorted(os.environ), "cwd": os.getcwd(),
    "processes": attempt(processes), "mounts": attempt(mounts),
    "hostname": socket.gethostname(), "user": attempt(user),
    "sys": attempt(lambda: os.listdir("/sys")), "terminal": attempt(terminal),
})
print(json.dumps(report))
)PY";

// Where a run searches, besides its work directory.
const QStringList kRoots = {"/proc", "/sys", "/dev", "/etc", "/tmp"};

std::string hex_reversed(const std::string& text) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (auto c = text.rbegin(); c != text.rend(); ++c) {
    out += digits[static_cast<unsigned char>(*c) >> 4];
    out += digits[static_cast<unsigned char>(*c) & 15];
  }
  return out;
}

// The exploring script's report, run in `sandbox` with the control string in a file of the
// work directory and on its command line. Where the sandbox does not confine the files,
// the host's /proc, /tmp, ... are open to the run by design: it searches only its work
// directory then (and its environment, descriptors and keyrings, as always).
QJsonObject explore(const Sandbox& sandbox, const std::string& control, bool warm) {
  SandboxLimits limits;
  limits.wall_seconds = 60.0;
  limits.max_output_bytes = 8u << 20;
  std::vector<std::string> args = {hex_reversed(planted.token), control};
  if (sandbox.confines_files())
    for (const QString& root : kRoots) args.push_back(root.toStdString());
  args.push_back(".");
  const std::vector<SandboxFile> files = {{"explore.py", kExplore}, {"control.txt", control}};
  const SandboxRun run = warm ? WarmSandbox(sandbox, files[0]).run(files, "explore.py", args, limits)
                              : sandbox.run(files, "explore.py", args, limits);
  if (run.exit_code != 0) qWarning("explore: exit %d, signal %d: %s", run.exit_code, run.signal, run.err.c_str());
  return QJsonDocument::fromJson(QByteArray::fromStdString(run.out)).object();
}

QStringList strings(const QJsonValue& value) {
  QStringList out;
  for (const QJsonValue& v : value.toArray()) out << v.toString();
  return out;
}

// Where the interpreter lives (its directory, prefix and base prefix), as the sandbox binds it.
QStringList interpreter_directories(const Sandbox& sandbox) {
  QProcess p;
  p.start(QString::fromStdString(sandbox.python()),
          {"-I", "-c", "import os, sys\nfor d in (os.path.dirname(sys.executable), sys.prefix, sys.base_prefix):\n"
                       "    print(os.path.realpath(d))\n"});
  p.waitForFinished(60000);
  return QString::fromUtf8(p.readAllStandardOutput()).split('\n', Qt::SkipEmptyParts);
}

// The environment every process of a run has (bubblewrap adds PWD).
const QStringList kRunEnvironment = {"HOME", "LC_ALL", "PATH", "PWD", "TMPDIR"};

}  // namespace

class TestSandboxExposure : public QObject {
  Q_OBJECT

  test::SandboxLevels sandboxes_;  // every level the suite runs at
  std::map<QString, QJsonObject> reports_;  // by level, explored once

  // The report of a level's run, explored once.
  QJsonObject report(const QString& level) {
    if (!reports_.count(level))
      reports_[level] = explore(*sandbox(level), "spx-control-" + level.toStdString(), level == "warm");
    return reports_[level];
  }

  // "warm" is the full level through a warm process (warm_sandbox.h).
  const Sandbox* sandbox(const QString& level) const { return sandboxes_[level == "warm" ? "full" : level]; }
  static bool namespaced(const QString& level) { return level == "full" || level == "warm"; }

  static void levels() {
    QTest::addColumn<QString>("level");
    for (const char* level : test::kSandboxLevels) QTest::newRow(level) << level;
    QTest::newRow("warm") << "warm";
  }

// In a test function over levels(): `level`, its sandbox `s` and its report `r`, or a skip
// where the machine does not offer the level, or where the check holds only for a level
// that confines the files (needs_confinement) and this one does not.
#define FETCH_LEVEL_REPORT(needs_confinement)                                                       \
  QFETCH(QString, level);                                                                           \
  const Sandbox* s = sandbox(level);                                                                \
  if (!s) QSKIP("no /usr/bin/python3");                                                             \
  if (namespaced(level) && s->isolation() != Isolation::Full)                                       \
    QSKIP(("full isolation unavailable: " + s->isolation_note()).c_str());                          \
  if ((needs_confinement) && !s->confines_files())                                                  \
    QSKIP(("the host's files are open here: " + s->isolation_note()).c_str());                      \
  const QJsonObject r = report(level);                                                              \
  QVERIFY2(!r.isEmpty(), "the exploring run gave no report")

 private slots:
  void initTestCase() {
    QVERIFY2(!planted.token.empty(), "the token was not planted (main)");
    try {
      sandboxes_.open();
    } catch (const SandboxError& e) {
      QFAIL(e.what());
    }
    qInfo("isolation: %s %s", isolation_name(sandboxes_.full->isolation()), sandboxes_.full->isolation_note().c_str());
  }

  // The same search as a plain child of this process finds the token through every channel
  // planted, so a search that finds nothing in a sandbox means something.
  void the_search_finds_what_is_reachable() {
    const QString pid = QString::number(getpid());
    QProcess search;  // inherits the environment, the working directory and the open descriptor
    search.start(QString::fromStdString(sandboxes_.full->python()),
                 {"-I", "-B", "-c", kExplore, QString::fromStdString(hex_reversed(planted.token)), "spx-control",
                  "/proc/" + pid});
    QVERIFY(search.waitForFinished(120000));
    const QJsonObject r = QJsonDocument::fromJson(search.readAllStandardOutput()).object();
    QVERIFY2(!r.isEmpty(), search.readAllStandardError().constData());
    const QStringList found = strings(r["secret"]);
    for (const QString& where : QStringList{"/proc/" + pid + "/environ", "/proc/" + pid + "/cmdline",
                                 "/proc/" + pid + "/cwd (link)", "/proc/" + pid + "/mem", "environment",
                                 "fd " + QString::number(planted.descriptor)})
      QVERIFY2(found.contains(where), qPrintable(where + " not in " + found.join(", ")));
    QVERIFY2(found.filter(QRegularExpression("^keyring key ")).size() >= 2, qPrintable(found.join(", ")));
    QCOMPARE(r["keyrings"].toString(), QString("serial"));
    QCOMPARE(r["terminal"].toString(), QString("opened"));
  }

  void nothing_of_the_host_found_data() { levels(); }
  // Where the level confines the files: nowhere; elsewhere: not in the run's environment,
  // descriptors or keyrings.
  void nothing_of_the_host_found() {
    FETCH_LEVEL_REPORT(false);
    if (!s->confines_files()) qInfo("searched the environment, descriptors and keyrings only: %s", s->isolation_note().c_str());
    QVERIFY2(strings(r["secret"]).isEmpty(), qPrintable(strings(r["secret"]).join(", ")));
    // The search did read what the run may: the control file, and its own command line where
    // /proc is there (a warm run's is its warm process's: forked, not executed).
    const QStringList control = strings(r["control"]);
    QVERIFY2(control.contains("./control.txt"), qPrintable(control.join(", ")));
    if (level == "full") QVERIFY2(!control.filter(QRegularExpression("^/proc/\\d+/cmdline$")).isEmpty(), qPrintable(control.join(", ")));
  }

  // A session of its own at every level: the caller's terminal is not the run's (it could
  // read what the user types, or push input into the user's shell).
  void no_controlling_terminal_data() { levels(); }
  void no_controlling_terminal() {
    FETCH_LEVEL_REPORT(false);
    QVERIFY2(r["terminal"].isObject(), "the run opened the caller's terminal");
  }

  // The keyring system calls fail at every level: with the caller's kernel uid (a normal
  // user's run, also inside a user namespace) a run could otherwise read the user's keys by
  // their serial numbers.
  void keyrings_are_out_of_reach_data() { levels(); }
  void keyrings_are_out_of_reach() {
    FETCH_LEVEL_REPORT(false);
    QCOMPARE(r["keyrings"].toString(), QString(std::strerror(ENOSYS)));
  }

  // Only stdin, stdout, stderr and the harness's channel, at every level; with full
  // isolation also no other process of the run holds a host file open.
  void only_the_run_descriptors_are_open_data() { levels(); }
  void only_the_run_descriptors_are_open() {
    FETCH_LEVEL_REPORT(false);
    QCOMPARE(r["descriptors"].toArray(), (QJsonArray{0, 1, 2, 3}));
    if (!namespaced(level)) return;
    const QJsonObject processes = r["processes"].toObject();
    for (auto p = processes.begin(); p != processes.end(); ++p) {
      const QJsonObject fds = p->toObject()["fds"].toObject();
      if (level == "warm" && p.key() == "1") continue;  // not dumpable: unreadable, see below
      for (auto fd = fds.begin(); fd != fds.end(); ++fd) {
        const QString target = fd->toString();
        QVERIFY2(target == "/dev/null" || target.startsWith("pipe:") || target.startsWith("anon_inode:"),
                 qPrintable("process " + p.key() + " fd " + fd.key() + ": " + target));
      }
    }
  }

  // Every process of the run has the run's environment only (bubblewrap's init too), names
  // no host path on its command line but the interpreter's and works in the sandbox.
  void processes_show_nothing_of_the_caller_data() { levels(); }
  void processes_show_nothing_of_the_caller() {
    FETCH_LEVEL_REPORT(true);
    for (const QString& name : strings(r["environment"])) QVERIFY2(kRunEnvironment.contains(name), qPrintable(name));
    if (!namespaced(level)) {
      // Without a pid namespace /proc is the host's: Landlock keeps the run out of it.
      QVERIFY2(r["processes"].toObject().contains("error"), "/proc is readable");
      return;
    }
    const QJsonObject processes = r["processes"].toObject();
    QVERIFY2(processes.size() >= 2, "bubblewrap's init and the interpreter");
    const QString python = QString::fromStdString(s->python());
    for (auto p = processes.begin(); p != processes.end(); ++p) {
      const QJsonObject process = p->toObject();
      if (level == "warm" && p.key() == "1") {
        // The warm process is not dumpable: a run, of its uid, cannot read what it holds.
        for (const char* what : {"environ", "cwd", "fds"})
          QVERIFY2(process[what].toObject().contains("error"), qPrintable(QString("the warm process's ") + what));
      }
      for (const QString& name : strings(process["environ"]))
        QVERIFY2(kRunEnvironment.contains(name), qPrintable("process " + p.key() + ": " + name));
      for (const QString& arg : strings(process["cmdline"]))
        QVERIFY2(!arg.startsWith('/') || arg.startsWith("/usr/") || arg == python || kRoots.contains(arg),
                 qPrintable("process " + p.key() + ": " + arg));
      const QString cwd = process["cwd"].toString();
      if (level == "warm" && p.key() == "1") continue;
      QVERIFY2(cwd == "/work" || cwd == "/" || (level == "warm" && cwd == "/work/run"),
               qPrintable("process " + p.key() + " works in " + cwd));
    }
    QCOMPARE(r["cwd"].toString(), QString(level == "warm" ? "/work/run" : "/work"));
  }

  // The mounts are the read-only system directories, the interpreter's, /proc, /dev and the
  // work directory, each at its own path: no other host path shows.
  void mounts_are_the_system_directories_data() { levels(); }
  void mounts_are_the_system_directories() {
    FETCH_LEVEL_REPORT(true);
    if (!namespaced(level)) {
      QVERIFY2(r["mounts"].toObject().contains("error"), "the host's mount table is readable");
      return;
    }
    const QStringList python_dirs = interpreter_directories(*s);
    const QStringList kernel_file_systems = {"proc", "tmpfs", "devtmpfs", "devpts", "mqueue"};
    for (const QJsonValue& value : r["mounts"].toArray()) {
      const QJsonObject mount = value.toObject();
      const QString point = mount["point"].toString(), root = mount["root"].toString();
      const bool system = point == "/" || point == "/usr" || point.startsWith("/usr/") || point == "/work" ||
                          point == "/proc" || point.startsWith("/proc/") || point == "/dev" ||
                          point.startsWith("/dev/") || point.startsWith("/etc/ld.so.") ||
                          point == "/etc/localtime" ||
                          std::any_of(python_dirs.begin(), python_dirs.end(),
                                      [&](const QString& d) { return point == d || point.startsWith(d + "/"); }) ||
                          QStringList{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}.contains(point);
      QVERIFY2(system, qPrintable("mounted at " + point));
      if (!kernel_file_systems.contains(mount["type"].toString()))
        QVERIFY2(root == point || root.startsWith("/usr/"), qPrintable(point + " shows the host's " + root));
    }
  }

  // A neutral host name with full isolation (the reduced level has no namespace for it and
  // shows the host's), and no user name at either: /etc/passwd is not there, or out of reach.
  void host_and_user_are_neutral_data() { levels(); }
  void host_and_user_are_neutral() {
    FETCH_LEVEL_REPORT(true);
    if (namespaced(level)) QCOMPARE(r["hostname"].toString(), QString("sandbox"));
    QVERIFY2(r["user"].isObject(), qPrintable("the user's name: " + r["user"].toString()));
  }

  void sys_is_out_of_reach_data() { levels(); }
  void sys_is_out_of_reach() {
    FETCH_LEVEL_REPORT(true);
    const QJsonObject sys = r["sys"].toObject();
    QVERIFY2(sys.contains("error"), "/sys is listed");
    if (namespaced(level)) QCOMPARE(sys["error"].toString(), QString("FileNotFoundError"));
  }
};

namespace {

// The planted keys: in the session keyring and in the user keyring.
constexpr int kKeyrings[2] = {KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING};
std::string key_description(int i, const std::string& token) {
  return std::string(i == 0 ? "specula-test-session-" : "specula-test-user-") + token;
}

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(2);
}

// Plants the token (see the top of this file) and executes this program again with it, in
// a session of its own that has a pseudo-terminal as its controlling terminal. setsid()
// fails in a process group leader (as a shell makes its jobs): then a child carries on.
[[noreturn]] void plant_and_execute(char** argv) {
  if (setsid() < 0) {
    const pid_t child = fork();
    if (child < 0) die("fork");
    if (child > 0) {
      int status = 0;
      while (waitpid(child, &status, 0) < 0) {}
      std::exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (setsid() < 0) die("setsid");
  }
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) die("posix_openpt");
  if (open(ptsname(master), O_RDWR) < 0) die("open the terminal");  // a session leader's first: its controlling terminal

  std::random_device random;
  std::string token = "spx";
  for (int i = 0; i < 24; ++i) token += "0123456789abcdef"[random() % 16];
  const std::string directory = "/tmp/specula-exposure-" + token;
  if (mkdir(directory.c_str(), 0755) != 0 || chdir(directory.c_str()) != 0) die("the working directory");
  const int file = open("planted", O_RDWR | O_CREAT | O_TRUNC, 0600);  // not close-on-exec
  if (file < 0 || write(file, token.data(), token.size()) != static_cast<ssize_t>(token.size())) die("the file");
  // A session keyring of this process's own (not its caller's), with the user keyring linked
  // in, as a login's is: this process possesses both keys, so it can remove them afterwards.
  if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, nullptr) < 0 ||
      syscall(SYS_keyctl, KEYCTL_LINK, KEY_SPEC_USER_KEYRING, KEY_SPEC_SESSION_KEYRING) < 0)
    die("the session keyring");
  for (int i = 0; i < 2; ++i) {
    const std::string description = key_description(i, token);
    const long key = syscall(SYS_add_key, "user", description.c_str(), token.data(), token.size(), kKeyrings[i]);
    if (key < 0) die("add_key");
    // Gone in any case, also if this process is killed: the user keyring outlives it.
    if (syscall(SYS_keyctl, KEYCTL_SET_TIMEOUT, key, 600) != 0) die("keyctl(KEYCTL_SET_TIMEOUT)");
  }
  setenv(kTokenVariable, token.c_str(), 1);
  std::vector<char*> args = {argv[0], token.data()};
  for (char** a = argv + 1; *a; ++a) args.push_back(*a);
  args.push_back(nullptr);
  execv("/proc/self/exe", args.data());
  die("execv");
}

// The planted token and where it is, found again after the execution.
void find_planted(int& argc, char** argv) {
  planted.token = std::getenv(kTokenVariable);
  planted.directory = QDir::currentPath().toStdString();
  for (int fd = 3; fd < 1024; ++fd) {
    char link[64], target[4096];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    const ssize_t n = readlink(link, target, sizeof target - 1);
    if (n > 0 && std::string(target, n) == planted.directory + "/planted") planted.descriptor = fd;
  }
  for (int i = 0; i < 2; ++i)  // the session keyring's tree holds both
    planted.keys[i] = syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, "user",
                              key_description(i, planted.token).c_str(), 0);
  // The token stays in the command line the kernel shows; QtTest does not see it.
  for (int i = 1; i < argc; ++i) argv[i] = argv[i + 1];
  --argc;
}

void remove_planted() {
  for (long key : planted.keys)
    if (key > 0) syscall(SYS_keyctl, KEYCTL_INVALIDATE, key);
  if (chdir("/") == 0) {
    unlink((planted.directory + "/planted").c_str());
    rmdir(planted.directory.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (!std::getenv(kTokenVariable)) plant_and_execute(argv);
  find_planted(argc, argv);
  int status;
  {
    QCoreApplication app(argc, argv);
    TestSandboxExposure test;
    status = QTest::qExec(&test, argc, argv);
  }
  remove_planted();
  return status;
}

#include "test_sandbox_exposure.moc"
