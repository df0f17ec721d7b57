// Confinement of a sandbox run: see sandbox_confinement.h and docs/sandbox.md.
#include "eval/sandbox_confinement.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <iterator>

#include "eval/child_process.h"

namespace specula::sandbox_internal {

namespace fs = std::filesystem;

namespace {

// What a run sees of the host's system directories, at both levels: the top-level ones
// beside /usr (symlinks into it, or directories), and the files the dynamic loader and
// the time zone need from /etc. Nothing else of /etc (passwd, hostname, ...).
constexpr const char* kSystemTops[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
constexpr const char* kSystemEtc[] = {"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"};
constexpr const char* kHostname = "sandbox";  // the full level's host name

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

// Landlock (the reduced level's file system confinement, where the kernel has it). Rights
// by ABI version: 1 has bits 0-12, 2 adds REFER (13), 3 TRUNCATE (14), 5 IOCTL_DEV (15).
// Older kernel headers lack the later ones, so they are spelt out here.
constexpr std::uint64_t kLandlockExecute = 1ull << 0, kLandlockWriteFile = 1ull << 1,
                        kLandlockReadFile = 1ull << 2, kLandlockReadDir = 1ull << 3,
                        kLandlockTruncate = 1ull << 14, kLandlockIoctlDev = 1ull << 15;

}  // namespace


// The whole environment of every process between the caller and the interpreter, and of
// the interpreter: nothing of the caller's (API keys, tokens, paths naming its files).
// The interpreter runs with -I, so no PYTHON* variable would matter anyway.
std::vector<std::string> run_environment(const std::string& home) {
  return {"PATH=/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + home, "LC_ALL=C.UTF-8"};
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

std::vector<std::string> reduced_read_only(const std::vector<std::string>& python_dirs) {
  std::vector<std::string> read_only = {"/usr"};
  read_only.insert(read_only.end(), std::begin(kSystemTops), std::end(kSystemTops));
  read_only.insert(read_only.end(), std::begin(kSystemEtc), std::end(kSystemEtc));
  read_only.insert(read_only.end(), python_dirs.begin(), python_dirs.end());
  return read_only;
}

std::vector<std::string> bwrap_options(const std::vector<std::string>& python_dirs, bool stage,
                                       std::vector<std::pair<std::string, std::string>>& staged,
                                       const std::vector<SandboxFile>& files,
                                       std::uint64_t max_file_bytes, bool as_pid_1, const HandFile& hand) {
  std::vector<std::string> o = {"--unshare-all", "--die-with-parent", "--new-session",
                                "--hostname", kHostname, "--ro-bind", "/usr", "/usr"};
  if (as_pid_1) o.push_back("--as-pid-1");
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
  for (std::size_t i = 0; i < python_dirs.size(); ++i) {
    std::string source = python_dirs[i];
    if (stage) {  // root switching uid: stage what that uid cannot reach
      const std::string point = "/tmp/specula-ro-" + std::to_string(i);
      staged.emplace_back(source, point);
      source = point;
    }
    o.insert(o.end(), {"--ro-bind", source, python_dirs[i]});
  }
  o.insert(o.end(), {"--proc", "/proc"});
  // The kernel's lists of keys stay out of sight, like the keyrings themselves (full_filter()).
  for (const char* keys : {"/proc/keys", "/proc/key-users"})
    if (fs::exists(keys)) o.insert(o.end(), {"--ro-bind", "/dev/null", keys});
  o.insert(o.end(), {"--dev", "/dev", "--size", std::to_string(max_file_bytes * 4), "--tmpfs", "/work"});
  for (const SandboxFile& f : files) o.insert(o.end(), {"--file", hand(f.content), "/work/" + f.name});
  const std::vector<sock_filter>& filter = full_filter();
  if (!filter.empty())
    o.insert(o.end(), {"--seccomp", hand(std::string(reinterpret_cast<const char*>(filter.data()),
                                                     filter.size() * sizeof(sock_filter)))});
  o.insert(o.end(), {"--remount-ro", "/", "--chdir", "/work"});
  return o;
}

// Refuses files the work directory cannot hold as named.
void check_files(const std::vector<SandboxFile>& files) {
  if (files.size() > static_cast<std::size_t>(kMaxFiles)) throw SandboxError("too many sandbox files");
  for (const SandboxFile& f : files)
    if (f.name.empty() || f.name.find('/') != std::string::npos || f.name[0] == '.')
      throw SandboxError("bad sandbox file name '" + f.name + "'");
}

std::string warm_child_filter() {
  // POSIX message queues live as long as the IPC namespace, which a warm process's runs
  // share, and cannot be listed there to be removed (System V objects can, see warm_server.py).
  const std::vector<sock_filter> filter = seccomp_program({{__NR_mq_open, ENOSYS}});
  return std::string(reinterpret_cast<const char*>(filter.data()), filter.size() * sizeof(sock_filter));
}

}  // namespace specula::sandbox_internal
