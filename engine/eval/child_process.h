// Process plumbing of a sandbox run: fork, the child's descriptors and rlimits, exec (or the
// reduced level's intermediate process), reading stdout, stderr and the harness channel
// with caps, the wall-clock kill of the whole tree, and the wait. Everything between fork
// and exec is a raw system call: the caller may be multithreaded. See sandbox.h.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "eval/sandbox.h"

struct pollfd;

namespace specula::sandbox_internal {

// The child's descriptors: 0 /dev/null, 1 stdout, 2 stderr, 3 the harness's report
// channel, then the files handed to bubblewrap (--file, its --seccomp filter and its options
// for --args) or, at the reduced level, the Landlock ruleset.
constexpr int kFirstFileFd = 4;
constexpr int kMaxFiles = 16;      // sandbox files of one run
constexpr int kMaxHanded = kMaxFiles + 2;  // from kFirstFileFd on: files, bwrap's filter and options

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

// How the child ended and what it wrote.
struct Spawned {
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  bool output_limited = false;
  std::string out, err, channel;
  double seconds = 0.0;
};

// Forks, execs `plan`, collects the three streams and enforces the wall-clock limit.
Spawned spawn(ChildPlan plan);

// A pipe (close-on-exec); the ends still open are closed with it. Throws SandboxError.
struct Pipe {
  int read = -1, write = -1;
  Pipe();
  ~Pipe();
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  void close_write();
};

// Forks and execs `plan` with the write ends of `out`, `err`, `chan` as its descriptors 1-3
// (closed here afterwards); returns its pid, for the caller to read, kill and reap.
pid_t start_child(const ChildPlan& plan, Pipe& out, Pipe& err, Pipe& chan);

// Reads a run's stdout, stderr and report channel (the read ends of three pipes, closed at
// their end of file), each kept up to `cap` bytes.
class RunStreams {
 public:
  RunStreams(Pipe& out, Pipe& err, Pipe& chan, std::size_t cap);
  int open() const;                // streams not at their end yet
  void fill(pollfd* polls) const;  // polls[0..2] for poll(); a closed stream's fd is -1
  // Reads what `polls` says is ready into `result`; true when a stream has just passed the
  // cap (result.output_limited is then set).
  bool read(const pollfd* polls, Spawned& result);

 private:
  Pipe* pipes_[3];
  std::size_t cap_;
};

// Sets the exit code or signal of `result` from a wait status as bubblewrap's (128 + the
// signal for a signal death).
void decode_status(int status, Spawned& result);

// Kills every process of `uid` (a uid used by no one else): a process running as that uid
// signals all processes it may, i.e. the run's, wherever they moved to.
void kill_uid(uid_t uid);

SandboxRun sandbox_run(const Spawned& spawned, Isolation isolation);

// A memfd holding `content`, at offset 0 (close-on-exec). Throws SandboxError.
int memfd_with(const std::string& content);

}  // namespace specula::sandbox_internal
