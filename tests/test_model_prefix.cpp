// The narrowed weights of a layers:K self-draft (model/model_prefix.h, Backend::
// self_draft_model): which matrices are requantized and how closely, what stays a view of
// the target, one copy per target and depth held while the target lives, the target's own
// weights when the memory cannot hold a copy, and drafts through the copy that the target
// still decides.
#include <QtTest>

#include <cmath>
#include <vector>

#include "compute/backend.h"
#include "compute/host_memory.h"
#include "data_limit.h"
#include "decode/decoder.h"
#include "decode/draft_policy.h"
#include "decode/drafter.h"
#include "model/model_prefix.h"
#include "model/random_model.h"
#include "small_models.h"

using namespace specula;
using specula::test::data_bytes;
using specula::test::DataLimit;
using specula::test::mid_f32_model;

namespace {

// The "tiny" shape (3 layers, dim 64, FFN 160) with a wider vocabulary, so that the output
// matrix is the large one it is in real models.
ModelConfig small_config() {
  ModelConfig c = random_model_config("tiny");
  c.vocab_size = 512;
  return c;
}

std::vector<double> values_of(const TensorView& w) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  std::vector<double> all;
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w.type, w.row(r), row.data(), w.cols);
    all.insert(all.end(), row.begin(), row.end());
  }
  return all;
}

// Every value of `narrow` lies within one Q4_0 step of `wide`'s: the step of a block of 32
// is its largest magnitude over 8 (half a step from rounding, a whole one where the
// largest value of the other sign meets the grid's end at +7; and the step is stored in
// f16, off by up to 2^-11 of itself, eight times over at the grid's ends).
void check_within_a_q4_0_step(const TensorView& wide, const TensorView& narrow) {
  QCOMPARE(narrow.type, TensorType::Q4_0);
  QCOMPARE(narrow.rows, wide.rows);
  QCOMPARE(narrow.cols, wide.cols);
  const std::vector<double> a = values_of(wide), b = values_of(narrow);
  double total_error = 0.0, total_step = 0.0;
  for (size_t block = 0; block < a.size(); block += 32) {
    double largest = 0.0;
    for (size_t i = block; i < block + 32; ++i) largest = std::max(largest, std::abs(a[i]));
    const double step = largest / 8.0;
    for (size_t i = block; i < block + 32; ++i) {
      const double error = std::abs(a[i] - b[i]);
      if (error > step * (1.0 + 8.0 / 2048.0) + 1e-7) QFAIL(qPrintable(QString("value %1: %2 against %3, step %4").arg(i).arg(b[i]).arg(a[i]).arg(step)));
      total_error += error;
      total_step += step;
    }
  }
  // rounding to the nearest step: a quarter of a step on average, not a whole one
  QVERIFY(total_error < 0.35 * total_step);
}

}  // namespace

class TestModelPrefix : public QObject {
  Q_OBJECT

 private slots:
  void widerMatricesAreRequantizedToFourBits_data() {
    QTest::addColumn<int>("type");
    QTest::newRow("f32") << static_cast<int>(TensorType::F32);
    QTest::newRow("f16") << static_cast<int>(TensorType::F16);
    QTest::newRow("bf16") << static_cast<int>(TensorType::BF16);
    QTest::newRow("q8_0") << static_cast<int>(TensorType::Q8_0);
  }
  void widerMatricesAreRequantizedToFourBits() {
    QFETCH(int, type);
    const auto target = make_random_model(small_config(), static_cast<TensorType>(type), 11, 1);
    const auto prefix = narrowed_prefix(*target, 2);
    QCOMPARE(prefix->config.n_layers, 2);
    QCOMPARE(prefix->weights.layers.size(), size_t{2});
    QCOMPARE(prefix->config.vocab_size, target->config.vocab_size);
    QCOMPARE(prefix->path, target->path);
    for (int l = 0; l < 2; ++l) {
      const LayerWeights& a = target->weights.layers[static_cast<size_t>(l)];
      const LayerWeights& b = prefix->weights.layers[static_cast<size_t>(l)];
      check_within_a_q4_0_step(a.wq, b.wq);
      check_within_a_q4_0_step(a.wk, b.wk);
      check_within_a_q4_0_step(a.wv, b.wv);
      check_within_a_q4_0_step(a.wo, b.wo);
      check_within_a_q4_0_step(a.w_gate, b.w_gate);
      check_within_a_q4_0_step(a.w_up, b.w_up);
      check_within_a_q4_0_step(a.w_down, b.w_down);
      // norms are the target's own
      QCOMPARE(b.attn_norm.data, a.attn_norm.data);
      QCOMPARE(b.ffn_norm.data, a.ffn_norm.data);
    }
    check_within_a_q4_0_step(target->weights.output, prefix->weights.output);
    QCOMPARE(prefix->weights.token_embedding.data, target->weights.token_embedding.data);
    QCOMPARE(prefix->weights.final_norm.data, target->weights.final_norm.data);
    // it owns its copies alone: the Q4_0 bytes of 14 matrices and the output
    uint64_t bytes = prefix->weights.output.bytes();
    for (const LayerWeights& lw : prefix->weights.layers) {
      for (const TensorView* w : lw.matrices()) bytes += w->bytes();
    }
    QCOMPARE(narrowed_prefix_bytes(*target, 2), bytes);
    QCOMPARE(prefix->storage.size(), size_t{1});
  }

