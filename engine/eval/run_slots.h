// Places for the concurrent runs of this process (up to 64), and the unprivileged uid each
// place runs as when the process is root. See sandbox.h.
#pragma once

#include <sys/types.h>

namespace specula::sandbox_internal {

// Takes a free place, waiting for one when all 64 are taken; release_run_slot() gives it back.
int acquire_run_slot();
void release_run_slot(int slot);

// The uid of place `slot` for runs started as root: kUidBase + 64 * pid + slot.
uid_t slot_uid(int slot);

// Holds a place for its lifetime.
struct RunSlot {
  int index = acquire_run_slot();
  ~RunSlot() { release_run_slot(index); }
  RunSlot() = default;
  RunSlot(const RunSlot&) = delete;
  RunSlot& operator=(const RunSlot&) = delete;
};

}  // namespace specula::sandbox_internal
