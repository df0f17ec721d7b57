// Confinement of a sandbox run: what it sees and may do. The full level's bubblewrap
// options, the system call filters of both levels, the reduced level's Landlock ruleset,
// and the environment of every run. The functions marked "after fork" make system calls
// only. See sandbox.h and docs/sandbox.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "eval/sandbox.h"

namespace specula::sandbox_internal {

// The whole environment of every process between the caller and the interpreter.
std::vector<std::string> run_environment(const std::string& home);

// Installs the reduced level's system call filter (after fork). False where there is no
// filter for this architecture: the run does not start.
bool install_reduced_filter();

// The Landlock ABI version the kernel offers, 0 when none.
int landlock_abi();
// The directories and files a reduced run may read and execute beneath.
std::vector<std::string> reduced_read_only(const std::vector<std::string>& python_dirs);
// A Landlock ruleset for a reduced run; its descriptor (close-on-exec). Throws SandboxError.
int landlock_ruleset(int abi, const std::vector<std::string>& read_only, const std::string& writable);
// Enforces the ruleset open as `ruleset` on this process and its children (after fork).
bool enforce_landlock(int ruleset);

// A descriptor's content handed to the child; returns its number there, as text.
using HandFile = std::function<std::string(const std::string& content)>;

// bubblewrap's options for a full run (handed through --args), in this order of handed
// descriptors: the run's files, the seccomp filter. With `stage` (root switching to a
// run's own uid) the interpreter's directories are bound from staged mount points, which
// are added to `staged` as (source, mount point). With `as_pid_1` the interpreter is the
// namespace's init (a warm process) instead of bubblewrap's own.
std::vector<std::string> bwrap_options(const std::vector<std::string>& python_dirs, bool stage,
                                       std::vector<std::pair<std::string, std::string>>& staged,
                                       const std::vector<SandboxFile>& files,
                                       std::uint64_t max_file_bytes, bool as_pid_1, const HandFile& hand);

// Refuses files the work directory cannot hold as named (SandboxError).
void check_files(const std::vector<SandboxFile>& files);

// The seccomp program (raw sock_filter entries) a warm run's child installs on itself
// (warm_server.py): it fails mq_open.
std::string warm_child_filter();

}  // namespace specula::sandbox_internal
