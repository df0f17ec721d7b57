// Host-side preparation for the device backend: the attention work partition and its key
// splits, the packed metadata of a step, read back the way the kernels index it, and the
// stacked bias row of the fused q|k|v product.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "compute/batch.h"
#include "compute/device_plan.h"
#include "compute/kv_cache.h"
#include "reference.h"
#include "tensor_view.h"

using namespace specula;
namespace ref = specula::cuda::reference;
using specula::test::view;

namespace {

// A ragged batch over forked sequences with different cache lengths, as a verification
// step makes: a shared prompt, then each sequence with its own history and draft length.
struct Step {
  KvCache cache{4, 64};
  RaggedBatch batch;
  BatchPlan plan;
  explicit Step(const std::vector<int>& new_tokens) {
    const int prompt = cache.create();
    plan_prompt(prompt, 6);
    std::vector<int> seqs;
    for (size_t i = 0; i < new_tokens.size(); ++i) {
      seqs.push_back(cache.fork(prompt));
      cache.extend(seqs.back(), static_cast<int>(i));  // histories of different lengths
    }
    for (size_t i = 0; i < new_tokens.size(); ++i) {
      std::vector<int32_t> tokens(static_cast<size_t>(new_tokens[i]));
      for (int t = 0; t < new_tokens[i]; ++t) tokens[static_cast<size_t>(t)] = 10 * static_cast<int>(i) + t;
      batch.add(seqs[i], tokens, true);
    }
    plan = plan_batch(cache, batch, 1000);
  }
  void plan_prompt(int seq, int n) {
    RaggedBatch prompt;
    std::vector<int32_t> tokens(static_cast<size_t>(n), 7);
    prompt.add(seq, tokens, false);
    plan_batch(cache, prompt, 1000);
  }
};

// The split-K attention of the kernels, emulated in double from the packed metadata alone
// (which is all the kernels see): each task's pieces give each query its partial softmax,
// folded in piece order. Returns (n_tokens, n_heads * head_dim).
void require(bool ok, const char* what) {
  if (!ok) throw std::logic_error(what);
}

std::vector<double> emulate_split_attention(const PackedPlan& p, int n_tokens, int split_keys, const ref::AttentionCase& c) {
  const int n_heads = c.n_heads, hd = c.head_dim, group = c.n_heads / c.n_kv_heads, kv_dim = c.n_kv_heads * hd;
  const auto at = [&](size_t field, size_t i) { return p.data[field + i]; };
  std::vector<double> got(static_cast<size_t>(n_tokens) * n_heads * hd, 0.0);
  for (int t = 0; t < n_tokens; ++t) {
    const int item = at(p.token_work, t);
    const int seq = at(p.work, 5 * item), first = at(p.work, 5 * item + 1);
    const int first_task = at(p.work, 5 * item + 3), n_tasks = at(p.work, 5 * item + 4);
    require(t >= first && t < first + at(p.work, 5 * item + 2), "a token outside its work item");
    const int position = at(p.positions, t);
    const int32_t table = at(p.table_offsets, seq);
    std::vector<int> pieces;  // the pieces this query folds, in order
    for (int k = first_task; k < first_task + n_tasks; ++k) {
      require(at(p.tasks, 4 * k) == item, "a task of another item");
      for (int piece = at(p.tasks, 4 * k + 1); piece < at(p.tasks, 4 * k + 1) + at(p.tasks, 4 * k + 2); ++piece) {
        if (piece * split_keys <= position) pieces.push_back(piece);  // else all in its future
      }
    }
    require(static_cast<int>(pieces.size()) == position / split_keys + 1, "a query folds pieces past its position");
    for (int h = 0; h < n_heads; ++h) {
      const int kvh = h / group;
      const float* q = c.q.data() + (static_cast<size_t>(t) * n_heads + h) * hd;
      double big = -INFINITY, sum = 0.0;
      std::vector<double> acc(hd, 0.0);
      for (const int piece : pieces) {
        const int begin = piece * split_keys, end = std::min(begin + split_keys, position + 1);
        double m = -INFINITY, l = 0.0;
        std::vector<double> o(hd, 0.0), scores;
        const auto slot_of = [&](int j) {
          return static_cast<int64_t>(at(p.block_tables, table + j / c.block_size)) * c.block_size + j % c.block_size;
        };
        for (int j = begin; j < end; ++j) {
          double dot = 0.0;
          for (int d = 0; d < hd; ++d) dot += static_cast<double>(q[d]) * c.k_cache[slot_of(j) * kv_dim + kvh * hd + d];
          scores.push_back(dot / std::sqrt(static_cast<double>(hd)));
          m = std::max(m, scores.back());
        }
        for (int j = begin; j < end; ++j) {
          const double e = std::exp(scores[static_cast<size_t>(j - begin)] - m);
          l += e;
          for (int d = 0; d < hd; ++d) o[d] += e * c.v_cache[slot_of(j) * kv_dim + kvh * hd + d];
        }
        // the fold: rescale what came before to the new running maximum
        const double next = std::max(big, m), a = std::exp(big - next), b = std::exp(m - next);
        sum = sum * a + l * b;
        for (int d = 0; d < hd; ++d) acc[d] = acc[d] * a + o[d] * b;
        big = next;
      }
      for (int d = 0; d < hd; ++d) got[(static_cast<size_t>(t) * n_heads + h) * hd + d] = acc[d] / sum;
    }
  }
  return got;
}

}  // namespace

