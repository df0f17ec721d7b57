#include "compute/host_memory.h"

#include <sys/resource.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

#include "model/model_scan.h"

namespace specula {

namespace {

constexpr uint64_t kNoLimit = 1ull << 62;  // v1 writes "no limit" as 2^63 - 1 rounded down to a page

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<uint64_t> parse_number(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end == text.data()) return std::nullopt;
  return value;
}

// The number after "key" at the start of a line ("key: 123 kB", "key 123"), times `unit`.
std::optional<uint64_t> keyed_value(std::string_view text, std::string_view key, uint64_t unit) {
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    if (line.substr(0, key.size()) == key && line.size() > key.size() &&
        (line[key.size()] == ':' || line[key.size()] == ' ')) {
      line.remove_prefix(key.size() + (line[key.size()] == ':' ? 1 : 0));
      const auto value = parse_number(line);
      if (value) return *value * unit;
      return std::nullopt;
    }
    at = end + 1;
  }
  return std::nullopt;
}

// The process's control groups that may hold a memory limit, innermost first: (directory,
// cgroup v2?) for its own group and each one above it.
std::vector<std::pair<std::string, bool>> memory_groups() {
  std::vector<std::pair<std::string, bool>> groups;
  std::istringstream lines(read_text("/proc/self/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    // "0::/path" (v2) or "4:memory:/path" (v1)
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const bool v2 = line.substr(0, first) == "0" && controllers.empty();
    if (!v2 && controllers.find("memory") == std::string::npos) continue;
    std::string path = line.substr(second + 1);
    const std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    while (true) {
      groups.emplace_back(root + (path == "/" ? "" : path), v2);
      if (path.empty() || path == "/") break;
      const size_t slash = path.rfind('/');
      if (slash == std::string::npos) break;
      path = slash == 0 ? "/" : path.substr(0, slash);
    }
  }
  return groups;
}

}  // namespace

std::optional<uint64_t> meminfo_available_bytes(std::string_view meminfo) {
  return keyed_value(meminfo, "MemAvailable", 1024);  // "MemAvailable:   24231776 kB"
}

std::optional<uint64_t> meminfo_commit_room_bytes(std::string_view meminfo) {
  const auto limit = keyed_value(meminfo, "CommitLimit", 1024);
  const auto committed = keyed_value(meminfo, "Committed_AS", 1024);
  if (!limit || !committed) return std::nullopt;
  return *limit > *committed ? *limit - *committed : 0;
}

std::optional<uint64_t> status_data_bytes(std::string_view status) {
  return keyed_value(status, "VmData", 1024);  // "VmData:	     360 kB"
}

std::optional<uint64_t> cgroup_room_bytes(std::string_view limit, std::string_view usage,
                                          std::string_view stat) {
  const auto max = parse_number(limit);  // "max" (v2, no limit) parses as nothing
  const auto used = parse_number(usage);
  if (!max || *max >= kNoLimit || !used) return std::nullopt;
  const auto cache = [&](std::string_view v2_key, std::string_view v1_key) {
    return keyed_value(stat, v2_key, 1).value_or(keyed_value(stat, v1_key, 1).value_or(0));
  };
  const uint64_t file_cache = cache("active_file", "total_active_file") + cache("inactive_file", "total_inactive_file");
  const uint64_t room = *max > *used ? *max - *used : 0;
  return room + std::min(file_cache, *used);
}

std::optional<MemoryRoom> host_memory_room() {
  std::optional<MemoryRoom> least;
  const auto consider = [&](std::optional<uint64_t> bytes, std::string limited_by) {
    if (bytes && (!least || *bytes < least->bytes)) least = MemoryRoom{*bytes, std::move(limited_by)};
  };
  const std::string meminfo = read_text("/proc/meminfo");
  consider(meminfo_available_bytes(meminfo), "the available memory (MemAvailable in /proc/meminfo)");
  if (parse_number(read_text("/proc/sys/vm/overcommit_memory")) == 2u) {
    consider(meminfo_commit_room_bytes(meminfo), "the commit limit (vm.overcommit_memory = 2)");
  }
  for (const auto& [dir, v2] : memory_groups()) {
    const std::string limit = read_text(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
    const std::string usage = read_text(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
    consider(cgroup_room_bytes(limit, usage, read_text(dir + "/memory.stat")),
             "the memory limit of control group " + dir);
  }
  rlimit data{};
  if (getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY) {
    const auto used = status_data_bytes(read_text("/proc/self/status"));
    if (used) {
      const uint64_t limit = data.rlim_cur;
      consider(limit > *used ? limit - *used : 0, "the data size limit (ulimit -d)");
    }
  }
  return least;
}

std::string memory_shortfall(uint64_t bytes, const std::string& what,
                             const std::optional<MemoryRoom>& room) {
  if (!room || bytes + kMemoryMarginBytes <= room->bytes) return {};
  return what + " needs " + byte_count_label(bytes) + ", but only " + byte_count_label(room->bytes) +
         " can be allocated under " + room->limited_by;
}

}  // namespace specula
