// The qwen3moe forward (qwen3 attention, a routed mixture of experts) against an independent
// float64 numpy forward, on the tiny random models of tests/data/qwen3moe (made by
// tools/oracles/qwen3moe_oracle.py, written by the `gguf` package as llama.cpp's converter
// writes Qwen3MoeForCausalLM: 8 experts of width 32, 2 used per token, 3-D ffn_*_exps
// tensors): every position's logits of fixed sequences and 32 greedy tokens, at every SIMD
// level, for the f32 file (within 1e-4) and its Q8_0 copy made by gguf's quantizer; greedy
// speculative decoding (n-gram, layers:1 and model drafts, N = 1, 4, 8) equal to plain
// greedy; ties among router probabilities; expert tensors of every type the engine
// reads, written and read back; what a malformed file is told.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "compute/backend.h"
#include "decode/decoder.h"
#include "logit_error.h"
#include "oracle_forward.h"
#include "model/model.h"
#include "model/model_export.h"
#include "model/random_model.h"
#include "shared_data.h"

using namespace specula;
using namespace specula::test;

namespace {

const std::string kDataDir = specula::test::testDataDir().toStdString() + "/qwen3moe/";
const char* const kFiles[] = {"qwen3moe-f32.gguf", "qwen3moe-q8_0.gguf"};

// Largest logit error, relative to the row's largest |logit|, of the Q8_0 file against
// float64 on its own dequantized weights: the kernels round activations to 8 bits per
// block of 32 (measured 3.1e-2 at worst, 1.2e-2 at best over the 29 positions: this tiny
// random model amplifies what it is fed; test_arch_oracles allows 5e-2 for its Q8_0
// copies). With the matrices widened to f32 the same file is within 1e-4.
constexpr double kQ8Tolerance = 5e-2;

// The gap between the two largest of a row, relative to its largest |value|.
double top_two_gap(const std::vector<double>& row) {
  std::vector<double> sorted = row;
  std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
  double scale = 0.0;
  for (double v : row) scale = std::max(scale, std::fabs(v));
  return (sorted[0] - sorted[1]) / scale;
}

// The worst relative error over every position of the reference's cases; throws on an
// argmax that differs where the reference's two best are further apart than
// `skip_argmax_within` (relative to its largest |logit|).
double check_cases(Backend& backend, const Model& model, const nlohmann::json& reference, double skip_argmax_within) {
  double worst = 0.0;
  const int vocab = model.config.vocab_size;
  for (const nlohmann::json& c : reference["cases"]) {
    const std::vector<int32_t> tokens = c["tokens"].get<std::vector<int32_t>>();
    const std::vector<int> argmax = c["argmax"].get<std::vector<int>>();
    const std::vector<float> logits = all_logits(backend, model, tokens);
    for (size_t t = 0; t < tokens.size(); ++t) {
      const float* row = logits.data() + t * vocab;
      const std::vector<double> want = c["logits"][t].get<std::vector<double>>();
      if (static_cast<int>(want.size()) != vocab) throw std::runtime_error("reference vocabulary differs");
      worst = std::max(worst, relative_error(row, want));
      const int engine = static_cast<int>(std::max_element(row, row + vocab) - row);
      if (engine != argmax[t] && top_two_gap(want) > skip_argmax_within) {
        throw std::runtime_error("position " + std::to_string(t) + ": argmax " + std::to_string(engine) +
                                 ", numpy " + std::to_string(argmax[t]));
      }
    }
  }
  return worst;
}

std::string load_error(const std::string& path) {
  try {
    load_model(path);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "loaded";
}

}  // namespace

class TestQwen3MoeReference : public QObject {
  Q_OBJECT

  nlohmann::json reference_ = load_oracle_reference("qwen3moe");
  QTemporaryDir tmp_;

