// A warm sandbox: one confined interpreter, started once in the same bubblewrap confinement
// as a cold run (sandbox.h) and kept, that has imported what the harness imports and
// compiled it, and forks a fresh child per run. The child takes the run's rlimits, a new
// session, a scratch directory made fresh and removed after, the run's environment and
// arguments, and runs the same main file the cold path runs; the warm process (pid 1 of its
// namespace, which candidates can neither signal nor trace) enforces the wall clock and kills
// every process the run left. Whatever fails on the warm side falls back: a dead warm process
// is restarted before a request, and a run it could not finish is run cold, so a failure of
// the warm process never becomes a verdict. Only at full isolation; elsewhere every run is
// cold. See docs/sandbox.md.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eval/sandbox.h"

namespace specula {

namespace sandbox_internal {
struct RunSlot;
}

enum class SandboxMode { Cold, Warm };
const char* sandbox_mode_name(SandboxMode mode);  // "cold", "warm"
// "cold" or "warm"; throws std::invalid_argument with a message naming both otherwise.
SandboxMode parse_sandbox_mode(const std::string& text);

class WarmSandbox {
 public:
  // `preload`: the main file the warm process compiles once (the harness); runs whose main
  // file has exactly this content use the compiled code. The sandbox must outlive this.
  WarmSandbox(const Sandbox& sandbox, SandboxFile preload);
  ~WarmSandbox();
  WarmSandbox(const WarmSandbox&) = delete;
  WarmSandbox& operator=(const WarmSandbox&) = delete;

  // As Sandbox::run, with the same results. One run at a time (not thread-safe).
  SandboxRun run(const std::vector<SandboxFile>& files, const std::string& main_file,
                 const std::vector<std::string>& args, const SandboxLimits& limits);

  // Starts the warm process now, if runs here are warm and none is running, so that the
  // first run does not pay its start (about one cold run); a failure to start is kept as
  // note() and runs go cold, as when run() finds it.
  void prepare(const SandboxLimits& limits);

  // Whether runs go through a warm process here (full isolation, and it started).
  bool warm() const { return sandbox_.isolation() == Isolation::Full && broken_.empty(); }
  // Why runs are cold, "" when they are warm.
  const std::string& note() const { return broken_; }
  int starts() const { return starts_; }             // warm processes started so far
  int cold_fallbacks() const { return fallbacks_; }  // runs the warm path handed to the cold one
  pid_t pid() const { return pid_; }                 // the warm process's bubblewrap, -1 when none

 private:
  enum class Outcome { Done, NotSent, Lost };
  void start(const SandboxLimits& limits);
  void stop();
  bool alive();
  Outcome attempt(const std::vector<SandboxFile>& files, const std::string& main_file,
                  const std::vector<std::string>& args, const SandboxLimits& limits, SandboxRun& run);

  const Sandbox& sandbox_;
  SandboxFile preload_;
  std::unique_ptr<sandbox_internal::RunSlot> slot_;  // held while a warm process lives
  pid_t pid_ = -1;            // the outer bubblewrap (a process group of its own)
  uid_t uid_ = 0;             // as root: the warm process's own uid, 0 otherwise
  int control_ = -1;          // our end of the control socket
  std::uint64_t file_bytes_ = 0;  // max_file_bytes it was started with (its tmpfs is 4 × that)
  bool tainted_ = false;      // it said it could not put its namespace back: restart
  std::string broken_;        // why it cannot start here ("" when it can)
  int starts_ = 0;
  int fallbacks_ = 0;
};

}  // namespace specula
