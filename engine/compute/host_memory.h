// How much more memory this process can take before the system refuses it or its
// out-of-memory killer ends the process. The CPU backend asks before it copies a model's
// weight matrices into panels (about the size of the file) and before it allocates a KV
// cache, so that a model too large for the machine gets a message naming the sizes
// instead of a crash halfway through loading.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace specula {

struct MemoryRoom {
  uint64_t bytes = 0;      // what can still be allocated
  std::string limited_by;  // what sets it, for people: "available memory (MemAvailable)", ...
};

// The least of what can be read of:
//  - the system's available memory: MemAvailable of /proc/meminfo (free memory and the
//    caches the kernel can reclaim);
//  - the room under the memory limit of the process's control group and of each group
//    above it (cgroup v2: memory.max; v1: memory.limit_in_bytes), its file cache counted
//    as room, since the kernel reclaims it before it kills anything;
//  - the room under the process's data size limit (RLIMIT_DATA, `ulimit -d`): its soft
//    limit less VmData of /proc/self/status;
//  - where the kernel refuses to overcommit (vm.overcommit_memory = 2), CommitLimit less
//    Committed_AS of /proc/meminfo.
// Swap is not counted: weights that fit only with it would be read back from the disk for
// every token.
// Nothing when none of them can be read.
std::optional<MemoryRoom> host_memory_room();

// The parts of host_memory_room(), public for tests. Each takes the text of the file it
// names and returns nothing when the value is absent or malformed.
std::optional<uint64_t> meminfo_available_bytes(std::string_view meminfo);  // /proc/meminfo
std::optional<uint64_t> meminfo_commit_room_bytes(std::string_view meminfo);  // CommitLimit - Committed_AS, at least 0
std::optional<uint64_t> status_data_bytes(std::string_view status);        // /proc/self/status: VmData
// A group's room: `limit` (memory.max or memory.limit_in_bytes: bytes, or "max" or a value
// of 2^62 or more for none) less `usage` (memory.current or memory.usage_in_bytes), plus
// the reclaimable file cache of `stat` (memory.stat: active_file + inactive_file, or v1's
// total_ versions). Nothing when the group has no limit.
std::optional<uint64_t> cgroup_room_bytes(std::string_view limit, std::string_view usage,
                                          std::string_view stat);

// Memory kept to spare beyond what a check is for: the forward's activations and scratch.
inline constexpr uint64_t kMemoryMarginBytes = 64ull << 20;

// Empty when `bytes` more (with kMemoryMarginBytes to spare) fit in `room` or the room is
// unknown; otherwise a sentence for people: "<what> needs 13.5 GB,
// but only 11.2 GB can be allocated (limited by ...)".
std::string memory_shortfall(uint64_t bytes, const std::string& what,
                             const std::optional<MemoryRoom>& room);

}  // namespace specula