 private slots:
  // What the files say: qwen3 attention (q 128 wide in a 64-wide model, q/k norms), 8
  // experts of 32 per layer, 2 used, weights renormalised; the Q8_0 file's router f32.
  void configuration() {
    for (const char* file : kFiles) {
      const auto m = load_model(kDataDir + file);
      const ModelConfig& c = m->config;
      QCOMPARE(c.architecture, std::string("qwen3moe"));
      QCOMPARE(c.rope_style, RopeStyle::Halves);
      QCOMPARE(c.n_experts, reference_["n_experts"].get<int>());
      QCOMPARE(c.n_experts_used, reference_["n_experts_used"].get<int>());
      QCOMPARE(c.hidden_dim, reference_["expert_feed_forward_length"].get<int>());
      QVERIFY(c.expert_weights_norm);
      QCOMPARE(c.q_dim(), 128);
      const bool q8 = std::string(file).find("q8_0") != std::string::npos;
      for (const LayerWeights& L : m->weights.layers) {
        QVERIFY(L.w_gate.empty() && L.w_up.empty() && L.w_down.empty());
        QVERIFY(!L.q_norm.empty() && !L.k_norm.empty());
        QCOMPARE(L.router.type, TensorType::F32);
        QCOMPARE(L.expert_gate.size(), size_t(8));
        QCOMPARE(L.expert_down[7].rows, int64_t(64));
        QCOMPARE(L.expert_down[7].cols, int64_t(32));
        QCOMPARE(L.expert_up[3].type, q8 ? TensorType::Q8_0 : TensorType::F32);
      }
      // the router and 3 matrices of 8 experts after q, k, v and o
      QCOMPARE(m->weights.layers[0].matrices().size(), size_t(4 + 1 + 3 * 8));
    }
  }

  void logitsMatchNumpy_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<int>("simd");
    for (SimdLevel level : testable_simd_levels()) {
      for (const char* file : kFiles) QTest::addRow("%s %s", simd_name(level).data(), file) << file << int(level);
    }
  }

  // Every position's logits and argmax, and 32 greedy tokens through the cache, at each
  // level: the f32 file within 1e-4; the Q8_0 file within kQ8Tolerance (argmaxes where the
  // reference's best two are further apart than twice that), and widened to f32 within 1e-4
  // with every argmax and greedy token equal.
  void logitsMatchNumpy() {
    QFETCH(QString, file);
    QFETCH(int, simd);
    const nlohmann::json& reference = reference_["files"][file.toStdString()];
    const auto loaded = load_model(kDataDir + file.toStdString());
    const bool q8 = file.contains("q8_0");
    const Model wide = widened(*loaded);
    std::unique_ptr<Backend> backend = create_cpu_backend(2, SimdLevel(simd));
    for (const Model* model : {loaded.get(), &wide}) {
      const bool quantized = q8 && model == loaded.get();
      if (!q8 && model == &wide) break;  // the f32 file is its own widening
      double error = 0.0;
      try {
        error = check_cases(*backend, *model, reference, quantized ? 2 * kQ8Tolerance : 0.0);
      } catch (const std::exception& e) {
        QFAIL(e.what());
      }
      qInfo("%s%s on %s: relative error %.3g", qPrintable(file), model == &wide ? " widened to f32" : "",
            simd_name(SimdLevel(simd)).data(), error);
      QVERIFY2(error < (quantized ? kQ8Tolerance : 1e-4), qPrintable(QString::number(error)));
      if (quantized) continue;
      QCOMPARE(greedy_tokens(*backend, *model, reference["prompt"].get<std::vector<int32_t>>(), 32),
               reference["greedy"].get<std::vector<int>>());
    }
  }

  // Greedy speculative decoding equals the reference's greedy tokens for the n-gram,
  // layers:1 and model drafters (the Q8_0 file drafting for the f32 one), for 1, 4 and 8
  // candidates: verification batches route many tokens, drafted and accepted ones, through
  // the experts together.
  void speculativeEqualsGreedy() {
    const auto target = load_model(kDataDir + kFiles[0]);
    const auto q8 = load_model(kDataDir + kFiles[1]);
    const nlohmann::json& reference = reference_["files"][kFiles[0]];
    const std::vector<int> prompt = reference["prompt"].get<std::vector<int>>();
    const std::vector<int> expected = reference["greedy"].get<std::vector<int>>();
    std::unique_ptr<Backend> backend = create_cpu_backend(2);
    for (const char* kind : {"ngram", "layers:1", "model"}) {
      const std::shared_ptr<const Model> draft = std::string(kind) == "model" ? q8 : nullptr;
      for (const int n : {1, 4, 8}) {
        DecodeOptions o;
        o.n_seqs = n;
        o.max_new_tokens = 32;
        const int tokens = decode_cache_tokens(static_cast<int>(prompt.size()), target->config.context_length, o);
        std::unique_ptr<KvCache> cache = backend->create_cache(*target, tokens);
        std::unique_ptr<Drafter> drafter = create_drafter(kind, *backend, *target, draft, o.sampling, n, tokens);
        std::unique_ptr<DraftPolicy> policy = create_draft_policy("fixed:4", n);
        const DecodeResult result = decode(*backend, *target, *cache, *drafter, *policy, prompt, o);
        QCOMPARE(result.seqs.size(), size_t(n));
        for (const SequenceOutput& s : result.seqs) QCOMPARE(s.tokens, expected);
        qInfo("%s, N = %d: %d of %d drafted tokens accepted", kind, n, result.seqs[0].accepted, result.seqs[0].proposed);
        QVERIFY(result.seqs[0].proposed > 0);
      }
    }
  }

