// The sandbox: see sandbox.h and docs/sandbox.md.
//
// One run = fork a child that sets rlimits, a death signal and its own process group, then
// execs bubblewrap (full isolation) or, through a small intermediate process, the
// interpreter itself (reduced isolation). The parent reads stdout, stderr and the harness
// channel (fd 3) through pipes, caps them, and kills the whole tree at the wall-clock limit.
// Everything between fork and exec is a raw system call: the caller may be multithreaded.
#include "eval/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/keyctl.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <mutex>
#include <sstream>

namespace specula {

namespace fs = std::filesystem;

const char* isolation_name(Isolation isolation) {
  return isolation == Isolation::Full ? "full" : "reduced";
}

namespace {

// The child's descriptors: 0 /dev/null, 1 stdout, 2 stderr, 3 the harness's report
// channel, then the files handed to bubblewrap (--file, its --seccomp filter and its options
// for --args) or, at the reduced level, the Landlock ruleset.
constexpr int kFirstFileFd = 4;
constexpr int kMaxFiles = 16;      // sandbox files of one run
constexpr int kMaxHanded = kMaxFiles + 2;  // from kFirstFileFd on: files, bwrap's filter and options
constexpr uid_t kUidBase = 1800000000u;  // unprivileged uids for runs started as root
static_assert(kUidBase + (4194304ull << 6) < 4294967295ull, "room for every pid (pid_max <= 2^22)");

// What a run sees of the host's system directories, at both levels: the top-level ones
// beside /usr (symlinks into it, or directories), and the files the dynamic loader and
// the time zone need from /etc. Nothing else of /etc (passwd, hostname, ...).
constexpr const char* kSystemTops[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
constexpr const char* kSystemEtc[] = {"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"};
constexpr const char* kHostname = "sandbox";  // the full level's host name

// The whole environment of every process between the caller and the interpreter, and of
// the interpreter: nothing of the caller's (API keys, tokens, paths naming its files).
// The interpreter runs with -I, so no PYTHON* variable would matter anyway.
std::vector<std::string> run_environment(const std::string& home) {
  return {"PATH=/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + home, "LC_ALL=C.UTF-8"};
}

// Everything the child needs, prepared before fork so that the child only makes system calls.
struct ChildPlan {
  std::vector<std::string> argv;
  std::vector<std::string> env;                 // empty: inherit the parent's (trusted probes only)
  std::string cwd;                              // "" keeps the parent's
  std::vector<int> files;                       // fds that become kFirstFileFd + i
  bool limit_resources = true;
  SandboxLimits limits;
  uid_t uid = 0;                                // 0: keep; else switch to this uid and gid
  bool nproc_before_exec = false;               // set RLIMIT_NPROC here (only with a fresh uid)
  std::vector<std::pair<std::string, std::string>> staged;  // (source, mount point), as root
  bool filter_system_calls = false;             // seccomp: reduced_filter()
  bool landlock = false;                        // kFirstFileFd is a Landlock ruleset to enforce
  bool intermediate = false;                    // keep a parent between us and the interpreter
};

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (auto& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

[[noreturn]] void child_fail(int err_fd, const char* what) {
  // Raw writes only: we are between fork and exec.
  ssize_t ignored = write(err_fd, "sandbox: ", 9);
  ignored = write(err_fd, what, std::strlen(what));
  const char* reason = strerror(errno);
  ignored = write(err_fd, ": ", 2);
  ignored = write(err_fd, reason, std::strlen(reason));
  ignored = write(err_fd, "\n", 1);
  (void)ignored;
  _exit(127);
}

void set_limit(int resource, rlim_t value) {
  rlimit limit{value, value};
  setrlimit(resource, &limit);
}

// A seccomp program that kills a process making system calls of another ABI (i386's
// socketcall, x32's numbering: the ways around a per-call filter), fails each of `denied`
// with its error and allows the rest. Empty on architectures without one.
std::vector<sock_filter> seccomp_program(std::initializer_list<std::pair<long, int>> denied) {
  std::vector<sock_filter> f;
#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
  constexpr unsigned arch = AUDIT_ARCH_X86_64;
  constexpr unsigned foreign_abi = 0x40000000u;  // x32 system call numbers start here
#else
  constexpr unsigned arch = AUDIT_ARCH_AARCH64;
  constexpr unsigned foreign_abi = 0xffffffffu;
#endif
  constexpr unsigned kill = SECCOMP_RET_KILL_PROCESS;
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, kill));
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, foreign_abi, 0, 1));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, kill));
  for (const auto& [number, error] : denied) {
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(number), 0, 1));
    f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | static_cast<unsigned>(error)));
  }
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
#else
  (void)denied;
