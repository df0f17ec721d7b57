// Host-side preparation for the device backend: the attention work partition, the packed
// metadata of a step (read back the way the kernels index it) and weight conversion.
#include <QtTest>

#include <cstring>
#include <random>
#include <vector>

#include "compute/batch.h"
#include "compute/device_plan.h"
#include "compute/kv_cache.h"

using namespace specula;

namespace {

TensorView view(TensorType type, int64_t rows, int64_t cols, const void* data) {
  TensorView v;
  v.type = type;
  v.rows = rows;
  v.cols = cols;
  v.data = data;
  return v;
}

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
    const PackedPlan p = pack_plan(step.plan, step.batch.tokens, work);
    const auto at = [&](size_t field, size_t i) { return p.data[field + i]; };
    QCOMPARE(p.n_work, static_cast<int>(work.size()));
    for (int t = 0; t < step.plan.n_tokens; ++t) {
      QCOMPARE(at(p.tokens, t), step.batch.tokens[static_cast<size_t>(t)]);
      QCOMPARE(at(p.positions, t), step.plan.positions[static_cast<size_t>(t)]);
      QCOMPARE(at(p.cache_slots, t), step.plan.cache_slots[static_cast<size_t>(t)]);
    }
    for (size_t r = 0; r < step.plan.logit_rows.size(); ++r) QCOMPARE(at(p.logit_rows, r), step.plan.logit_rows[r]);
    // the attention kernel: item i reads (seq, first, count) at work + 3i, and the key at
    // position j of its sequence from slot table[j / block] * block + j % block
    const int bs = step.cache.block_size();
    for (int i = 0; i < p.n_work; ++i) {
      const int seq = at(p.work, 3 * i), first = at(p.work, 3 * i + 1), count = at(p.work, 3 * i + 2);
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
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, pack_plan(step.plan, {1, 2}, work));
  }

  void deviceTypeFollowsTheMatrices() {
    const float f = 0.0f;
    Weights w;
    w.layers.resize(1);
    const auto set_all = [&](TensorType t) {
      for (TensorView* m : {&w.token_embedding, &w.output, &w.layers[0].wq, &w.layers[0].wk, &w.layers[0].wv,
                            &w.layers[0].wo, &w.layers[0].w_gate, &w.layers[0].w_up, &w.layers[0].w_down}) {
        *m = view(t, 1, 32, &f);
      }
    };
    set_all(TensorType::F32);
    QCOMPARE(device_matrix_type(w), TensorType::F32);
    set_all(TensorType::BF16);
    QCOMPARE(device_matrix_type(w), TensorType::BF16);
    w.layers[0].wo.type = TensorType::F32;  // mixed: fp16 on the device
    QCOMPARE(device_matrix_type(w), TensorType::F16);
    set_all(TensorType::Q4_K);
    w.layers[0].w_down.type = TensorType::Q6_K;
    QCOMPARE(device_matrix_type(w), TensorType::F16);
  }

  void conversionRoundsLikeTheScalarConverters() {
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> values(3 * 64);
    for (float& v : values) v = normal(rng);
    values[5] = 70000.0f;  // beyond fp16: infinity
    const TensorView f32 = view(TensorType::F32, 3, 64, values.data());

    std::vector<uint16_t> half(values.size()), bf(values.size());
    convert_matrix(f32, TensorType::F16, half.data());
    convert_matrix(f32, TensorType::BF16, bf.data());
    for (size_t i = 0; i < values.size(); ++i) {
      QCOMPARE(half[i], fp32_to_fp16(values[i]));
      QCOMPARE(bf[i], fp32_to_bf16(values[i]));
    }
    QVERIFY(std::isinf(fp16_to_fp32(half[5])));

    // same type: a plain copy; bf16 -> f32 exact
    std::vector<uint16_t> copy(values.size());
    convert_matrix(view(TensorType::F16, 3, 64, half.data()), TensorType::F16, copy.data());
    QVERIFY(copy == half);
    std::vector<float> widened(values.size());
    convert_matrix(view(TensorType::BF16, 3, 64, bf.data()), TensorType::F32, widened.data());
    for (size_t i = 0; i < values.size(); ++i) QCOMPARE(widened[i], bf16_to_fp32(bf[i]));

    // quantized rows expand to what dequantize_row gives, rounded once to fp16
    std::vector<uint8_t> q8(row_bytes(TensorType::Q8_0, 64) * 3);
    for (int r = 0; r < 3; ++r) quantize_row(TensorType::Q8_0, values.data() + r * 64, q8.data() + r * row_bytes(TensorType::Q8_0, 64), 64);
    std::vector<uint16_t> expanded(values.size());
    convert_matrix(view(TensorType::Q8_0, 3, 64, q8.data()), TensorType::F16, expanded.data());
    std::vector<float> row(64);
    for (int r = 0; r < 3; ++r) {
      dequantize_row(TensorType::Q8_0, q8.data() + r * row_bytes(TensorType::Q8_0, 64), row.data(), 64);
      for (int c = 0; c < 64; ++c) QCOMPARE(expanded[static_cast<size_t>(r * 64 + c)], fp32_to_fp16(row[static_cast<size_t>(c)]));
    }
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, convert_matrix(f32, TensorType::Q8_0, q8.data()));
  }

  void deviceBytesCountMatricesInTheDeviceType() {
    Model m;
    m.config.dim = 64;
    m.config.hidden_dim = 160;
    m.config.n_layers = 2;
    m.config.n_heads = 4;
    m.config.n_kv_heads = 2;
    m.config.vocab_size = 100;
    const uint8_t byte = 0;
    const auto matrix = [&](int64_t rows, int64_t cols) { return view(TensorType::Q4_0, rows, cols, &byte); };
    Weights& w = m.weights;
    w.token_embedding = matrix(100, 64);
    w.output = w.token_embedding;  // tied: counted once
    w.layers.resize(2);
    for (LayerWeights& l : w.layers) {
      l.wq = matrix(64, 64);
      l.wk = matrix(32, 64);
      l.wv = matrix(32, 64);
      l.wo = matrix(64, 64);
      l.w_gate = matrix(160, 64);
      l.w_up = matrix(160, 64);
      l.w_down = matrix(64, 160);
    }
    const size_t per_layer = 64 * 64 * 2 + 32 * 64 * 2 + 160 * 64 * 3;
    const size_t expected = 2 * (100 * 64 + 2 * per_layer) + 5 * 64 * 4;  // fp16 matrices, f32 norms
    QCOMPARE(device_weight_bytes(m), expected);
    const uint8_t other = 0;
    w.output = view(TensorType::Q4_0, 100, 64, &other);  // untied: the output matrix too
    QCOMPARE(device_weight_bytes(m), expected + 2 * 100 * 64);
    const std::vector<float> bias(64, 0.5f);
    w.layers[1].bq = view(TensorType::F32, 1, 64, bias.data());  // biases and q/k norms are f32
    w.layers[1].k_norm = view(TensorType::F32, 1, 16, bias.data());
    QCOMPARE(device_weight_bytes(m), expected + 2 * 100 * 64 + (64 + 16) * 4);
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
};

QTEST_GUILESS_MAIN(TestDevicePlan)
#include "test_device_plan.moc"
