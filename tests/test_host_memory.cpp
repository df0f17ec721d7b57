// What the process can still allocate (compute/host_memory.h), and the CPU backend's refusal
// to copy a model's weights or allocate a KV cache beyond it: checked against a real limit,
// the process's own data size limit (RLIMIT_DATA), lowered for the test and raised back.
#include <QtTest>

#include <fstream>
#include <sstream>
#include <string>

#include "compute/backend.h"
#include "compute/cpu_kernels.h"
#include "compute/host_memory.h"
#include "data_limit.h"
#include "model/random_model.h"
#include "small_models.h"

using namespace specula;
using specula::test::data_bytes;
using specula::test::DataLimit;
using specula::test::mid_f32_model;

namespace {

std::string read_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kMargin = kMemoryMarginBytes;

uint64_t packed_bytes(const Model& model, SimdLevel level) {
  uint64_t bytes = packed_layout(model.weights.output, level).owned_bytes;
  for (const LayerWeights& lw : model.weights.layers) {
    for (const TensorView* w : lw.matrices()) {
      bytes += packed_layout(*w, level).owned_bytes;
    }
  }
  return bytes;
}

}  // namespace

class TestHostMemory : public QObject {
  Q_OBJECT

 private slots:
  void readsTheKernelsFiles() {
    QCOMPARE(meminfo_available_bytes("MemTotal:       24683664 kB\nMemFree:  100 kB\nMemAvailable:   24231776 kB\n"),
             std::optional<uint64_t>(24231776ull * 1024));
    QVERIFY(!meminfo_available_bytes("MemTotal: 1 kB\nMemFree: 2 kB\n"));
    QVERIFY(!meminfo_available_bytes("MemAvailable: lots\n"));
    QCOMPARE(meminfo_commit_room_bytes("CommitLimit:    12341832 kB\nCommitted_AS:      52248 kB\n"),
             std::optional<uint64_t>((12341832ull - 52248) * 1024));
    QCOMPARE(meminfo_commit_room_bytes("CommitLimit: 10 kB\nCommitted_AS: 30 kB\n"), std::optional<uint64_t>(0));
    QVERIFY(!meminfo_commit_room_bytes("CommitLimit: 10 kB\n"));
    QCOMPARE(status_data_bytes("Name:\tx\nVmPeak:\t  9 kB\nVmData:\t     360 kB\nVmStk:\t 132 kB\n"),
             std::optional<uint64_t>(360ull * 1024));
    QVERIFY(!status_data_bytes("VmDataX: 3 kB\n"));
  }

  void aControlGroupsRoomCountsItsFileCache() {
    // v2: no limit
    QVERIFY(!cgroup_room_bytes("max\n", "1000\n", "anon 10\nfile 990\n"));
    // v1: "no limit" is 2^63 rounded down to a page
    QVERIFY(!cgroup_room_bytes("9223372036854771712\n", "1278038016\n", ""));
    // v2: 8 GiB limit, 6 GiB used of which 1 GiB file cache -> 3 GiB room
    const uint64_t g = 1ull << 30;
    QCOMPARE(cgroup_room_bytes(std::to_string(8 * g), std::to_string(6 * g),
                               "anon 5\nactive_file " + std::to_string(g / 4) + "\ninactive_file " +
                                   std::to_string(3 * g / 4) + "\n"),
             std::optional<uint64_t>(3 * g));
    // v1 names them total_*
    QCOMPARE(cgroup_room_bytes(std::to_string(8 * g), std::to_string(6 * g),
                               "cache 7\ntotal_active_file " + std::to_string(g) + "\ntotal_inactive_file 0\n"),
             std::optional<uint64_t>(3 * g));
    // usage above the limit (it can be, briefly): the room is the cache alone, never negative
    QCOMPARE(cgroup_room_bytes("100", "150", "active_file 20\ninactive_file 0\n"), std::optional<uint64_t>(20));
    QCOMPARE(cgroup_room_bytes("100", "150", ""), std::optional<uint64_t>(0));
    QVERIFY(!cgroup_room_bytes("", "150", ""));
  }