#endif
  return f;
}

// The full level's filter, given to bubblewrap: the kernel's keyrings. The user namespace
// does not change the run's kernel uid, so without it a run of a normal user could list the
// user's keys and read those the user may (Kerberos tickets, stored tokens). Built once,
// before any fork.
const std::vector<sock_filter>& full_filter() {
  static const std::vector<sock_filter> filter =
      seccomp_program({{__NR_add_key, ENOSYS}, {__NR_request_key, ENOSYS}, {__NR_keyctl, ENOSYS}});
  return filter;
}

// The reduced level's filter. It also denies what reaches outside the run without a path:
// sockets of every family (network, and the host's Unix sockets: a session bus, an SSH
// agent, a Docker daemon), io_uring (which can create sockets without socket()) and System V
// IPC (other processes' shared memory). socketpair() and pipes stay. Built once, before any fork.
const std::vector<sock_filter>& reduced_filter() {
  static const std::vector<sock_filter> filter = seccomp_program({
      {__NR_add_key, ENOSYS},   {__NR_request_key, ENOSYS}, {__NR_keyctl, ENOSYS},
      {__NR_socket, EACCES},    {__NR_io_uring_setup, ENOSYS},
      {__NR_shmget, ENOSYS},    {__NR_shmat, ENOSYS},       {__NR_shmctl, ENOSYS},
      {__NR_msgget, ENOSYS},    {__NR_msgsnd, ENOSYS},      {__NR_msgrcv, ENOSYS},
      {__NR_msgctl, ENOSYS},    {__NR_semget, ENOSYS},      {__NR_semop, ENOSYS},
      {__NR_semtimedop, ENOSYS}, {__NR_semctl, ENOSYS},
  });
  return filter;
}

// Installs reduced_filter() (after fork: system calls only). False where there is no
// filter for this architecture: the run does not start.
bool install_reduced_filter() {
  const std::vector<sock_filter>& filter = reduced_filter();
  if (filter.empty()) return false;
  sock_fprog program{static_cast<unsigned short>(filter.size()), const_cast<sock_filter*>(filter.data())};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

// Landlock (the reduced level's file system confinement, where the kernel has it). Rights
// by ABI version: 1 has bits 0-12, 2 adds REFER (13), 3 TRUNCATE (14), 5 IOCTL_DEV (15).
// Older kernel headers lack the later ones, so they are spelt out here.
constexpr std::uint64_t kLandlockExecute = 1ull << 0, kLandlockWriteFile = 1ull << 1,
                        kLandlockReadFile = 1ull << 2, kLandlockReadDir = 1ull << 3,
                        kLandlockTruncate = 1ull << 14, kLandlockIoctlDev = 1ull << 15;

// The Landlock ABI version the kernel offers, 0 when none.
int landlock_abi() {
  const long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

// A ruleset for a reduced run: read and execute beneath `read_only` (files or directories
// that may be missing), everything beneath `writable`, reading and writing the harmless
// devices; nothing else, so no /proc (other processes' command lines, environments), /sys,
// /home, /tmp or the rest of /etc. Landlock also keeps the run from ptrace-reading any
// process outside it. Returns the ruleset's descriptor (close-on-exec).
int landlock_ruleset(int abi, const std::vector<std::string>& read_only, const std::string& writable) {
  const std::uint64_t handled = abi >= 5 ? (1ull << 16) - 1 : abi >= 3 ? (1ull << 15) - 1
                              : abi >= 2 ? (1ull << 14) - 1 : (1ull << 13) - 1;
  const std::uint64_t file_rights =
      handled & (kLandlockExecute | kLandlockWriteFile | kLandlockReadFile | kLandlockTruncate | kLandlockIoctlDev);
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = handled;
  const int ruleset = static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0));
  if (ruleset < 0) throw SandboxError(std::string("cannot create a Landlock ruleset: ") + std::strerror(errno));
  auto allow = [&](const std::string& path, std::uint64_t rights) {
    const int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) return;  // not on this system: nothing to allow
    struct stat info;
    const bool dir = fstat(fd, &info) == 0 && S_ISDIR(info.st_mode);
    landlock_path_beneath_attr rule{};
    rule.allowed_access = rights & (dir ? handled : file_rights);
    rule.parent_fd = fd;
    const long added = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
    const int error = errno;
    close(fd);
    if (added != 0) {
      close(ruleset);
      throw SandboxError("cannot allow " + path + " in the Landlock ruleset: " + std::strerror(error));
    }
  };
  for (const std::string& path : read_only) allow(path, kLandlockExecute | kLandlockReadFile | kLandlockReadDir);
  for (const char* device : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"})
    allow(device, file_rights);
  allow(writable, handled);
  return ruleset;
}

