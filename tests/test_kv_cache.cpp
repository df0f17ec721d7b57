// Paged KV cache bookkeeping and batch planning, checked against a plain list model:
// every sequence is simply a std::vector of the values written at its positions.
#include <QtTest>

#include <map>
#include <random>
#include <vector>

#include "compute/batch.h"
#include "compute/kv_cache.h"

using namespace specula;

namespace {

// Storage of one int per slot, so that what a sequence "sees" can be read back.
class SlotStorage : public KvStorage {
 public:
  SlotStorage(int block_size, int num_blocks)
      : block_size_(block_size), values(static_cast<size_t>(block_size * num_blocks), -1) {}
  void copy_block(int src, int dst) override {
    ++copies;
    std::copy_n(values.begin() + src * block_size_, block_size_, values.begin() + dst * block_size_);
  }
  int block_size_;
  std::vector<int> values;
  int copies = 0;
};

std::vector<int> read_back(const KvCache& cache, const SlotStorage& storage, int seq) {
  std::vector<int> out;
  for (int p = 0; p < cache.length(seq); ++p) out.push_back(storage.values[cache.slot(seq, p)]);
  return out;
}

}  // namespace

class TestKvCache : public QObject {
  Q_OBJECT

 private slots:
  void forkSharesBlocksAndCopiesOnWrite() {
    auto storage = std::make_unique<SlotStorage>(4, 16);
    SlotStorage* values = storage.get();
    KvCache cache(4, 16, std::move(storage));
    const int prompt = cache.create();
    cache.extend(prompt, 6);  // blocks: [full][2 of 4]
    for (int p = 0; p < 6; ++p) values->values[cache.slot(prompt, p)] = 100 + p;
    QCOMPARE(cache.blocks_in_use(), 2);

    std::vector<int> children;
    for (int i = 0; i < 8; ++i) children.push_back(cache.fork(prompt));
    QCOMPARE(cache.blocks_in_use(), 2);  // nothing copied yet

    for (int i = 0; i < 8; ++i) {
      const int start = cache.extend(children[i], 1);
      QCOMPARE(start, 6);
      values->values[cache.slot(children[i], 6)] = i;
    }
    // each child copied the partial block once; the full first block stays shared
    QCOMPARE(values->copies, 8);
    QCOMPARE(cache.blocks_in_use(), 2 + 8);
    QCOMPARE(cache.block_table(children[3])[0], cache.block_table(prompt)[0]);
    for (int i = 0; i < 8; ++i) {
      QCOMPARE(read_back(cache, *values, children[i]), (std::vector<int>{100, 101, 102, 103, 104, 105, i}));
    }
    QCOMPARE(read_back(cache, *values, prompt), (std::vector<int>{100, 101, 102, 103, 104, 105}));

    cache.release(prompt);
    for (int c : children) cache.release(c);
    QCOMPARE(cache.blocks_in_use(), 0);
    QCOMPARE(cache.live_sequences(), 0);
  }