  void matricesAlreadyNarrowAreTheTargets() {
    const auto q4_0 = make_random_model(small_config(), TensorType::Q4_0, 12, 1);
    QCOMPARE(narrowed_prefix_bytes(*q4_0, 3), uint64_t{0});
    // Q4_K_M's mix: Q4_K stays, the Q6_K matrices (wv, w_down, output) are narrowed
    ModelConfig c = small_config();
    c.dim = 256;  // whole Q4_K blocks
    c.hidden_dim = 512;
    const auto mixed = make_random_model(c, TensorType::Q4_K, TensorType::Q6_K, 13, 1);
    const auto prefix = narrowed_prefix(*mixed, 1);
    const LayerWeights& a = mixed->weights.layers[0];
    const LayerWeights& b = prefix->weights.layers[0];
    QCOMPARE(b.wq.data, a.wq.data);
    QCOMPARE(b.w_gate.data, a.w_gate.data);
    QCOMPARE(b.wq.type, TensorType::Q4_K);
    check_within_a_q4_0_step(a.wv, b.wv);
    check_within_a_q4_0_step(a.w_down, b.w_down);
    check_within_a_q4_0_step(mixed->weights.output, prefix->weights.output);
    QCOMPARE(narrowed_prefix_bytes(*mixed, 1),
             uint64_t{b.wv.bytes() + b.w_down.bytes() + prefix->weights.output.bytes()});
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, narrowed_prefix(*mixed, 4));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, narrowed_prefix(*mixed, 0));
  }

  void theBackendKeepsOneCopyPerTargetAndDepth() {
    auto backend = create_cpu_backend(1);
    backend->set_narrow_drafts_above(0);
    auto target = make_random_model(small_config(), TensorType::Q8_0, 14, 1);
    const Model& two = backend->self_draft_model(*target, 2);
    QVERIFY(&two != target.get());
    QCOMPARE(two.config.n_layers, 2);
    QCOMPARE(&backend->self_draft_model(*target, 2), &two);
    const Model& one = backend->self_draft_model(*target, 1);
    QVERIFY(&one != &two);
    QCOMPARE(one.config.n_layers, 1);
    // what a loader prepares for a drafter kind: that same copy, or nothing
    QCOMPARE(self_draft_weights(*backend, *target, "layers:2"), &two);
    QCOMPARE(self_draft_weights(*backend, *target, "ngram"), nullptr);
    QCOMPARE(self_draft_weights(*backend, *target, "layers:4"), nullptr);  // beyond its 3 layers
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, self_draft_weights(*backend, *target, "layers:two"));
    // a target with nothing wider drafts through its own weights
    const auto q4_0 = make_random_model(small_config(), TensorType::Q4_0, 15, 1);
    QCOMPARE(&backend->self_draft_model(*q4_0, 2), q4_0.get());
    QCOMPARE(self_draft_weights(*backend, *q4_0, "layers:2"), nullptr);
    // once the target is gone, a new model gets a copy of its own weights, never the old one
    target.reset();
    const auto next = make_random_model(small_config(), TensorType::Q8_0, 16, 1);
    const Model& fresh = backend->self_draft_model(*next, 2);
    QCOMPARE(fresh.weights.token_embedding.data, next->weights.token_embedding.data);
    QCOMPARE(fresh.weights.final_norm.data, next->weights.final_norm.data);
  }

  // Matrices a cache holds are read at the cost of their arithmetic, which 4 bits do not
  // lower: a prefix within the threshold (by default the last-level cache) stays the target's.
  void aPrefixWithinTheCacheIsTheTargets() {
    const auto target = make_random_model(small_config(), TensorType::F32, 19, 1);
    const uint64_t bytes = prefix_matrix_bytes(*target, 2);
    const LayerWeights& l0 = target->weights.layers[0];
    QCOMPARE(bytes, 2 * (l0.wq.bytes() + l0.wk.bytes() + l0.wv.bytes() + l0.wo.bytes() + l0.w_gate.bytes() +
                         l0.w_up.bytes() + l0.w_down.bytes()) +
                        target->weights.output.bytes());
    auto backend = create_cpu_backend(1);
    QVERIFY(backend->narrow_drafts_above() >= (1u << 20));  // the last-level cache
    QCOMPARE(&backend->self_draft_model(*target, 2), target.get());
    backend->set_narrow_drafts_above(bytes);
    QCOMPARE(&backend->self_draft_model(*target, 2), target.get());
    backend->set_narrow_drafts_above(bytes - 1);
    QVERIFY(&backend->self_draft_model(*target, 2) != target.get());
  }

  void aCopyBeyondTheMemoryLeavesTheTargetsWeights() {
    const auto target = mid_f32_model(17);  // 5.6 MB narrowed for K = 2
    const uint64_t bytes = narrowed_prefix_bytes(*target, 2);
    QVERIFY(bytes > 4ull << 20);
    auto backend = create_cpu_backend(1);
    backend->set_narrow_drafts_above(0);
    {
      DataLimit limit(data_bytes() + kMemoryMarginBytes + bytes);  // the copy fits, the kernels' copy of it not
      QVERIFY(limit.ok());
      QCOMPARE(&backend->self_draft_model(*target, 2), target.get());
    }
    QVERIFY(&backend->self_draft_model(*target, 2) != target.get());
  }

  void draftsThroughTheCopyKeepTheTargetsOutput_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("drafter");
    QTest::addColumn<int>("n_seqs");
    QTest::newRow("random f16 layers:2 N=1") << "random" << "layers:2" << 1;
    QTest::newRow("random f16 layers:2 N=3") << "random" << "layers:2" << 3;
    QTest::newRow("demo target layers:1 N=1") << "demo" << "layers:1" << 1;
    QTest::newRow("demo target layers:2 N=4") << "demo" << "layers:2" << 4;
    QTest::newRow("demo target layers:3 N=2") << "demo" << "layers:3" << 2;
  }
  // Greedy decoding with layers:K through the narrowed copy gives plain greedy decoding's
  // tokens, on random weights and on the demo target (real weights, F16), and the copy
  // proposes tokens the target accepts.
  void draftsThroughTheCopyKeepTheTargetsOutput() {
    QFETCH(QString, model);
    QFETCH(QString, drafter);
    QFETCH(int, n_seqs);
    auto backend = create_cpu_backend(2, best_simd_level(), true);
    backend->set_narrow_drafts_above(0);
    std::shared_ptr<const Model> target;
    std::vector<int> prompt;
    if (model == "demo") {
      target = load_model(SPECULA_SOURCE_DIR "/resources/models/specula-demo-target.gguf");
      prompt = target->tokenizer->encode("def count_vowels(text):\n    \"\"\"Return how many vowels text has.\"\"\"\n", true);
    } else {
      target = make_random_model(small_config(), TensorType::F16, 18, 1);
      prompt = {1, 17, 200, 33, 17, 200, 5};
    }
    DecodeOptions o;
    o.n_seqs = n_seqs;
    o.max_new_tokens = 48;
    const int tokens = decode_cache_tokens(static_cast<int>(prompt.size()), target->config.context_length, o);
    const auto run = [&](const std::string& kind) {
      auto cache = backend->create_cache(*target, tokens);
      auto draft = create_drafter(kind, *backend, *target, nullptr, o.sampling, o.n_seqs, tokens);
      auto policy = create_draft_policy("fixed:3", o.n_seqs, *backend, *target, *draft, o.sampling);
      if (kind != "none") {
        // the drafter runs the narrowed copy, not the target
        const Model* drafted = draft->forward_model();
        if (drafted == target.get() || drafted->weights.output.type != TensorType::Q4_0) {
          throw std::logic_error("the draft does not run the narrowed copy");
        }
      }
      return decode(*backend, *target, *cache, *draft, *policy, prompt, o);
    };
    const DecodeResult plain = run("none");
    const DecodeResult spec = run(drafter.toStdString());
    QCOMPARE(spec.seqs.size(), plain.seqs.size());
    int accepted = 0;
    for (size_t i = 0; i < plain.seqs.size(); ++i) {
      QCOMPARE(spec.seqs[i].tokens, plain.seqs[i].tokens);
      accepted += spec.seqs[i].accepted;
    }
    QVERIFY(accepted > 0);
  }
};

QTEST_APPLESS_MAIN(TestModelPrefix)
#include "test_model_prefix.moc"