// Enforces the Landlock ruleset open as `ruleset` on this process and its future children,
// and closes it (after fork: system calls only).
bool enforce_landlock(int ruleset) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  const bool enforced = syscall(SYS_landlock_restrict_self, ruleset, 0) == 0;
  close(ruleset);
  return enforced;
}

// Empties the directory open as `dir` and closes it, with raw system calls only (we are
// after fork). Unlinking while reading moves entries, so it reads again until a pass
// removes nothing. Deeper than 32 levels it gives up.
void empty_directory(int dir, int depth) {
  alignas(dirent64) char buffer[4096];
  for (bool removed = true; removed;) {
    removed = false;
    lseek(dir, 0, SEEK_SET);
    for (long n; (n = syscall(SYS_getdents64, dir, buffer, sizeof buffer)) > 0;) {
      for (long at = 0; at < n;) {
        const auto* entry = reinterpret_cast<const dirent64*>(buffer + at);
        at += entry->d_reclen;
        const char* name = entry->d_name;
        if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
        if (unlinkat(dir, name, 0) == 0) {
          removed = true;
          continue;
        }
        if (errno != EISDIR || depth >= 32) continue;
        const int sub = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0) empty_directory(sub, depth + 1);
        if (unlinkat(dir, name, AT_REMOVEDIR) == 0) removed = true;
      }
    }
  }
  close(dir);
}

// Confines this process as the plan says, then becomes the interpreter (after fork:
// system calls only). Never returns.
[[noreturn]] void exec_run(const ChildPlan& plan, char* const* argv, char* const* envp) {
  if (plan.landlock && !enforce_landlock(kFirstFileFd)) child_fail(2, "landlock");
  if (plan.filter_system_calls && !install_reduced_filter()) child_fail(2, "seccomp");
  execve(argv[0], argv, envp);
  child_fail(2, "exec");
}

// Removes the run's work directory when the caller, who would have, is gone.
void remove_work_directory(const std::string& path) {
  const int dir = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir >= 0) empty_directory(dir, 0);
  rmdir(path.c_str());
}

// The reduced level's intermediate process, between the caller and the interpreter: killing
// it cannot reach the application. It is a child subreaper, so every process the run leaves
// (orphans of os.fork()) stays below it, and its death signal from the caller is catchable:
// when the caller dies (the death signal is not inherited through fork, so the run's own
// children would not get it) or the interpreter exits, it kills what the run left. With the
// run's own uid that is every process of the uid (kill(-1), which spares the intermediate itself),
// also ones that left the process group; otherwise the process group. When the caller is
// gone it also removes the work directory. Being a fork of the caller, it holds a copy of
// the caller's memory (its environment and command line among it), so it makes itself
// non-dumpable: a process without CAP_SYS_PTRACE cannot read its /proc/PID/environ, mem,
// fd or cwd. Never returns.
[[noreturn]] void run_intermediate(const ChildPlan& plan, char* const* argv, char* const* envp,
                                   pid_t parent, int n_fds) {
  constexpr int kDeathSignal = SIGTERM;
  sigset_t awaited, previous;
  sigemptyset(&awaited);
  sigaddset(&awaited, SIGCHLD);
  sigaddset(&awaited, kDeathSignal);
  sigprocmask(SIG_BLOCK, &awaited, &previous);  // taken with sigwaitinfo below, never handled
  prctl(PR_SET_DUMPABLE, 0);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  prctl(PR_SET_PDEATHSIG, kDeathSignal);
  if (getppid() != parent) _exit(127);  // the caller died before the death signal was armed

  const pid_t me = getpid();
  const pid_t interpreter = fork();
  if (interpreter < 0) child_fail(2, "fork");
  if (interpreter == 0) {
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != me) _exit(127);
    exec_run(plan, argv, envp);
  }
  for (int fd = 0; fd < n_fds; ++fd) close(fd);

  // Wait for the interpreter's exit or the death signal, reaping orphans on the way.
  int status = 0;
  bool exited = false;
  while (!exited) {
    siginfo_t info;
    if (sigwaitinfo(&awaited, &info) == kDeathSignal) break;
    int child_status = 0;
    for (pid_t done; (done = waitpid(-1, &child_status, WNOHANG)) > 0;)
      if (done == interpreter) {
        status = child_status;
        exited = true;
      }
  }
  if (plan.uid != 0) {
    // Kill again before each wait: a process forking while the first kill went round is caught.
    while (true) {
      kill(-1, SIGKILL);
      if (waitpid(-1, nullptr, 0) < 0 && errno != EINTR) break;  // ECHILD: none left
    }
  } else if (!exited) {
    // Killing the group kills this process too, so a helper in a group of its own does it,
    // then removes the work directory.
    const pid_t group = getpgrp();
    const pid_t helper = fork();
    if (helper == 0) {
      setpgid(0, 0);
      kill(-group, SIGKILL);
      remove_work_directory(plan.cwd);
      _exit(0);
    }
    if (helper < 0) kill(0, SIGKILL);  // the directory stays, the processes do not
    while (true) pause();               // until the helper's kill
  }
  if (!exited) {  // the caller is gone, or the run signalled us: the cleanup is ours
    remove_work_directory(plan.cwd);
    _exit(128 + SIGKILL);
  }
  // Without a uid of its own, the caller kills the group after our exit.
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

