// A sandbox for running untrusted Python: every run is its own process tree in fresh
// Linux namespaces (through bubblewrap), with read-only system directories, a tmpfs work
// directory as the only writable place, no network, rlimits, captured and capped output,
// and a wall-clock limit after which the parent kills the whole tree. Where namespaces are
// unavailable it falls back to rlimits + a process group + a seccomp filter that denies
// sockets + Landlock where the kernel has it, and says so: every run reports its isolation
// level. No process of a run gets the caller's environment. See docs/sandbox.md.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace specula {

namespace sandbox_internal {
struct ChildPlan;
}
class WarmSandbox;

enum class Isolation { Full, Reduced };
const char* isolation_name(Isolation isolation);  // "full", "reduced"

struct SandboxLimits {
  double wall_seconds = 10.0;               // the parent kills the whole tree after this
  int cpu_seconds = 0;                      // RLIMIT_CPU; 0: wall_seconds rounded up, plus 1
  std::uint64_t memory_bytes = 2ull << 30;  // RLIMIT_AS of every process
  int max_processes = 32;                   // RLIMIT_NPROC, counted inside the sandbox
  std::uint64_t max_file_bytes = 16u << 20; // RLIMIT_FSIZE, and the work directory's size
  int max_open_files = 64;                  // RLIMIT_NOFILE
  std::size_t max_output_bytes = 1u << 20;  // per stream (stdout, stderr); more ends the run
};

struct SandboxOptions {
  std::string python;          // interpreter: a path, or a name looked up on PATH; "" = python3
  bool use_namespaces = true;  // false forces the reduced isolation level
};

// A file placed in the run's work directory before the interpreter starts.
struct SandboxFile {
  std::string name;     // plain file name, no directories
  std::string content;
};

struct SandboxRun {
  int exit_code = -1;            // the interpreter's exit status, -1 when killed by a signal
  int signal = 0;                // the signal that killed it, unless the parent did (timeout)
  bool timed_out = false;        // the wall-clock limit was reached and the tree was killed
  bool output_limited = false;   // a stream passed max_output_bytes and the tree was killed
  std::string out;               // captured stdout (at most max_output_bytes)
  std::string err;               // captured stderr (at most max_output_bytes)
  std::string channel;           // what the run wrote to file descriptor 3 (the harness's reports)
  double seconds = 0.0;          // wall time of the run
  Isolation isolation = Isolation::Full;
};

// The interpreter could not be found or does not run.
struct SandboxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Sandbox {
 public:
  // Finds the interpreter and probes whether bubblewrap's namespaces work here.
  // Throws SandboxError when the interpreter is missing or broken.
  explicit Sandbox(const SandboxOptions& options = {});

  Isolation isolation() const { return isolation_; }
  // What the isolation level lacks here, and why ("" when nothing).
  const std::string& isolation_note() const { return isolation_note_; }
  const std::string& python() const { return python_; }  // resolved interpreter path
  // Whether runs are held to max_processes and every process they leave is killed, also
  // one that left the process group (always so with full isolation, see docs/sandbox.md).
  bool limits_processes() const;
  // Whether runs see nothing of the host's file system and processes beyond the read-only
  // system and interpreter directories (always so with full isolation; at the reduced level
  // only where the kernel offers Landlock, see docs/sandbox.md).
  bool confines_files() const;

  // Runs `python -I -B <main_file> <args...>` in a fresh work directory holding `files`.
  // Thread-safe; up to 64 runs of the process at once (more wait for a free place). As root
  // each concurrent run gets its own unprivileged uid, so that the process limit counts
  // only that run's processes and every process of that uid can be killed afterwards.
  SandboxRun run(const std::vector<SandboxFile>& files, const std::string& main_file,
                 const std::vector<std::string>& args, const SandboxLimits& limits) const;

 private:
  friend class WarmSandbox;
  // Fills `plan` for a warm process (warm_sandbox.h): `main_file` of `files` at full
  // isolation as pid 1 of its namespace, as root under the uid of run place `slot`.
  void plan_warm(sandbox_internal::ChildPlan& plan, const std::vector<SandboxFile>& files,
                 const std::string& main_file, int slot, std::vector<int>& handed_fds) const;
  SandboxRun run_with(Isolation isolation, const std::vector<SandboxFile>& files,
                      const std::string& main_file, const std::vector<std::string>& args,
                      const SandboxLimits& limits) const;

  std::string python_;                   // real path of the interpreter
  std::vector<std::string> python_dirs_; // directories outside /usr it needs (read-only)
  std::string bwrap_;                    // path of bwrap, "" when not installed
  bool keep_root_ = false;               // as root, run without switching to a run's own uid
  int landlock_abi_ = 0;                 // the kernel's Landlock ABI version, 0: none
  Isolation isolation_ = Isolation::Reduced;
  std::string isolation_note_;
};

}  // namespace specula
