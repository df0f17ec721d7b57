// Process plumbing of a sandbox run: see child_process.h.
//
// One run = fork a child that sets rlimits, a death signal and its own process group, then
// execs bubblewrap (full isolation) or, through a small intermediate process, the
// interpreter itself (reduced isolation). The parent reads stdout, stderr and the harness
// channel (fd 3) through pipes, caps them, and kills the whole tree at the wall-clock limit.
#include "eval/child_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/keyctl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "eval/sandbox_confinement.h"

namespace specula::sandbox_internal {

namespace {

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

}  // namespace

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

Pipe::Pipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw SandboxError("cannot create a pipe");
  read = fds[0];
  write = fds[1];
}

Pipe::~Pipe() {
  if (read >= 0) close(read);
  if (write >= 0) close(write);
}

void Pipe::close_write() {
  if (write >= 0) close(write);
  write = -1;
}

RunStreams::RunStreams(Pipe& out, Pipe& err, Pipe& chan, std::size_t cap)
    : pipes_{&out, &err, &chan}, cap_(cap) {}

int RunStreams::open() const {
  int n = 0;
  for (const Pipe* pipe : pipes_) n += pipe->read >= 0;
  return n;
}

void RunStreams::fill(pollfd* polls) const {
  for (int i = 0; i < 3; ++i) polls[i] = {pipes_[i]->read, POLLIN, 0};
}

bool RunStreams::read(const pollfd* polls, Spawned& result) {
  std::string* sinks[3] = {&result.out, &result.err, &result.channel};
  bool passed_cap = false;
  char buffer[65536];
  for (int i = 0; i < 3; ++i) {
    int& fd = pipes_[i]->read;
    if (fd < 0 || !(polls[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) {
      close(fd);
      fd = -1;
      continue;
    }
    std::string& sink = *sinks[i];
    const std::size_t room = cap_ > sink.size() ? cap_ - sink.size() : 0;
    sink.append(buffer, std::min<std::size_t>(room, static_cast<std::size_t>(n)));
    if (static_cast<std::size_t>(n) > room && !result.output_limited) {
      result.output_limited = true;
      passed_cap = true;
    }
  }
  return passed_cap;
}

namespace {

using Clock = std::chrono::steady_clock;

// Reads the child's three streams into `result` until it has exited and they are drained,
// killing the whole tree at the wall-clock limit, when a stream passes its cap, and after
// the child's exit (whatever the run left behind goes with it). Returns its wait status.
int collect(pid_t child, const ChildPlan& plan, Clock::time_point start, RunStreams& streams, Spawned& result) {
  const auto deadline = start + std::chrono::duration<double>(plan.limits.wall_seconds);
  bool exited = false;
  int status = 0;
  auto kill_tree = [&] {
    if (!exited) kill(child, SIGKILL);  // unreaped, so still ours; also before its setsid()
    kill(-child, SIGKILL);
    if (plan.uid != 0) kill_uid(plan.uid);
  };
  Clock::time_point drain_until{};
  while (true) {
    pollfd polls[3];
    streams.fill(polls);
    if (exited && (streams.open() == 0 || Clock::now() >= drain_until)) break;
    const auto now = Clock::now();
    if (!exited && now >= deadline) {
      result.timed_out = true;
      kill_tree();
    }
    poll(polls, 3, 20);
    if (streams.read(polls, result)) kill_tree();
    if (!exited) {
      const pid_t done = waitpid(child, &status, WNOHANG);
      if (done == child) {
        exited = true;
        // Whatever the run left behind goes with it; then read what is still buffered.
        kill_tree();
        drain_until = Clock::now() + std::chrono::milliseconds(200);
      }
    }
  }
  return status;
}

}  // namespace

void decode_status(int status, Spawned& result) {
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
}

pid_t start_child(const ChildPlan& plan, Pipe& out, Pipe& err, Pipe& chan) {
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) throw SandboxError("cannot open /dev/null");
  std::vector<std::string> argv_strings = plan.argv, env_strings = plan.env;
  std::vector<char*> argv = c_strings(argv_strings);
  std::vector<char*> envp = c_strings(env_strings);
  char* const* env = plan.env.empty() ? environ : envp.data();
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    close(devnull);
    throw SandboxError(std::string("fork failed: ") + std::strerror(errno));
  }
  if (child == 0) exec_child(plan, argv.data(), env, parent, devnull, out.write, err.write, chan.write);
  close(devnull);
  out.close_write();
  err.close_write();
  chan.close_write();
  return child;
}

Spawned spawn(ChildPlan plan) {
  const auto start = Clock::now();
  Pipe out, err, chan;
  const pid_t child = start_child(plan, out, err, chan);
  Spawned result;
  RunStreams streams(out, err, chan, plan.limits.max_output_bytes);
  const int status = collect(child, plan, start, streams, result);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  decode_status(status, result);
  return result;
}

SandboxRun sandbox_run(const Spawned& s, Isolation isolation) {
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

}  // namespace specula::sandbox_internal
