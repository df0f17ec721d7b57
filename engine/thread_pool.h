// A persistent pool of worker threads with a statically partitioned parallel_for.
//
// The work split depends only on the range and the pool size, never on timing, so a
// kernel that computes each output element in one place gives the same bits on every
// run. Workers spin briefly between jobs (a forward pass issues hundreds of short jobs)
// and then sleep on an atomic wait.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace specula {

class ThreadPool {
 public:
  // `threads` workers including the calling thread; 0 means one per hardware thread.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end, thread) once per thread on the contiguous chunk
  // [n * thread / size, n * (thread + 1) / size) of [0, n), with chunk boundaries
  // rounded down to multiples of `grain`. Returns when every chunk is done. Not reentrant.
  using Body = std::function<void(int64_t begin, int64_t end, int thread)>;
  void parallel_for(int64_t n, const Body& fn, int64_t grain = 1);

 private:
  void worker_loop(int thread);
  void run_chunk(int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  // The job being run: read by workers after they see a new generation.
  const Body* body_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  std::atomic<uint32_t> generation_{0};  // bumped to start each job (4 bytes: a futex)
  std::atomic<int> pending_{0};          // workers still running the current job
  std::atomic<bool> stopping_{false};
};

}  // namespace specula
