// Process plumbing of a sandbox run: fork, the child's descriptors and rlimits, exec (or the
// reduced level's intermediate process), reading stdout, stderr and the harness channel
// with caps, the wall-clock kill of the whole tree, and the wait. Everything between fork
// and exec is a raw system call: the caller may be multithreaded. See sandbox.h.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "eval/sandbox.h"

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

// A memfd holding `content`, at offset 0 (close-on-exec). Throws SandboxError.
int memfd_with(const std::string& content);

}  // namespace specula::sandbox_internal