  void truncateFreesWholeBlocks() {
    KvCache cache(16, 8);
    const int s = cache.create();
    cache.extend(s, 40);
    QCOMPARE(cache.blocks_in_use(), 3);
    cache.truncate(s, 33);
    QCOMPARE(cache.blocks_in_use(), 3);
    cache.truncate(s, 32);
    QCOMPARE(cache.blocks_in_use(), 2);
    cache.truncate(s, 0);
    QCOMPARE(cache.blocks_in_use(), 0);
    QCOMPARE(cache.length(s), 0);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, cache.truncate(s, 1));
  }

  void fullCacheThrowsAndLeavesSequenceUnchanged() {
    KvCache cache(4, 2);
    const int s = cache.create();
    cache.extend(s, 7);
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, cache.extend(s, 2));
    QCOMPARE(cache.length(s), 7);
    QCOMPARE(cache.blocks_in_use(), 2);
    cache.extend(s, 1);
    QCOMPARE(cache.length(s), 8);
  }

  void unknownSequencesAreRejected() {
    KvCache cache(4, 4);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, cache.extend(0, 1));
    const int s = cache.create();
    cache.release(s);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, cache.fork(s));
    QVERIFY(!cache.alive(s));
  }

  // Random forks, appends, rollbacks and releases, compared with plain vectors.
  void randomOperationsMatchListModel() {
    const int block_size = 4;
    const int num_blocks = 256;
    auto storage = std::make_unique<SlotStorage>(block_size, num_blocks);
    SlotStorage* values = storage.get();
    KvCache cache(block_size, num_blocks, std::move(storage));
    std::map<int, std::vector<int>> model;
    std::mt19937 rng(1234);
    int next_value = 0;
    model[cache.create()] = {};
    for (int step = 0; step < 4000; ++step) {
      auto it = model.begin();
      std::advance(it, static_cast<long>(rng() % model.size()));
      const int seq = it->first;
      const int op = static_cast<int>(rng() % 10);
      if (op < 5) {  // append a draft run
        const int n = 1 + static_cast<int>(rng() % 9);
        try {
          const int start = cache.extend(seq, n);
          for (int i = 0; i < n; ++i) {
            values->values[cache.slot(seq, start + i)] = next_value;
            it->second.push_back(next_value++);
          }
        } catch (const std::runtime_error&) {
          QCOMPARE(cache.length(seq), static_cast<int>(it->second.size()));
        }
      } else if (op < 8) {  // reject part of it
        const int keep = it->second.empty() ? 0 : static_cast<int>(rng() % (it->second.size() + 1));
        cache.truncate(seq, keep);
        it->second.resize(static_cast<size_t>(keep));
      } else if (op == 8 && model.size() < 24) {
        const int child = cache.fork(seq);
        model[child] = it->second;
      } else if (model.size() > 1) {
        cache.release(seq);
        model.erase(it);
      }
      if (step % 97 == 0) {
        for (const auto& [s, expected] : model) QCOMPARE(read_back(cache, *values, s), expected);
      }
    }
    for (const auto& [s, expected] : model) QCOMPARE(read_back(cache, *values, s), expected);
    for (const auto& entry : model) cache.release(entry.first);
    QCOMPARE(cache.blocks_in_use(), 0);
  }

  void planDescribesRaggedBatch() {
    KvCache cache(4, 32);
    const int a = cache.create();
    const int b = cache.create();
    cache.extend(a, 5);
    RaggedBatch batch;
    const std::vector<int32_t> a_tokens{7, 8, 9};
    const std::vector<int32_t> b_tokens{1, 2, 3, 4, 5, 6};
    batch.add(a, a_tokens, true);
    batch.add(b, b_tokens, false);
    const BatchPlan plan = plan_batch(cache, batch, 64);
    QCOMPARE(plan.n_seqs, 2);
    QCOMPARE(plan.n_tokens, 9);
    QCOMPARE(plan.positions, (std::vector<int32_t>{5, 6, 7, 0, 1, 2, 3, 4, 5}));
    QCOMPARE(plan.token_seq, (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1, 1, 1}));
    QCOMPARE(plan.context_lengths, (std::vector<int32_t>{8, 6}));
    QCOMPARE(plan.max_context, 8);
    QCOMPARE(plan.logit_rows, (std::vector<int32_t>{0, 1, 2, 8}));
    QCOMPARE(plan.table_offsets, (std::vector<int32_t>{0, 2, 4}));
    for (int t = 0; t < plan.n_tokens; ++t) {
      const int seq = batch.seqs[plan.token_seq[t]];
      const int p = plan.positions[t];
      const int block = plan.block_tables[plan.table_offsets[plan.token_seq[t]] + p / 4];
      QCOMPARE(plan.cache_slots[t], block * 4 + p % 4);
      QCOMPARE(plan.cache_slots[t], cache.slot(seq, p));
    }
  }

  void badBatchesLeaveCacheUnchanged() {
    KvCache cache(4, 3);
    const int a = cache.create();
    const int b = cache.create();
    const std::vector<int32_t> tokens{1, 2, 3, 4, 5, 6, 7, 8};
    {
      RaggedBatch batch;  // second sequence does not fit: 2 + 1 blocks needed, 3 free, then more
      batch.add(a, std::span(tokens).first(8), false);
      batch.add(b, std::span(tokens).first(8), false);
      QVERIFY_THROWS_EXCEPTION(std::runtime_error, plan_batch(cache, batch, 100));
      QCOMPARE(cache.length(a), 0);
      QCOMPARE(cache.length(b), 0);
      QCOMPARE(cache.blocks_in_use(), 0);
    }
    {
      RaggedBatch batch;
      batch.add(a, std::span(tokens).first(2), false);
      batch.add(a, std::span(tokens).first(2), false);
      QVERIFY_THROWS_EXCEPTION(std::invalid_argument, plan_batch(cache, batch, 100));
    }
    {
      RaggedBatch batch;
      batch.add(a, std::span(tokens).first(8), false);
      QVERIFY_THROWS_EXCEPTION(std::invalid_argument, plan_batch(cache, batch, 7));
      QCOMPARE(cache.length(a), 0);
    }
    {
      RaggedBatch batch;
      batch.add(a, {}, false);
      QVERIFY_THROWS_EXCEPTION(std::invalid_argument, plan_batch(cache, batch, 100));
    }
  }
};

QTEST_APPLESS_MAIN(TestKvCache)
#include "test_kv_cache.moc"
