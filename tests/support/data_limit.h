// The process's data size limit (RLIMIT_DATA, `ulimit -d`), lowered for a test: a real limit
// that makes an allocation beyond it fail, for checking what the engine does when memory
// runs short without filling the machine's memory.
#pragma once

#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace specula::test {

// VmData of this process, in bytes (what RLIMIT_DATA counts), read from /proc/self/status.
inline uint64_t data_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "VmData: %llu kB", &kib) == 1) return kib * 1024;
  }
  return 0;
}

// Lowers the soft RLIMIT_DATA to `bytes` for its lifetime (any process may raise it back up
// to the hard limit).
class DataLimit {
 public:
  explicit DataLimit(uint64_t bytes) {
    getrlimit(RLIMIT_DATA, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = bytes;
    ok_ = setrlimit(RLIMIT_DATA, &lowered) == 0;
  }
  ~DataLimit() { setrlimit(RLIMIT_DATA, &saved_); }
  DataLimit(const DataLimit&) = delete;
  DataLimit& operator=(const DataLimit&) = delete;
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

}  // namespace specula::test
