// A persistent pool of worker threads with a deterministically partitioned parallel_for.
//
// A job's range is cut into a fixed set of chunks that depends only on the range, the
// grain and the pool size, never on timing; threads then claim chunks one at a time. A
// kernel that computes each output element in one place therefore gives the same bits
// on every run, while a worker that the OS has not scheduled yet (the machine may be
// shared) never holds up the job: the calling thread takes its chunks. Workers spin
// briefly between jobs (a forward pass issues hundreds of short jobs) and then sleep on
// an atomic wait.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace specula {

class ThreadPool {
 public:
  // Work (bytes read plus multiply-adds) under which a job runs on the calling thread: some
  // 3-10 µs of one thread's time, where the hand-off costs 1-2 µs.
  static constexpr int64_t kSerialWork = int64_t{128} << 10;

  // `threads` workers including the calling thread; 0 means one per hardware thread. Jobs
  // whose work is under `serial_work` run on the calling thread (see parallel_for); tests
  // pass 0 to split every job, so that they compare what several threads compute.
  explicit ThreadPool(int threads = 0, int64_t serial_work = kSerialWork);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // CPU seconds the pool's threads have run: every worker's, plus the calling thread's own
  // (the thread that hands the pool its jobs). Each thread's clock is read exactly; the
  // process clock (CLOCK_PROCESS_CPUTIME_ID) is not: it adds another thread's time only at a
  // scheduler tick or a switch, so over a forward shorter than a tick it missed the workers'
  // share (half a 2-thread forward of the demo target, which the cost model then took for
  // the forward's cost).
  double cpu_seconds() const;

  // Calls fn(begin, end, thread) on chunks that cover [0, n): chunk boundaries are
  // multiples of `grain`, at most 4 chunks per thread. `thread` in [0, size()) names the
  // thread running the chunk (for per-thread scratch space); which thread runs which
  // chunk varies, so fn must compute the same result for a chunk on any thread. Returns
  // when every chunk is done. Not reentrant.
  //
  // `work` is what the whole job costs one thread, in bytes read plus multiply-adds (-1:
  // unknown, the default). A job under the pool's serial work (kSerialWork unless
  // constructed otherwise) runs on the calling thread as one chunk: handing chunks to the
  // workers and waiting for them takes 1-2 µs a job (atomics on shared cache lines, a
  // worker noticing the job), more than such a job saves by being split. A small model's
  // forward is mostly such jobs (stories260K: one token took 0.10 ms on 2 threads and
  // 0.05 ms on one).
  using Body = std::function<void(int64_t begin, int64_t end, int thread)>;
  void parallel_for(int64_t n, const Body& fn, int64_t grain = 1, int64_t work = -1);

 private:
  void worker_loop(int thread);
  // Claims and runs chunks of job `job` until none is left.
  void run_chunks(uint32_t job, int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::vector<clockid_t> worker_clocks_;  // (size() - 1) each worker's CPU-time clock
  // The current job. Written by the calling thread before it publishes the job through
  // `generation_`; read by workers, which only act on it after claiming a chunk of it.
  std::atomic<const Body*> body_{nullptr};
  std::atomic<int64_t> n_{0};
  std::atomic<int64_t> grain_{1};
  std::atomic<int64_t> chunks_{0};
  std::atomic<uint64_t> claim_{0};       // (job << 32) | next unclaimed chunk
  std::atomic<int64_t> done_{0};         // chunks of the current job finished
  std::atomic<uint32_t> generation_{0};  // job number, bumped to start each job (4 bytes: a futex)
  std::atomic<bool> stopping_{false};
  int64_t serial_work_;  // jobs of less work than this run on the calling thread
};

}  // namespace specula