// Runs in the forked child; never returns.
[[noreturn]] void exec_child(const ChildPlan& plan, char* const* argv, char* const* envp,
                             pid_t parent, int in_fd, int out_fd, int err_fd, int chan_fd) {
  setsid();  // its own process group, and no controlling terminal (the caller's could be read)
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);  // the parent died before the death signal was armed

  // Move every fd we pass on out of the way, then into place; close the rest.
  const int n_files = static_cast<int>(plan.files.size());
  int high[4 + kMaxHanded];
  const int sources[4] = {in_fd, out_fd, err_fd, chan_fd};
  for (int i = 0; i < 4; ++i) high[i] = fcntl(sources[i], F_DUPFD_CLOEXEC, 100);
  for (int i = 0; i < n_files && i < kMaxHanded; ++i) high[4 + i] = fcntl(plan.files[i], F_DUPFD_CLOEXEC, 100);
  for (int i = 0; i < 4 + n_files && i < 4 + kMaxHanded; ++i) {
    if (high[i] < 0 || dup2(high[i], i) < 0) child_fail(high[2], "cannot set up descriptors");
  }
  if (syscall(SYS_close_range, 4 + n_files, ~0u, 0) != 0)
    for (int fd = 4 + n_files; fd < 4096; ++fd) close(fd);

  if (plan.limit_resources) {
    const SandboxLimits& l = plan.limits;
    const int cpu = l.cpu_seconds > 0 ? l.cpu_seconds : static_cast<int>(std::ceil(l.wall_seconds)) + 1;
    set_limit(RLIMIT_CPU, static_cast<rlim_t>(cpu));
    set_limit(RLIMIT_AS, static_cast<rlim_t>(l.memory_bytes));
    set_limit(RLIMIT_FSIZE, static_cast<rlim_t>(l.max_file_bytes));
    set_limit(RLIMIT_NOFILE, static_cast<rlim_t>(l.max_open_files));
    set_limit(RLIMIT_CORE, 0);
  }
  if (!plan.staged.empty()) {
    // As root, directories the unprivileged uid could not reach are bind-mounted to a
    // reachable place in a private mount namespace of this child only.
    if (unshare(CLONE_NEWNS) != 0) child_fail(2, "unshare(mount)");
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) child_fail(2, "mount private");
    if (mount("tmpfs", "/tmp", "tmpfs", 0, "mode=0755,size=64k") != 0) child_fail(2, "mount tmpfs");
    for (const auto& [source, point] : plan.staged) {
      if (mkdir(point.c_str(), 0755) != 0) child_fail(2, "mkdir");
      if (mount(source.c_str(), point.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
        child_fail(2, "bind mount");
    }
  }
  if (plan.uid != 0) {
    const gid_t gid = static_cast<gid_t>(plan.uid);
    if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(plan.uid, plan.uid, plan.uid) != 0)
      child_fail(2, "cannot switch to an unprivileged uid");
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // changing credentials clears it
    if (plan.nproc_before_exec) set_limit(RLIMIT_NPROC, static_cast<rlim_t>(plan.limits.max_processes));
  }
  // A session keyring of its own: the caller's, inherited otherwise, may hold its secrets.
  if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, nullptr) < 0 && errno != ENOSYS)
    child_fail(2, "cannot join a new session keyring");
  if (!plan.cwd.empty() && chdir(plan.cwd.c_str()) != 0) child_fail(2, "chdir");

  if (plan.intermediate) run_intermediate(plan, argv, envp, parent, 4 + n_files);
  exec_run(plan, argv, envp);
}