  // Equal router probabilities go to the lower expert ids (as a stable sort orders them; ggml
  // and torch promise no order for equal values): with every router
  // logit 0, each token takes experts 0 and 1 at weight 1/2, so replacing experts 2-7 changes
  // nothing and replacing expert 0 changes the logits.
  void tiesGoToTheLowerExpertIds() {
    const auto loaded = load_model(kDataDir + kFiles[0]);
    Model tied = *loaded;
    auto zeros = std::make_shared<std::vector<float>>(static_cast<size_t>(8 * tied.config.dim), 0.0f);
    tied.storage.push_back(zeros);
    for (LayerWeights& l : tied.weights.layers) l.router = TensorView{TensorType::F32, tied.config.dim, 8, zeros->data()};
    Model others_replaced = tied, first_replaced = tied;
    for (size_t l = 0; l < tied.weights.layers.size(); ++l) {
      for (auto experts : {&LayerWeights::expert_gate, &LayerWeights::expert_up, &LayerWeights::expert_down}) {
        const std::vector<TensorView>& original = tied.weights.layers[l].*experts;
        std::vector<TensorView>& others = others_replaced.weights.layers[l].*experts;
        for (size_t e = 2; e < 8; ++e) others[e] = original[9 - e];  // 2..7 become 7..2
        std::vector<TensorView>& first = first_replaced.weights.layers[l].*experts;
        first[0] = first[5];
      }
    }
    std::unique_ptr<Backend> backend = create_cpu_backend(2);
    const std::vector<int32_t> tokens{4, 8, 15, 16, 23, 42};
    const auto logits = [&](const Model& m) {
      std::unique_ptr<KvCache> cache = backend->create_cache(m, 8);
      RaggedBatch batch;
      batch.add(cache->create(), tokens, true);
      std::vector<float> out;
      backend->forward(m, *cache, batch, out);
      return out;
    };
    const std::vector<float> reference = logits(tied);
    QVERIFY(logits(others_replaced) == reference);
    QVERIFY(logits(first_replaced) != reference);
    // NaN router logits still pick experts (the lowest ids) and give NaN, not a stray index
    auto nans = std::make_shared<std::vector<float>>(zeros->size(), std::numeric_limits<float>::quiet_NaN());
    tied.storage.push_back(nans);
    for (LayerWeights& l : tied.weights.layers) l.router.data = nans->data();
    const std::vector<float> nan = logits(tied);
    QVERIFY(std::all_of(nan.begin(), nan.end(), [](float v) { return std::isnan(v); }));
  }

