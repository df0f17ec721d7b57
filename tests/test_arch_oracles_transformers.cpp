// The starcoder2, gemma3 and qwen3moe forward passes against Hugging Face transformers, on
// the tiny random models of tests/data/arch_oracles_transformers (made by
// tools/oracles/arch_oracles_transformers.py from Starcoder2ForCausalLM, Gemma3ForCausalLM
// and Qwen3MoeForCausalLM, written by the `gguf` package as llama.cpp's converter writes
// them): every position's argmax and the last position's logits (relative error < 1e-4) of
// fixed sequences, the longer one past the sliding window of 8, and 32 greedy tokens after
// a prompt of 8, at every SIMD level, as read and as the engine's own f32 GGUF of each;
// greedy speculative decoding (none, n-gram, layers:1; N = 1, 4, 8) equal to plain greedy;
// what starcoder2 files say and what malformed ones are told.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "compute/backend.h"
#include "decode/decoder.h"
#include "logit_error.h"
#include "oracle_forward.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/model_export.h"
#include "shared_data.h"

using namespace specula;
using namespace specula::test;

namespace {

const std::string kDataDir = specula::test::testDataDir().toStdString() + "/arch_oracles_transformers/";
const char* const kModels[] = {"starcoder2", "starcoder2-full", "gemma3", "qwen3moe"};

// A copy of a GGUF file with `change` applied to its metadata (keys it returns false for
// are dropped), the tensors unchanged.
void rewrite_metadata(const std::string& in, const std::string& out,
                      const std::function<bool(const std::string&, GgufValue&)>& change,
                      const std::vector<std::pair<std::string, GgufValue>>& extra = {}) {
  const GgufFile f = GgufFile::open(in);
  GgufWriter w;
  for (auto [key, value] : f.metadata) {
    if (change(key, value)) w.set(key, value);
  }
  for (const auto& [key, value] : extra) w.set(key, value);
  for (const GgufTensorInfo& t : f.tensors) {
    w.add_tensor(t.name, t.type, t.shape, [&t](uint8_t* dst) { std::memcpy(dst, t.data, t.bytes); });
  }
  w.write(out);
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

class TestArchOraclesTransformers : public QObject {
  Q_OBJECT

  nlohmann::json reference_ = load_oracle_reference("arch_oracles_transformers");
  QTemporaryDir tmp_;

  const nlohmann::json& model_reference(const std::string& name) { return reference_["models"][name]; }

 private slots:
  // What each file says about its architecture.
  void configurations() {
    for (const char* name : {"starcoder2", "starcoder2-full"}) {
      const auto m = load_model(kDataDir + name + ".gguf");
      const ModelConfig& c = m->config;
      const bool windowed = std::string(name) == "starcoder2";
      QCOMPARE(c.architecture, std::string("starcoder2"));
      QCOMPARE(c.rope_style, RopeStyle::Halves);
      QCOMPARE(c.norm, NormKind::Layer);
      QCOMPARE(c.activation, Activation::GeluTanh);
      QVERIFY(!c.gated_feed_forward);
      QCOMPARE(c.norm_eps, 1e-5f);
      QCOMPARE(c.rope_theta, windowed ? 10000.0f : 100000.0f);
      QCOMPARE(c.sliding_window, windowed ? 8 : 0);
      for (int l = 0; l < c.n_layers; ++l) QCOMPARE(c.sliding_layer(l), windowed);
      QCOMPARE(m->tied_output(), windowed);
      for (const LayerWeights& L : m->weights.layers) {
        QVERIFY(L.w_gate.empty());
        for (const TensorView* v : {&L.attn_norm_bias, &L.ffn_norm_bias, &L.bq, &L.bk, &L.bv, &L.bo, &L.b_up, &L.b_down}) {
          QVERIFY(!v->empty());
          QCOMPARE(v->type, TensorType::F32);
        }
        QCOMPARE(L.b_up.cols, int64_t(64));
        QCOMPARE(L.matrices().size(), size_t(6));  // q, k, v, o, up, down
      }
      QVERIFY(!m->weights.final_norm_bias.empty());
    }
    const auto gemma = load_model(kDataDir + "gemma3.gguf");
    QCOMPARE(gemma->config.sliding_window, 8);
    for (int l = 0; l < 6; ++l) QCOMPARE(gemma->config.sliding_layer(l), l != 5);
    QCOMPARE(gemma->config.rope_theta, 1e6f);
    const auto moe = load_model(kDataDir + "qwen3moe.gguf");
    QCOMPARE(moe->config.n_experts, 8);
    QCOMPARE(moe->config.n_experts_used, 2);
    QCOMPARE(moe->config.hidden_dim, 16);
  }

  void matchesTransformers_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("simd");
    for (SimdLevel level : testable_simd_levels()) {
      for (const char* name : kModels) QTest::addRow("%s %s", simd_name(level).data(), name) << name << int(level);
    }
  }

  // Logits and greedy generation past the sliding window, as read and as the engine's own
  // f32 GGUF of the same (which must keep the window, LayerNorm biases and the missing gate).
  void matchesTransformers() {
    QFETCH(QString, name);
    QFETCH(int, simd);
    const nlohmann::json& reference = model_reference(name.toStdString());
    const auto loaded = load_model(kDataDir + name.toStdString() + ".gguf");
    const std::string f32_path = tmp_.filePath(name + QString::number(simd) + ".f32.gguf").toStdString();
    write_gguf_model(*loaded, f32_path, TensorType::F32);
    const auto f32 = load_model(f32_path);
    QCOMPARE(f32->weights.layers[0].wq.type, TensorType::F32);
    QCOMPARE(f32->config.sliding_window, loaded->config.sliding_window);
    std::unique_ptr<Backend> backend = create_cpu_backend(2, SimdLevel(simd));
    for (const auto& model : {loaded, f32}) {
      double error = 0.0;
      try {
        error = last_logits_error(*backend, *model, reference, true, "transformers");
      } catch (const std::exception& e) {
        QFAIL(qPrintable(QString::fromStdString(model->path + ": " + e.what())));
      }
      qInfo("%s (%s) on %s: relative error %.3g", qPrintable(name), model == loaded ? "as read" : "f32 conversion",
            simd_name(SimdLevel(simd)).data(), error);
      QVERIFY2(error < 1e-4, qPrintable(QString::number(error)));
      QCOMPARE(greedy_tokens(*backend, *model, reference["prompt"].get<std::vector<int32_t>>(), 32),
               reference["greedy"].get<std::vector<int>>());
    }
  }

  void speculativeEqualsGreedy_data() {
    QTest::addColumn<QString>("name");
    for (const char* name : kModels) QTest::newRow(name) << name;
  }

  // Greedy speculative decoding equals transformers' greedy tokens with no drafter, n-gram
  // drafts and a draft of the first layer, for 1, 4 and 8 candidates: verification batches
  // put drafted tokens through sliding windows, LayerNorm and experts together.
  void speculativeEqualsGreedy() {
    QFETCH(QString, name);
    const auto target = load_model(kDataDir + name.toStdString() + ".gguf");
    const nlohmann::json& reference = model_reference(name.toStdString());
    const std::vector<int> prompt = reference["prompt"].get<std::vector<int>>();
    const std::vector<int> expected = reference["greedy"].get<std::vector<int>>();
    std::unique_ptr<Backend> backend = create_cpu_backend(2);
    for (const char* kind : {"none", "ngram", "layers:1"}) {
      for (const int n : {1, 4, 8}) {
        DecodeOptions o;
        o.n_seqs = n;
        o.max_new_tokens = 32;
        const int tokens = decode_cache_tokens(static_cast<int>(prompt.size()), target->config.context_length, o);
        std::unique_ptr<KvCache> cache = backend->create_cache(*target, tokens);
        std::unique_ptr<Drafter> drafter = create_drafter(kind, *backend, *target, nullptr, o.sampling, n, tokens);
        std::unique_ptr<DraftPolicy> policy = create_draft_policy("fixed:4", n);
        const DecodeResult result = decode(*backend, *target, *cache, *drafter, *policy, prompt, o);
        QCOMPARE(result.seqs.size(), size_t(n));
        for (const SequenceOutput& s : result.seqs) QCOMPARE(s.tokens, expected);
        if (std::string(kind) == "layers:1") QVERIFY(result.seqs[0].proposed > 0);
      }
    }
  }

  // starcoder2 files that ask for what the engine does not do, or lack what it needs, are
  // refused with the reason; models no loader makes fail validation.
  void refusesWhatItCannotRun() {
    const std::string source = kDataDir + "starcoder2.gguf";
    const std::string no_eps = tmp_.filePath("no-eps.gguf").toStdString();
    rewrite_metadata(source, no_eps, [](const std::string& key, GgufValue&) {
      return key != "starcoder2.attention.layer_norm_epsilon";
    });
    const std::string eps = load_error(no_eps);
    QVERIFY2(eps.find("missing key 'starcoder2.attention.layer_norm_epsilon'") != std::string::npos, eps.c_str());

    const std::string scaled = tmp_.filePath("scaled.gguf").toStdString();
    rewrite_metadata(source, scaled, [](const std::string&, GgufValue&) { return true; },
                     {{"starcoder2.rope.scaling.type", GgufValue::string("linear")},
                      {"starcoder2.rope.scaling.factor", GgufValue::f32(4.0f)}});
    const std::string scaling = load_error(scaled);
    QVERIFY2(scaling.find("rope scaling together with a sliding window") != std::string::npos, scaling.c_str());

    const std::string unknown = tmp_.filePath("starcoder.gguf").toStdString();
    rewrite_metadata(source, unknown, [](const std::string& key, GgufValue& value) {
      if (key == "general.architecture") value = GgufValue::string("starcoder");
      return true;
    });
    const std::string arch = load_error(unknown);
    QVERIFY2(arch.find("architecture 'starcoder' is not supported (only llama, qwen2, qwen3, qwen3moe, gemma3, gpt-oss, starcoder2") !=
                 std::string::npos,
             arch.c_str());

    Model model = *load_model(source);
    model.config.norm = NormKind::Rms;  // norm biases without a LayerNorm
    QVERIFY_THROWS_EXCEPTION(ModelError, validate_model(model));
    model = *load_model(source);
    model.weights.layers[1].w_gate = model.weights.layers[1].w_up;  // a gate the configuration does not have
    QVERIFY_THROWS_EXCEPTION(ModelError, validate_model(model));
    model = *load_model(source);
    model.weights.layers[0].b_up = model.weights.layers[0].b_down;  // 32 wide where 64 are needed
    QVERIFY_THROWS_EXCEPTION(ModelError, validate_model(model));
  }
};

QTEST_GUILESS_MAIN(TestArchOraclesTransformers)
#include "test_arch_oracles_transformers.moc"