// Kills every process of `uid` (a uid used by no one else): a process running as that uid
// signals all processes it may, i.e. the run's, wherever they moved to.
void kill_uid(uid_t uid) {
  const pid_t killer = fork();
  if (killer == 0) {
    if (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) _exit(1);
    for (int round = 0; round < 1000 && kill(-1, SIGKILL) == 0; ++round) {}
    _exit(0);
  }
  if (killer > 0) {
    int status = 0;
    while (waitpid(killer, &status, 0) < 0 && errno == EINTR) {}
  }
}

struct Pipe {
  int read = -1, write = -1;
  Pipe() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw SandboxError("cannot create a pipe");
    read = fds[0];
    write = fds[1];
  }
  ~Pipe() {
    if (read >= 0) close(read);
    if (write >= 0) close(write);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
};

struct Spawned {
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  bool output_limited = false;
  std::string out, err, channel;
  double seconds = 0.0;
};

// Forks, execs `plan`, collects the three streams and enforces the wall-clock limit.
Spawned spawn(ChildPlan plan) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  Pipe out, err, chan;
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) throw SandboxError("cannot open /dev/null");

  std::vector<char*> argv = c_strings(plan.argv);
  std::vector<char*> envp = c_strings(plan.env);
  char* const* env = plan.env.empty() ? environ : envp.data();
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    close(devnull);
    throw SandboxError(std::string("fork failed: ") + std::strerror(errno));
  }
  if (child == 0) exec_child(plan, argv.data(), env, parent, devnull, out.write, err.write, chan.write);
  close(devnull);
  close(out.write); out.write = -1;
  close(err.write); err.write = -1;
  close(chan.write); chan.write = -1;

  Spawned result;
  const auto deadline = start + std::chrono::duration<double>(plan.limits.wall_seconds);
  const std::size_t cap = plan.limits.max_output_bytes;
  std::string* sinks[3] = {&result.out, &result.err, &result.channel};
  int fds[3] = {out.read, err.read, chan.read};
  bool exited = false;
  int status = 0;
  auto kill_tree = [&] {
    if (!exited) kill(child, SIGKILL);  // unreaped, so still ours; also before its setsid()
    kill(-child, SIGKILL);
    if (plan.uid != 0) kill_uid(plan.uid);
  };
  std::chrono::steady_clock::time_point drain_until{};
  char buffer[65536];
  while (true) {
    pollfd polls[3];
    int n_open = 0;
    for (int i = 0; i < 3; ++i) {
      polls[i] = {fds[i], POLLIN, 0};
      if (fds[i] >= 0) ++n_open;
    }
    if (exited && (n_open == 0 || clock::now() >= drain_until)) break;
    const auto now = clock::now();
    if (!exited && now >= deadline) {
      result.timed_out = true;
      kill_tree();
    }
    poll(polls, 3, 20);
    for (int i = 0; i < 3; ++i) {
      if (fds[i] < 0 || !(polls[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fds[i], buffer, sizeof buffer);
      if (n <= 0) {
        close(fds[i]);
        fds[i] = -1;
        if (i == 0) out.read = -1; else if (i == 1) err.read = -1; else chan.read = -1;
        continue;
      }
      std::string& sink = *sinks[i];
      const std::size_t room = cap > sink.size() ? cap - sink.size() : 0;
      sink.append(buffer, std::min<std::size_t>(room, static_cast<std::size_t>(n)));
      if (static_cast<std::size_t>(n) > room && !result.output_limited) {
        result.output_limited = true;
        kill_tree();
      }
    }
    if (!exited) {
      const pid_t done = waitpid(child, &status, WNOHANG);
      if (done == child) {
        exited = true;
        // Whatever the run left behind goes with it; then read what is still buffered.
        kill_tree();
        drain_until = clock::now() + std::chrono::milliseconds(200);
      }
    }
  }
  result.seconds = std::chrono::duration<double>(clock::now() - start).count();
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
    // bubblewrap and the intermediate report a signal death as 128 + signal.
    if (result.exit_code > 128 && result.exit_code < 128 + 65) {
      result.signal = result.exit_code - 128;
      result.exit_code = -1;
    }
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  if (result.timed_out || result.output_limited) result.signal = 0;
  return result;
}

std::string find_on_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0 && fs::is_regular_file(candidate)) return candidate;
  }
  return "";
}

