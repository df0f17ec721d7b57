#include "common/thread_pool.h"

#include <pthread.h>

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPECULA_CPU_RELAX() _mm_pause()
#else
#define SPECULA_CPU_RELAX() ((void)0)
#endif

namespace specula {

namespace {
// Spin this many times before sleeping: long enough to bridge the gap between the
// jobs of one forward pass, short enough not to burn a shared core when idle.
constexpr int kSpinIterations = 1 << 14;
constexpr int kChunksPerThread = 4;
}  // namespace

ThreadPool::ThreadPool(int threads, int64_t serial_work) : serial_work_(serial_work) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = threads;
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
  for (std::thread& w : workers_) {
    clockid_t clock;
    if (pthread_getcpuclockid(w.native_handle(), &clock) == 0) worker_clocks_.push_back(clock);  // fails only for an ended thread
  }
}

double ThreadPool::cpu_seconds() const {
  const auto read = [](clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  double seconds = read(CLOCK_THREAD_CPUTIME_ID);
  for (const clockid_t clock : worker_clocks_) seconds += read(clock);
  return seconds;
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::run_chunks(uint32_t job, int thread) {
  const Body* body = body_.load(std::memory_order_acquire);
  const int64_t n = n_.load(std::memory_order_acquire);
  const int64_t grain = grain_.load(std::memory_order_acquire);
  const int64_t chunks = chunks_.load(std::memory_order_acquire);
  const int64_t blocks = (n + grain - 1) / grain;
  uint64_t claim = claim_.load(std::memory_order_acquire);
  for (;;) {
    // Stop when the job moved on (the values read above may then be stale) or is fully claimed.
    if (static_cast<uint32_t>(claim >> 32) != job) return;
    const int64_t chunk = static_cast<int64_t>(claim & 0xffffffffu);
    if (chunk >= chunks) return;
    if (!claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel)) continue;
    const int64_t begin = std::min(n, blocks * chunk / chunks * grain);
    const int64_t end = std::min(n, blocks * (chunk + 1) / chunks * grain);
    if (begin < end) (*body)(begin, end, thread);
    done_.fetch_add(1, std::memory_order_acq_rel);
    claim = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::parallel_for(int64_t n, const Body& fn, int64_t grain, int64_t work) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t blocks = (n + grain - 1) / grain;
  if (n_threads_ == 1 || blocks == 1 || (work >= 0 && work < serial_work_)) {
    fn(0, n, 0);
    return;
  }
  const int64_t chunks = std::min<int64_t>(blocks, int64_t{n_threads_} * kChunksPerThread);
  const uint32_t job = generation_.load(std::memory_order_relaxed) + 1;
  body_.store(&fn, std::memory_order_relaxed);
  n_.store(n, std::memory_order_relaxed);
  grain_.store(grain, std::memory_order_relaxed);
  chunks_.store(chunks, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  claim_.store(static_cast<uint64_t>(job) << 32, std::memory_order_release);
  generation_.store(job, std::memory_order_release);
  generation_.notify_all();
  run_chunks(job, 0);
  // A worker may hold a claimed chunk while the scheduler has taken its core away (a shared
  // or busy machine): after a short spin, give the core up rather than burn it waiting.
  for (int spin = 0; done_.load(std::memory_order_acquire) < chunks; ++spin) {
    if (spin < kSpinIterations) {
      SPECULA_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::worker_loop(int thread) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t now = generation_.load(std::memory_order_acquire);
    for (int spin = 0; now == seen; ++spin) {
      if (spin < kSpinIterations) {
        SPECULA_CPU_RELAX();
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stopping_.load(std::memory_order_acquire)) return;
    run_chunks(now, thread);
  }
}

}  // namespace specula