class TestDevicePlan : public QObject {
  Q_OBJECT

 private slots:
  void partitionCoversEveryTokenOnceInTiles() {
    const Step step({1, 5, 17, 4});
    for (int tile : {1, 4, 16}) {
      const auto work = partition_attention(step.plan, tile);
      std::vector<int> seen(static_cast<size_t>(step.plan.n_tokens), 0);
      for (const AttentionWork& w : work) {
        QVERIFY(w.n_queries >= 1 && w.n_queries <= tile);
        for (int t = w.first_token; t < w.first_token + w.n_queries; ++t) {
          ++seen[static_cast<size_t>(t)];
          QCOMPARE(step.plan.token_seq[static_cast<size_t>(t)], w.seq);  // one sequence per item
        }
      }
      QCOMPARE(std::count(seen.begin(), seen.end(), 1), static_cast<long>(seen.size()));
      // a sequence of n tokens takes ceil(n / tile) items
      size_t expected = 0;
      for (int n : {1, 5, 17, 4}) expected += static_cast<size_t>((n + tile - 1) / tile);
      QCOMPARE(work.size(), expected);
    }
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, partition_attention(step.plan, 0));
  }

  void packedPlanReadsBackAsTheKernelsIndexIt() {
    Step step({1, 5, 3, 9});
    const auto work = partition_attention(step.plan, 4);
    const PackedPlan p = pack_plan(step.plan, step.batch.tokens, AttentionShape{4, 4, 2, 1});
    const auto at = [&](size_t field, size_t i) { return p.data[field + i]; };
    QCOMPARE(p.n_work, static_cast<int>(work.size()));
    for (int t = 0; t < step.plan.n_tokens; ++t) {
      QCOMPARE(at(p.tokens, t), step.batch.tokens[static_cast<size_t>(t)]);
      QCOMPARE(at(p.positions, t), step.plan.positions[static_cast<size_t>(t)]);
      QCOMPARE(at(p.cache_slots, t), step.plan.cache_slots[static_cast<size_t>(t)]);
    }
    for (size_t r = 0; r < step.plan.logit_rows.size(); ++r) QCOMPARE(at(p.logit_rows, r), step.plan.logit_rows[r]);
    // the attention kernel: item i reads (seq, first, count, ...) at work + 5i, and the key at
    // position j of its sequence from slot table[j / block] * block + j % block
    const int bs = step.cache.block_size();
    for (int i = 0; i < p.n_work; ++i) {
      const int seq = at(p.work, 5 * i), first = at(p.work, 5 * i + 1), count = at(p.work, 5 * i + 2);
      QCOMPARE(seq, work[static_cast<size_t>(i)].seq);
      const int cache_seq = step.batch.seqs[static_cast<size_t>(seq)];
      const int last_position = at(p.positions, first + count - 1);
      if (first + count == step.plan.seq_offsets[static_cast<size_t>(seq) + 1]) {
        QCOMPARE(last_position + 1, step.cache.length(cache_seq));  // the last query sees the whole cache
      }
      const int32_t table = at(p.table_offsets, seq);
      for (int j = 0; j <= last_position; ++j) {
        const int32_t slot = at(p.block_tables, table + j / bs) * bs + j % bs;
        QCOMPARE(slot, step.cache.slot(cache_seq, j));
      }
      // and the new tokens' own keys land where the attention will look for them
      for (int t = first; t < first + count; ++t) {
        QCOMPARE(at(p.cache_slots, t), step.cache.slot(cache_seq, at(p.positions, t)));
      }
    }
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, pack_plan(step.plan, {1, 2}, AttentionShape{}));
  }

  // A step that fails after planning leaves every sequence as long as the keys and values it
  // holds, also after a copy-on-write of a shared last block; a committed step keeps them.
  void planningIsUndoneUnlessTheStepCommits() {
    KvCache cache(4, 64);
    const int a = cache.create();
    RaggedBatch prompt;
    prompt.add(a, std::vector<int32_t>(6, 1), false);
    PlannedBatch(cache, prompt, 1000).commit();
    const int b = cache.fork(a);  // shares a's partial last block
    RaggedBatch step;
    step.add(a, std::vector<int32_t>{1, 2, 3}, true);
    step.add(b, std::vector<int32_t>{4}, true);
    try {
      PlannedBatch planned(cache, step, 1000);
      QCOMPARE(cache.length(a), 9);
      QCOMPARE(planned.plan().positions[3], 6);
      throw std::runtime_error("out of device memory");
    } catch (const std::runtime_error&) {
    }
    QCOMPARE(cache.length(a), 6);
    QCOMPARE(cache.length(b), 6);
    for (int j = 0; j < 6; ++j) QCOMPARE(cache.slot(a, j) % 4, j % 4);
    {
      PlannedBatch planned(cache, step, 1000);
      planned.commit();
    }
    QCOMPARE(cache.length(a), 9);
    QCOMPARE(cache.length(b), 7);
    // a malformed batch throws before anything is extended
    RaggedBatch twice;
    twice.add(a, std::vector<int32_t>{1}, true);
    twice.add(a, std::vector<int32_t>{1}, true);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, PlannedBatch(cache, twice, 1000));
    QCOMPARE(cache.length(a), 9);
  }

  // A step packed at its bucket's capacities: the same entries at fixed offsets, and padding
  // that does nothing (tokens writing to the trash slot with no queries, empty items and
  // tasks, logit rows repeating row 0); buckets are powers of two with a spare item.
  void bucketsPadWithInertEntries() {
    Step step({1, 5, 17, 4});
    const AttentionShape shape{8, 4, 2, 2};
    const PackedPlan exact = pack_plan(step.plan, step.batch.tokens, shape);
    const StepBucket e = exact_bucket(exact, step.plan);
    QCOMPARE(e.tokens, 27);
    const StepBucket b = step_bucket(e);
    QCOMPARE(b.tokens, 32);
    QCOMPARE(b.rows, 32);
    QCOMPARE(b.seqs, 4);
    QVERIFY(b.work > e.work && b.tasks > e.tasks && b.blocks >= e.blocks && b.partial_rows >= e.partial_rows);
    const PackedPlan p = pack_plan(step.plan, step.batch.tokens, shape, b, 999);
    QCOMPARE(p.data.size(), static_cast<size_t>(3 * b.tokens + b.seqs + 1 + b.blocks + b.rows + 5 * b.work + 4 * b.tasks + b.tokens));
    const auto at = [](const PackedPlan& q, size_t field, size_t i) { return q.data[field + i]; };
    for (int t = 0; t < b.tokens; ++t) {
      if (t < e.tokens) {
        QCOMPARE(at(p, p.tokens, t), at(exact, exact.tokens, t));
        QCOMPARE(at(p, p.positions, t), at(exact, exact.positions, t));
        QCOMPARE(at(p, p.cache_slots, t), at(exact, exact.cache_slots, t));
        QCOMPARE(at(p, p.token_work, t), at(exact, exact.token_work, t));
      } else {
        QCOMPARE(at(p, p.cache_slots, t), 999);
        const int item = at(p, p.token_work, t);
        QCOMPARE(item, e.work);             // the spare item:
        QCOMPARE(at(p, p.work, 5 * item + 2), 0);  // no queries
        QCOMPARE(at(p, p.work, 5 * item + 4), 1);  // one task (the combine step skips it)
      }
    }
    for (int r = e.rows; r < b.rows; ++r) QCOMPARE(at(p, p.logit_rows, r), 0);
    for (int k = e.tasks; k < b.tasks; ++k) {
      QCOMPARE(at(p, p.tasks, 4 * k), e.work);
      QCOMPARE(at(p, p.tasks, 4 * k + 2), 0);  // no pieces
    }
    for (int i = 0; i < 5 * e.work; ++i) QCOMPARE(at(p, p.work, i), at(exact, exact.work, i));
    for (int i = 0; i < 4 * e.tasks; ++i) QCOMPARE(at(p, p.tasks, i), at(exact, exact.tasks, i));
    QCOMPARE(p.n_tasks, b.tasks);
    QCOMPARE(p.partial_rows, b.partial_rows);
    StepBucket small = b;
    small.tokens = e.tokens - 1;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, pack_plan(step.plan, step.batch.tokens, shape, small, 999));
    StepBucket no_spare = e;
    no_spare.tokens = b.tokens;  // padded tokens need the spare item
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, pack_plan(step.plan, step.batch.tokens, shape, no_spare, 999));
  }

  void tasksCoverEachItemsPiecesOnce() {
    const Step step({1, 5, 17, 4});
    const auto work = partition_attention(step.plan, 4);
    for (int split_keys : {1, 3, 8, 64}) {
      const AttentionTasks t = plan_attention_tasks(step.plan, work, split_keys, 4, 2);
      QCOMPARE(t.first_task.size(), work.size() + 1);
      QCOMPARE(t.first_task.back(), static_cast<int32_t>(t.tasks.size()));
      int32_t rows = 0;
      for (size_t i = 0; i < work.size(); ++i) {
        const int n_keys = step.plan.positions[static_cast<size_t>(work[i].first_token + work[i].n_queries - 1)] + 1;
        const int n_pieces = (n_keys + split_keys - 1) / split_keys;
        const int n_tasks = t.first_task[i + 1] - t.first_task[i];
        // few queries and several pieces: one task per piece, each with its scratch rows
        const bool parallel = work[i].n_queries <= 4 && n_pieces > 1;
        QCOMPARE(n_tasks, parallel ? n_pieces : 1);
        int next_piece = 0;
        for (int k = t.first_task[i]; k < t.first_task[i + 1]; ++k) {
          const AttentionTask& task = t.tasks[static_cast<size_t>(k)];
          QCOMPARE(task.work, static_cast<int32_t>(i));
          QCOMPARE(task.first_piece, next_piece);
          next_piece += task.n_pieces;
          if (parallel) {
            QCOMPARE(task.partial_row, rows);
            rows += work[i].n_queries * 2;
          }
        }
        QCOMPARE(next_piece, n_pieces);
      }
      QCOMPARE(t.partial_rows, rows);
    }
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, plan_attention_tasks(step.plan, work, 0, 4, 2));
  }

  // The split-K attention of the kernels, emulated in double from the packed metadata alone:
  // each task's pieces give each query its partial softmax, folded in piece order (in the
  // block for a whole-item task, by the combine step for parallel pieces), which is the
  // reference attention for every piece size and mix of parallel and whole-item tasks.
  // Which pieces a query folds depends on its position alone, whatever the batch.
  void splitAttentionFromThePackedPlanMatchesTheReference() {
    Step step({1, 5, 17, 4});
    const int n_heads = 4, n_kv_heads = 2, hd = 8, group = n_heads / n_kv_heads, kv_dim = n_kv_heads * hd;
    std::mt19937 rng(4);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    ref::AttentionCase c;
    c.n_heads = n_heads;
    c.n_kv_heads = n_kv_heads;
    c.head_dim = hd;
    c.block_size = step.cache.block_size();
    const size_t n_slots = static_cast<size_t>(step.cache.num_blocks() * step.cache.block_size());
    for (auto* v : {&c.k_cache, &c.v_cache}) {
      v->resize(n_slots * kv_dim);
      for (float& x : *v) x = normal(rng);
    }
    c.q.resize(static_cast<size_t>(step.plan.n_tokens) * n_heads * hd);
    for (float& x : c.q) x = normal(rng);
    c.token_seq = step.plan.token_seq;
    c.positions = step.plan.positions;
    c.table_offsets = step.plan.table_offsets;
    c.block_tables = step.plan.block_tables;
    const std::vector<double> want = ref::attention(c);
    for (const auto& [split_keys, parallel] : {std::pair{2, 8}, std::pair{5, 2}, std::pair{128, 8}, std::pair{3, 0}}) {
      const AttentionShape shape{16 / group, split_keys, parallel, group};
      const PackedPlan exact = pack_plan(step.plan, step.batch.tokens, shape);
      const StepBucket bucket = step_bucket(exact_bucket(exact, step.plan));
      const PackedPlan padded = pack_plan(step.plan, step.batch.tokens, shape, bucket, 999);
      for (const PackedPlan* p : {&exact, &padded}) {
        const std::vector<double> got = emulate_split_attention(*p, step.plan.n_tokens, split_keys, c);
        for (size_t i = 0; i < want.size(); ++i) QVERIFY(std::abs(got[i] - want[i]) < 1e-12);
      }
    }
  }

  // The fused q|k|v product's bias row: each part where its rows are, zeros for a missing one.
  void qkvBiasFollowsTheStackedRows() {
    LayerWeights l;
    const uint8_t byte = 0;
    l.wq = view(TensorType::Q8_0, 8, 32, &byte);
    l.wk = view(TensorType::Q8_0, 4, 32, &byte);
    l.wv = view(TensorType::Q8_0, 4, 32, &byte);
    QVERIFY(qkv_bias_row(l).empty());
    const std::vector<float> bq{1, 2, 3, 4, 5, 6, 7, 8}, bv{-1, -2, -3, -4};
    l.bq = view(TensorType::F32, 1, 8, bq.data());
    l.bv = view(TensorType::F32, 1, 4, bv.data());
    QCOMPARE(qkv_bias_row(l), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, -1, -2, -3, -4}));
  }

  // A model with a stage the device kernels lack is refused with every such stage named
  // (gemma3's, qwen3moe's, starcoder2's); the stages the kernels have (qwen3's q/k norms, llama) pass.
  void deviceRefusesWhatItCannotCompute() {
    Model m;
    m.config.architecture = "qwen3";
    m.weights.layers.resize(2);
    QCOMPARE(device_refusal(m), std::string());
    m.config.architecture = "gemma3";
    m.config.sliding_window = 512;
    const float one = 1.0f;
    m.weights.layers[1].ffn_post_norm = view(TensorType::F32, 1, 1, &one);
    m.config.activation = Activation::GeluTanh;
    m.config.embedding_scale = 25.3f;
    const std::string why = device_refusal(m);
    for (const char* stage : {"gemma3", "sliding-window attention", "norms of attention's and the feed-forward's outputs",
                              "GELU-tanh", "scaled embedding", "--device cpu"}) {
      QVERIFY2(why.find(stage) != std::string::npos, why.c_str());
    }
    m.config = ModelConfig{};
    QVERIFY(device_refusal(m).find("norms of attention's") != std::string::npos);  // the weights alone say so
    Model moe;
    moe.config.architecture = "qwen3moe";
    moe.config.n_experts = 128;
    moe.config.n_experts_used = 8;
    const std::string experts = device_refusal(moe);
    for (const char* stage : {"qwen3moe", "mixture of experts", "--device cpu"}) {
      QVERIFY2(experts.find(stage) != std::string::npos, experts.c_str());
    }
    Model starcoder2;
    starcoder2.config.architecture = "starcoder2";
    starcoder2.config.norm = NormKind::Layer;
    starcoder2.config.gated_feed_forward = false;
    starcoder2.config.activation = Activation::GeluTanh;
    const std::string layer_norm = device_refusal(starcoder2);
    for (const char* stage : {"starcoder2", "LayerNorm with biases", "without a gate", "GELU-tanh", "--device cpu"}) {
      QVERIFY2(layer_norm.find(stage) != std::string::npos, layer_norm.c_str());
    }
  }
};

QTEST_GUILESS_MAIN(TestDevicePlan)
#include "test_device_plan.moc"