bool under_usr(const std::string& path) { return path == "/usr" || path.rfind("/usr/", 0) == 0; }

int memfd_with(const std::string& content) {
  const int fd = static_cast<int>(syscall(SYS_memfd_create, "specula-file", MFD_CLOEXEC));
  if (fd < 0) throw SandboxError("memfd_create failed");
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n <= 0) {
      close(fd);
      throw SandboxError("cannot write a sandbox file");
    }
    done += static_cast<std::size_t>(n);
  }
  lseek(fd, 0, SEEK_SET);
  return fd;
}

// Whether a user other than the owner can reach `path` (every directory above searchable).
bool reachable_by_others(const fs::path& path) {
  fs::path walk;
  for (const fs::path& part : path) {
    walk /= part;
    struct stat info;
    if (stat(walk.c_str(), &info) != 0) return false;
    if (S_ISDIR(info.st_mode) && !(info.st_mode & S_IXOTH)) return false;
  }
  return true;
}

// Places for concurrent runs of this process; as root, place i runs as uid
// kUidBase + 64 * pid + i, which no other live process of ours shares. Places are taken in
// turn, not lowest first: a killed run's processes may wait a moment to be reaped (by init,
// when their parents died too) and would still count towards the next run's process limit
// under the same uid.
class RunSlots {
 public:
  int acquire() {
    std::unique_lock lock(mutex_);
    freed_.wait(lock, [this] { return ~busy_ != 0; });
    const std::uint64_t free_after = ~busy_ & ~((std::uint64_t{2} << last_) - 1);  // free places after last_ (none when 63)
    const int slot = free_after != 0 ? std::countr_zero(free_after) : std::countr_one(busy_);
    busy_ |= std::uint64_t{1} << slot;
    last_ = slot;
    return slot;
  }
  void release(int slot) {
    {
      std::lock_guard lock(mutex_);
      busy_ &= ~(std::uint64_t{1} << slot);
    }
    freed_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable freed_;
  std::uint64_t busy_ = 0;  // bit i: place i is taken
  int last_ = 63;           // the place taken last; the next search starts after it
};

// Never destroyed: a run may still be ending on another thread (a test pool's) while the
// process exits, and must not find its lock gone.
RunSlots& run_slots() {
  static RunSlots& slots = *new RunSlots;
  return slots;
}

uid_t slot_uid(int slot) { return kUidBase + static_cast<uid_t>(getpid()) * 64u + static_cast<uid_t>(slot); }

}  // namespace

Sandbox::Sandbox(const SandboxOptions& options) {
  const std::string wanted = options.python.empty() ? "python3" : options.python;
  const std::string found = find_on_path(wanted);
  if (found.empty()) throw SandboxError("Python interpreter '" + wanted + "' not found" +
                                        (wanted.find('/') == std::string::npos ? " on PATH" : ""));
  // Ask the interpreter (a trusted one-liner, outside any sandbox) where it really lives:
  // PATH entries are often wrappers (pyenv shims, symlinks) that would not run inside.
  ChildPlan probe;
  probe.argv = {found, "-c",
                "import os, sys\n"
                "print(os.path.realpath(sys.executable))\n"
                "print(os.path.realpath(sys.prefix))\n"
                "print(os.path.realpath(sys.base_prefix))\n"};
  probe.limit_resources = false;
  probe.limits.wall_seconds = 30.0;
  const Spawned where = spawn(probe);
  std::vector<std::string> lines;
  std::stringstream text(where.out);
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  if (where.exit_code != 0 || lines.size() != 3 || lines[0].empty())
    throw SandboxError("Python interpreter '" + found + "' does not run: " +
                       (where.timed_out ? std::string("no answer within 30 s") : where.err));
  python_ = lines[0];
  for (const std::string& dir : {fs::path(python_).parent_path().string(), lines[1], lines[2]}) {
    if (dir.empty() || dir == "/" || under_usr(dir)) continue;
    const bool covered = std::any_of(python_dirs_.begin(), python_dirs_.end(), [&](const std::string& d) {
      return dir == d || dir.rfind(d + "/", 0) == 0;
    });
    if (!covered) python_dirs_.push_back(dir);
  }

  bwrap_ = find_on_path("bwrap");
  landlock_abi_ = landlock_abi();
  if (!options.use_namespaces) {
    isolation_note_ = "namespaces were turned off";
  } else if (bwrap_.empty()) {
    isolation_note_ = "bubblewrap (bwrap) is not installed";
  } else {
    auto works = [this](std::string& why) {
      SandboxLimits limits;
      limits.wall_seconds = 20.0;
      const SandboxRun check = run_with(Isolation::Full, {{"probe.py", "import sys\nsys.stdout.write('ok')\n"}},
                                        "probe.py", {}, limits);
      why = check.err.empty() ? std::string("no output") : check.err.substr(0, 300);
      return check.exit_code == 0 && check.out == "ok";
    };
    std::string why;
    if (works(why)) {
      isolation_ = Isolation::Full;
    } else if (geteuid() == 0) {
      // Where unprivileged user namespaces are off, bubblewrap still works for root itself.
      keep_root_ = true;
      std::string why_as_root;
      if (works(why_as_root)) {
        isolation_ = Isolation::Full;
        isolation_note_ = "runs keep root's uid inside the namespaces (an unprivileged uid cannot "
                          "create them here), so the process limit does not apply";
      } else {
        keep_root_ = false;
      }
    }
    if (isolation_ != Isolation::Full) isolation_note_ = "bubblewrap does not work here: " + why;
  }
  if (isolation_ == Isolation::Reduced && geteuid() == 0 && !reachable_by_others(python_))
    isolation_note_ += std::string("; the interpreter is not reachable by an unprivileged uid, so runs keep "
                                   "root's uid (no process limit") + (confines_files() ? ")" : ", no file permissions)");
  if (!confines_files())
    isolation_note_ += "; without Landlock runs can read the host's world-readable files, every process's "
                       "command line and the environment of the processes of their uid";
}

