// The sandbox: see sandbox.h and docs/sandbox.md. This file is the policy: which
// interpreter, which isolation level works here, what a run is given (files, uid, limits)
// and how its outcome is reported. What confines a run is in sandbox_confinement.h, how
// its processes are started, read and killed in child_process.h, the places of concurrent
// runs in run_slots.h.
#include "eval/sandbox.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "eval/child_process.h"
#include "eval/run_slots.h"
#include "eval/sandbox_confinement.h"

namespace specula {

namespace fs = std::filesystem;
using namespace sandbox_internal;

const char* isolation_name(Isolation isolation) {
  return isolation == Isolation::Full ? "full" : "reduced";
}

namespace {

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

// Writes `files` into the host directory `dir`.
void write_files(const std::string& dir, const std::vector<SandboxFile>& files) {
  for (const SandboxFile& f : files) {
    const std::string path = dir + "/" + f.name;
    // A file written short (a full disk) would read as a failing candidate: refuse instead.
    FILE* out = std::fopen(path.c_str(), "wb");
    if (!out) throw SandboxError("cannot write " + path + ": " + std::strerror(errno));
    const bool whole = std::fwrite(f.content.data(), 1, f.content.size(), out) == f.content.size();
    if (std::fclose(out) != 0 || !whole) throw SandboxError("cannot write " + path + ": " + std::strerror(errno));
  }
}

// What the interpreter needs of the host: its path, its directories outside /usr, bubblewrap.
struct Interpreter {
  const std::string& python;
  const std::vector<std::string>& dirs;
  const std::string& bwrap;
};


// The run's uid as root (its place's own, see run_slots.h), or 0: keep ours. Full isolation
// makes unreachable interpreter directories reachable (staged binds); the reduced level
// cannot, and then keeps root's uid rather than failing to start.
uid_t run_uid(Isolation isolation, int slot, bool keep_root, const std::string& python) {
  if (geteuid() == 0 && !keep_root && (isolation == Isolation::Full || reachable_by_others(python)))
    return slot_uid(slot);
  return 0;
}

// Completes `plan` for a full run: bubblewrap, its options, the interpreter. The
// descriptors handed to the child are added to `handed_fds`.
void plan_full(ChildPlan& plan, const std::vector<SandboxFile>& files, const std::string& main_file,
               const Interpreter& interpreter, std::vector<int>& handed_fds, bool as_pid_1 = false) {
  // bubblewrap's options go through a file (--args), so that its command line, which
  // every process inside can read as /proc/1/cmdline, names no host path beyond the
  // interpreter's; its environment is already the run's, and so is its working directory.
  auto hand = [&](const std::string& content) {  // -> the descriptor's number in the child
    handed_fds.push_back(memfd_with(content));
    return std::to_string(kFirstFileFd + static_cast<int>(handed_fds.size()) - 1);
  };
  const std::vector<std::string> o =
      bwrap_options(interpreter.dirs, plan.uid != 0, plan.staged, files, plan.limits.max_file_bytes, as_pid_1, hand);
  std::string options;
  for (const std::string& option : o) options += option + '\0';
  plan.argv = {interpreter.bwrap, "--args", hand(options), "--"};
  const std::string prlimit = find_on_path("/usr/bin/prlimit");
  if (!prlimit.empty())
    plan.argv.insert(plan.argv.end(), {prlimit, "--nproc=" + std::to_string(plan.limits.max_processes), "--"});
  plan.argv.insert(plan.argv.end(), {interpreter.python, "-I", "-B", main_file});
  plan.files = handed_fds;
  plan.env = run_environment("/work");
  plan.cwd.assign(1, '/');  // not = "/", which GCC 12 warns about (-Wrestrict, falsely) once inlined
}

// Completes `plan` for a reduced run: a host work directory (set in `workdir`, for the caller
// to remove) holding the files, Landlock where the kernel has it, the seccomp filter, the
// intermediate process, the interpreter.
void plan_reduced(ChildPlan& plan, const std::vector<SandboxFile>& files, const std::string& main_file,
                  const Interpreter& interpreter, int landlock_abi, std::vector<int>& handed_fds,
                  std::string& workdir) {
  // Named after this process, so that a process can tell its own runs from others'.
  std::string dir_template = "/tmp/specula-run-" + std::to_string(getpid()) + "-XXXXXX";
  if (!mkdtemp(dir_template.data())) throw SandboxError("cannot create a work directory");
  workdir = dir_template;
  write_files(workdir, files);
  if (plan.uid != 0 && chown(workdir.c_str(), plan.uid, static_cast<gid_t>(plan.uid)) != 0)
    throw SandboxError("cannot hand the work directory to the run's uid");
  if (landlock_abi > 0) {
    handed_fds.push_back(landlock_ruleset(landlock_abi, reduced_read_only(interpreter.dirs), workdir));
    plan.files = handed_fds;
    plan.landlock = true;
  }
  plan.cwd = workdir;
  plan.env = run_environment(workdir);
  plan.filter_system_calls = true;
  plan.intermediate = true;
  plan.argv = {interpreter.python, "-I", "-B", main_file};
}

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

void Sandbox::plan_warm(ChildPlan& plan, const std::vector<SandboxFile>& files, const std::string& main_file,
                        int slot, std::vector<int>& handed_fds) const {
  plan.uid = run_uid(Isolation::Full, slot, keep_root_, python_);
  plan.nproc_before_exec = plan.uid != 0;
  plan_full(plan, files, main_file, Interpreter{python_, python_dirs_, bwrap_}, handed_fds, /*as_pid_1=*/true);
}

SandboxRun Sandbox::run_with(Isolation isolation, const std::vector<SandboxFile>& files,
                             const std::string& main_file, const std::vector<std::string>& args,
                             const SandboxLimits& limits) const {
  check_files(files);
  const RunSlot slot;
  ChildPlan plan;
  plan.limits = limits;
  plan.uid = run_uid(isolation, slot.index, keep_root_, python_);
  plan.nproc_before_exec = plan.uid != 0;
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

  const Interpreter interpreter{python_, python_dirs_, bwrap_};
  if (isolation == Isolation::Full) {
    plan_full(plan, files, main_file, interpreter, handed_fds);
  } else {
    plan_reduced(plan, files, main_file, interpreter, landlock_abi_, handed_fds, workdir);
  }
  for (const std::string& arg : args) plan.argv.push_back(arg);
  return sandbox_run(spawn(std::move(plan)), isolation);
}

}  // namespace specula
