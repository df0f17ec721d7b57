// Places for concurrent sandbox runs: see run_slots.h.
#include "eval/run_slots.h"

#include <unistd.h>

#include <bit>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace specula::sandbox_internal {

namespace {

constexpr uid_t kUidBase = 1800000000u;  // unprivileged uids for runs started as root
static_assert(kUidBase + (4194304ull << 6) < 4294967295ull, "room for every pid (pid_max <= 2^22)");

// Places for concurrent runs of this process; as root, place i runs as uid
// kUidBase + 64 * pid + i, which no other live process of ours shares. Places are taken in
// turn, not lowest first: a killed run's processes may wait a moment to be reaped (by init,
// when their parents died too) and would still count towards the next run's process limit
// under the same uid.
class RunSlots {
 public:
  int acquire() {
    std::unique_lock lock(mutex_);
    freed_.wait(lock, [this] { return ~busy_ != 0; });
    const std::uint64_t free_after = ~busy_ & ~((std::uint64_t{2} << last_) - 1);  // free places after last_ (none when 63)
    const int slot = free_after != 0 ? std::countr_zero(free_after) : std::countr_one(busy_);
    busy_ |= std::uint64_t{1} << slot;
    last_ = slot;
    return slot;
  }
  void release(int slot) {
    {
      std::lock_guard lock(mutex_);
      busy_ &= ~(std::uint64_t{1} << slot);
    }
    freed_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable freed_;
  std::uint64_t busy_ = 0;  // bit i: place i is taken
  int last_ = 63;           // the place taken last; the next search starts after it
};

// Never destroyed: a run may still be ending on another thread (a test pool's) while the
// process exits, and must not find its lock gone.
RunSlots& run_slots() {
  static RunSlots& slots = *new RunSlots;
  return slots;
}

}  // namespace

int acquire_run_slot() { return run_slots().acquire(); }
void release_run_slot(int slot) { run_slots().release(slot); }

uid_t slot_uid(int slot) { return kUidBase + static_cast<uid_t>(getpid()) * 64u + static_cast<uid_t>(slot); }

}  // namespace specula::sandbox_internal