bool Sandbox::confines_files() const { return isolation_ == Isolation::Full || landlock_abi_ > 0; }

bool Sandbox::limits_processes() const {
  if (geteuid() != 0) return isolation_ == Isolation::Full && !find_on_path("/usr/bin/prlimit").empty();
  return !keep_root_ && (isolation_ == Isolation::Full || reachable_by_others(python_));
}

SandboxRun Sandbox::run(const std::vector<SandboxFile>& files, const std::string& main_file,
                        const std::vector<std::string>& args, const SandboxLimits& limits) const {
  return run_with(isolation_, files, main_file, args, limits);
}

SandboxRun Sandbox::run_with(Isolation isolation, const std::vector<SandboxFile>& files,
                             const std::string& main_file, const std::vector<std::string>& args,
                             const SandboxLimits& limits) const {
  if (files.size() > static_cast<std::size_t>(kMaxFiles)) throw SandboxError("too many sandbox files");
  for (const SandboxFile& f : files)
    if (f.name.empty() || f.name.find('/') != std::string::npos || f.name[0] == '.')
      throw SandboxError("bad sandbox file name '" + f.name + "'");
  const bool root = geteuid() == 0;
  struct Slot {
    int index = run_slots().acquire();
    ~Slot() { run_slots().release(index); }
  } slot;
  const std::string prlimit = find_on_path("/usr/bin/prlimit");

  ChildPlan plan;
  plan.limits = limits;
  // Full isolation makes unreachable interpreter directories reachable (staged binds); the
  // reduced level cannot, and then keeps root's uid rather than failing to start.
  if (root && !keep_root_ && (isolation == Isolation::Full || reachable_by_others(python_))) {
    plan.uid = slot_uid(slot.index);
    plan.nproc_before_exec = true;
  }
  std::vector<int> handed_fds;  // become the child's kFirstFileFd + i; closed here afterwards
  std::string workdir;  // reduced: a host directory we remove afterwards
  struct Cleanup {
    std::vector<int>& fds;
    std::string& dir;
    ~Cleanup() {
      for (int fd : fds) close(fd);
      std::error_code ignored;
      if (!dir.empty()) fs::remove_all(dir, ignored);
    }
  } cleanup{handed_fds, workdir};

  if (isolation == Isolation::Full) {
    // bubblewrap's options go through a file (--args), so that its command line, which
    // every process inside can read as /proc/1/cmdline, names no host path beyond the
    // interpreter's; its environment is already the run's, and so is its working directory.
    std::vector<std::string> o = {"--unshare-all", "--die-with-parent", "--new-session",
                                  "--hostname", kHostname, "--ro-bind", "/usr", "/usr"};
    for (const char* top : kSystemTops) {
      std::error_code ec;
      const auto status = fs::symlink_status(top, ec);
      if (ec) continue;
      if (fs::is_symlink(status)) {
        o.insert(o.end(), {"--symlink", fs::read_symlink(top, ec).string(), top});
      } else if (fs::is_directory(status)) {
        o.insert(o.end(), {"--ro-bind", top, top});
      }
    }
    for (const char* etc : kSystemEtc) o.insert(o.end(), {"--ro-bind-try", etc, etc});
    for (std::size_t i = 0; i < python_dirs_.size(); ++i) {
      std::string source = python_dirs_[i];
      if (plan.uid != 0) {  // root switching uid: stage what that uid cannot reach
        const std::string point = "/tmp/specula-ro-" + std::to_string(i);
        plan.staged.emplace_back(source, point);
        source = point;
      }
      o.insert(o.end(), {"--ro-bind", source, python_dirs_[i]});
    }
    o.insert(o.end(), {"--proc", "/proc"});
    // The kernel's lists of keys stay out of sight, like the keyrings themselves (full_filter()).
    for (const char* keys : {"/proc/keys", "/proc/key-users"})
      if (fs::exists(keys)) o.insert(o.end(), {"--ro-bind", "/dev/null", keys});
    o.insert(o.end(), {"--dev", "/dev", "--size", std::to_string(limits.max_file_bytes * 4), "--tmpfs", "/work"});
    auto hand = [&](const std::string& content) {  // -> the descriptor's number in the child
      handed_fds.push_back(memfd_with(content));
      return std::to_string(kFirstFileFd + static_cast<int>(handed_fds.size()) - 1);
    };
    for (const SandboxFile& f : files) o.insert(o.end(), {"--file", hand(f.content), "/work/" + f.name});
    const std::vector<sock_filter>& filter = full_filter();
    if (!filter.empty())
      o.insert(o.end(), {"--seccomp", hand(std::string(reinterpret_cast<const char*>(filter.data()),
                                                       filter.size() * sizeof(sock_filter)))});
    o.insert(o.end(), {"--remount-ro", "/", "--chdir", "/work"});
    std::string options;
    for (const std::string& option : o) options += option + '\0';
    plan.argv = {bwrap_, "--args", hand(options), "--"};
    if (!prlimit.empty())
      plan.argv.insert(plan.argv.end(), {prlimit, "--nproc=" + std::to_string(limits.max_processes), "--"});
    plan.argv.insert(plan.argv.end(), {python_, "-I", "-B", main_file});
    plan.files = handed_fds;
    plan.env = run_environment("/work");
    plan.cwd = "/";
  } else {
    // Named after this process, so that a process can tell its own runs from others'.
    std::string dir_template = "/tmp/specula-run-" + std::to_string(getpid()) + "-XXXXXX";
    if (!mkdtemp(dir_template.data())) throw SandboxError("cannot create a work directory");
    workdir = dir_template;
    for (const SandboxFile& f : files) {
      const std::string path = workdir + "/" + f.name;
      // A file written short (a full disk) would read as a failing candidate: refuse instead.
      FILE* out = std::fopen(path.c_str(), "wb");
      if (!out) throw SandboxError("cannot write " + path + ": " + std::strerror(errno));
      const bool whole = std::fwrite(f.content.data(), 1, f.content.size(), out) == f.content.size();
      if (std::fclose(out) != 0 || !whole) throw SandboxError("cannot write " + path + ": " + std::strerror(errno));
    }
    if (plan.uid != 0 && chown(workdir.c_str(), plan.uid, static_cast<gid_t>(plan.uid)) != 0)
      throw SandboxError("cannot hand the work directory to the run's uid");
    if (landlock_abi_ > 0) {
      std::vector<std::string> read_only = {"/usr"};
      read_only.insert(read_only.end(), std::begin(kSystemTops), std::end(kSystemTops));
      read_only.insert(read_only.end(), std::begin(kSystemEtc), std::end(kSystemEtc));
      read_only.insert(read_only.end(), python_dirs_.begin(), python_dirs_.end());
      handed_fds.push_back(landlock_ruleset(landlock_abi_, read_only, workdir));
      plan.files = handed_fds;
      plan.landlock = true;
    }
    plan.cwd = workdir;
    plan.env = run_environment(workdir);
    plan.filter_system_calls = true;
    plan.intermediate = true;
    plan.argv = {python_, "-I", "-B", main_file};
  }
  for (const std::string& arg : args) plan.argv.push_back(arg);

  const Spawned s = spawn(std::move(plan));
  SandboxRun run;
  run.exit_code = s.exit_code;
  run.signal = s.signal;
  run.timed_out = s.timed_out;
  run.output_limited = s.output_limited;
  run.out = s.out;
  run.err = s.err;
  run.channel = s.channel;
  run.seconds = s.seconds;
  run.isolation = isolation;
  return run;
}

}  // namespace specula