  void expertTensorsOfEveryType_data() {
    QTest::addColumn<int>("type");
    for (TensorType type : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0, TensorType::Q4_0,
                            TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q2_K, TensorType::Q4_K,
                            TensorType::Q5_K, TensorType::Q6_K, TensorType::IQ4_XS, TensorType::IQ4_NL,
                            TensorType::MXFP4}) {
      QTest::addRow("%s", type_traits(type).name.data()) << int(type);
    }
  }

  // Expert tensors of each type, written as 3-D GGUF tensors and read back: each expert's
  // view holds its own rows, byte for byte those of the model written, and the file's forward
  // gives the same logits.
  void expertTensorsOfEveryType() {
    QFETCH(int, type);
    const TensorType t = TensorType(type);
    ModelConfig config = random_model_config("tiny-qwen3moe");
    config.n_layers = 1;
    if (type_traits(t).block_elements == 256) {  // whole 256-value blocks: q 4 x 64 wide
      config.dim = config.hidden_dim = 256;
      config.explicit_head_dim = 64;
    }
    const auto expected = make_random_model(config, t, 11);
    // the types quantize_row writes are written from f32 values, as a converter does (Q5_0
    // then really is Q5_0 in the file); the others as the random model holds them
    bool writable = true;
    try {
      std::vector<uint8_t> block(row_bytes(t, 256));
      const std::vector<float> values(256, 0.5f);
      quantize_row(t, values.data(), block.data(), 256);
    } catch (const std::invalid_argument&) {
      writable = false;
    }
    const auto source = writable ? make_random_model(config, TensorType::F32, 11) : expected;
    const std::string path = tmp_.filePath(QString("experts-%1.gguf").arg(type_traits(t).name.data())).toStdString();
    write_gguf_model(*source, path, t);
    const auto loaded = load_model(path);
    QCOMPARE(loaded->config.n_experts, 8);
    const LayerWeights& want = expected->weights.layers[0];
    const LayerWeights& got = loaded->weights.layers[0];
    for (const auto& [a, b] : {std::pair{&want.expert_gate, &got.expert_gate}, {&want.expert_up, &got.expert_up},
                               {&want.expert_down, &got.expert_down}}) {
      QCOMPARE(b->size(), size_t(8));
      for (size_t e = 0; e < 8; ++e) {
        const TensorView& x = (*a)[e];
        const TensorView& y = (*b)[e];
        QCOMPARE(y.type, x.type);
        QCOMPARE(y.rows, x.rows);
        QCOMPARE(y.cols, x.cols);
        QVERIFY2(std::memcmp(x.data, y.data, x.bytes()) == 0, qPrintable(QString("expert %1").arg(e)));
      }
    }
    // the same model but for the router, which the file keeps in the type it was made in
    Model same = *expected;
    same.weights.layers[0].router = got.router;
    same.storage.insert(same.storage.end(), loaded->storage.begin(), loaded->storage.end());
    std::unique_ptr<Backend> backend = create_cpu_backend(2);
    const std::vector<int32_t> tokens{1, 5, 9, 60, 2, 33, 17, 80};
    std::vector<float> logits[2];
    for (int i = 0; i < 2; ++i) {
      const Model& m = i == 0 ? same : *loaded;
      std::unique_ptr<KvCache> cache = backend->create_cache(m, 16);
      RaggedBatch batch;
      batch.add(cache->create(), tokens, true);
      backend->forward(m, *cache, batch, logits[i]);
    }
    QVERIFY(std::all_of(logits[1].begin(), logits[1].end(), [](float v) { return std::isfinite(v); }));
    QVERIFY(logits[0].size() == logits[1].size() &&
            std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)) == 0);
  }

  // A file's experts that do not add up are refused with the reason.
  void refusesInconsistentExperts() {
    Model model = *load_model(kDataDir + kFiles[0]);
    model.config.n_experts_used = 9;
    const std::string too_many = tmp_.filePath("too-many.gguf").toStdString();
    write_gguf_model(model, too_many, TensorType::F32);
    const std::string error = load_error(too_many);
    QVERIFY2(error.find("expert_used_count 9 exceeds expert_count 8") != std::string::npos, error.c_str());

    model = *load_model(kDataDir + kFiles[0]);
    model.config.n_experts = 4;  // the tensors hold 8
    const std::string fewer = tmp_.filePath("fewer.gguf").toStdString();
    write_gguf_model(model, fewer, TensorType::F32);
    const std::string shape = load_error(fewer);
    QVERIFY2(shape.find("ffn_gate_inp.weight") != std::string::npos || shape.find("has shape") != std::string::npos,
             shape.c_str());

    model = *load_model(kDataDir + kFiles[0]);
    model.weights.layers[1].expert_up.pop_back();
    QVERIFY_THROWS_EXCEPTION(ModelError, validate_model(model));
    model = *load_model(kDataDir + kFiles[0]);
    model.weights.layers[0].router = {};
    QVERIFY_THROWS_EXCEPTION(ModelError, validate_model(model));
  }
};

QTEST_GUILESS_MAIN(TestQwen3MoeReference)
#include "test_qwen3moe_reference.moc"
