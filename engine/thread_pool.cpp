#include "thread_pool.h"

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
}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = threads;
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::run_chunk(int thread) {
  const int64_t blocks = (n_ + grain_ - 1) / grain_;
  const int64_t begin = std::min(n_, blocks * thread / n_threads_ * grain_);
  const int64_t end = std::min(n_, blocks * (thread + 1) / n_threads_ * grain_);
  if (begin < end) (*body_)(begin, end, thread);
}

void ThreadPool::parallel_for(int64_t n, const Body& fn, int64_t grain) {
  if (n <= 0) return;
  body_ = &fn;
  n_ = n;
  grain_ = std::max<int64_t>(1, grain);
  if (n_threads_ == 1) {
    run_chunk(0);
    return;
  }
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  run_chunk(0);
  for (int spin = 0;; ++spin) {
    const int left = pending_.load(std::memory_order_acquire);
    if (left == 0) break;
    if (spin < kSpinIterations) {
      SPECULA_CPU_RELAX();
    } else {
      pending_.wait(left, std::memory_order_acquire);
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
    run_chunk(thread);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace specula