  void theShortfallNamesBothSizesAndTheLimit() {
    const MemoryRoom room{2'000'000'000, "the data size limit (ulimit -d)"};
    QVERIFY(memory_shortfall(1'000'000'000, "the weights", room).empty());
    const std::string message = memory_shortfall(3'400'000'000, "the weights", room);
    QVERIFY2(message.find("the weights needs 3.4 GB") != std::string::npos, message.c_str());
    QVERIFY2(message.find("only 2.0 GB") != std::string::npos, message.c_str());
    QVERIFY2(message.find("ulimit -d") != std::string::npos, message.c_str());
    // within the margin of what remains: refused
    QVERIFY(!memory_shortfall(room.bytes - kMargin / 2, "x", room).empty());
    // nothing known: nothing refused
    QVERIFY(memory_shortfall(1ull << 60, "x", std::nullopt).empty());
  }

  void thisMachinesRoomIsAtMostItsMemory() {
    const auto room = host_memory_room();
    QVERIFY(room.has_value());  // Linux always has /proc/meminfo
    QVERIFY(room->bytes > 0);
    unsigned long long total_kib = 0;
    std::istringstream meminfo(read_text("/proc/meminfo"));
    for (std::string line; std::getline(meminfo, line);) std::sscanf(line.c_str(), "MemTotal: %llu kB", &total_kib);
    QVERIFY(total_kib > 0);
    QVERIFY(room->bytes <= total_kib * 1024);
  }

  void theDataLimitCountsAndPackingFitsWithinIt() {
    auto backend = create_cpu_backend(1);
    const auto model = mid_f32_model(5);
    const uint64_t bytes = packed_bytes(*model, best_simd_level());
    QVERIFY(bytes > 60 * kMiB);
    // room for half the copies: refused before anything is allocated (allocating would fail)
    {
      const uint64_t before = data_bytes();
      DataLimit limit(before + bytes / 2);
      QVERIFY(limit.ok());
      const auto room = host_memory_room();
      QVERIFY(room.has_value());
      QCOMPARE(room->limited_by, std::string("the data size limit (ulimit -d)"));
      try {
        backend->prepare(*model);
        QFAIL("prepare packed weights that do not fit under the data size limit");
      } catch (const ModelError& e) {
        const std::string message = e.what();
        QVERIFY2(message.find("needs ") != std::string::npos && message.find("ulimit -d") != std::string::npos,
                 e.what());
      }
      QVERIFY(data_bytes() < before + 4 * kMiB);  // nothing was copied
    }
    // enough room for the copies and the margin: the real allocation under the real limit works
    {
      DataLimit limit(data_bytes() + kMargin + bytes + 8 * kMiB);
      QVERIFY(limit.ok());
      backend->prepare(*model);
    }
    QVERIFY(data_bytes() >= bytes);  // the copies are held
  }

  void aCacheBeyondTheRoomIsRefused() {
    auto backend = create_cpu_backend(1);
    const auto model = mid_f32_model(5);
    const uint64_t per_position = 2 * sizeof(float) * model->config.n_layers * model->config.kv_dim();
    DataLimit limit(data_bytes() + kMargin + 40 * kMiB);
    QVERIFY(limit.ok());
    const int fits = static_cast<int>(32 * kMiB / per_position);
    QVERIFY(backend->create_cache(*model, fits) != nullptr);
    try {
      backend->create_cache(*model, fits * 4);  // beyond the limit itself, not only the margin
      QFAIL("a cache beyond the data size limit was allocated");
    } catch (const std::runtime_error& e) {
      const std::string message = e.what();
      QVERIFY2(message.find("key-value cache of " + std::to_string(fits * 4) + " positions needs") != std::string::npos,
               e.what());
    }
  }
};

QTEST_GUILESS_MAIN(TestHostMemory)
#include "test_host_memory.moc"
