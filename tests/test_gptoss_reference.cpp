// The gpt-oss forward (q/k/v/o biases, attention sinks, alternating sliding-window and full
// layers, YaRN RoPE, a biased router with a softmax over its top k, biased experts with the
// clamped SwiGLU) against Hugging Face transformers' GptOssForCausalLM, on the tiny random
// model of tests/data/gptoss (made by tools/oracles/gptoss_oracle.py, written with the
// `gguf` package as llama.cpp's converter writes it: f32, f16, and MXFP4 experts). Every
// position's argmax and the last position's logits of fixed sequences (20 positions, the
// window 8) and 32 greedy tokens, at every SIMD level; each gpt-oss stage shown to matter;
// greedy speculative decoding equal to plain greedy; what the GPU and a malformed file are told.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "compute/backend.h"
#include "compute/device_plan.h"
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

const std::string kDataDir = specula::test::testDataDir().toStdString() + "/gptoss/";
const char* const kFiles[] = {"gptoss-f32.gguf", "gptoss-f16.gguf", "gptoss-mxfp4.gguf"};

// The MXFP4 experts are computed by their own kernels (every value kept: widened to f32 the
// file is within 1e-4 of its reference), which round the experts' inputs to 8 bits per
// block of 32, as Q8_0's do. On this tiny model that moves the 20-token case's last logits by 0.273 of the largest
// (a router pick changes): a float64 numpy forward that rounds the experts' inputs the same
// way gives the same 0.273 (2.8e-2 on the 5-token case), so the bound only guards the scale.
constexpr double kQuantizedTolerance = 0.35;

}  // namespace

class TestGptOssReference : public QObject {
  Q_OBJECT

  nlohmann::json reference_ = load_oracle_reference("gptoss");

  const nlohmann::json& file_reference(const char* file) { return reference_["files"][file]; }

 private slots:
  // What the files say, read as llama.cpp reads gpt-oss.
  void configuration() {
    for (const char* file : kFiles) {
      const auto m = load_model(kDataDir + file);
      const ModelConfig& c = m->config;
      QCOMPARE(c.architecture, std::string("gpt-oss"));
      QCOMPARE(c.rope_style, RopeStyle::Halves);
      QCOMPARE(c.n_experts, 8);
      QCOMPARE(c.n_experts_used, 3);
      QCOMPARE(c.hidden_dim, 32);
      QCOMPARE(c.head_dim(), 16);
      QCOMPARE(c.expert_gating, ExpertGating::TopKThenSoftmax);
      QCOMPARE(c.activation, Activation::SwigluClamped);
      QCOMPARE(c.sliding_window, reference_["sliding_window"].get<int>());
      // layer 0 slides, layer 1 sees everything, and so on (transformers' layer_types)
      QVERIFY(c.sliding_layer(0) && !c.sliding_layer(1) && c.sliding_layer(2) && !c.sliding_layer(3));
      QCOMPARE(c.rope_yarn_factor, 32.0f);
      QCOMPARE(c.rope_yarn_original_context, 4096);
      QVERIFY(std::fabs(c.rope_magnitude() - (0.1 * std::log(32.0) + 1.0)) < 1e-6);
      QVERIFY(c.rope_frequencies(true) == c.rope_frequencies(false));  // sliding layers rotate alike
      QVERIFY(!m->tied_output());
      for (const LayerWeights& L : m->weights.layers) {
        QCOMPARE(L.attn_sinks.cols, int64_t{4});
        QVERIFY(!L.bq.empty() && !L.bk.empty() && !L.bv.empty() && !L.bo.empty());
        QVERIFY(!L.router_bias.empty() && !L.expert_gate_bias.empty() && !L.expert_up_bias.empty() &&
                !L.expert_down_bias.empty());
        QVERIFY(L.attn_post_norm.empty() && !L.ffn_norm.empty());  // post_attention_norm is the feed-forward's input norm
        QCOMPARE(L.expert_gate.size(), size_t{8});
      }
      // MXFP4 experts are computed as MXFP4 (kernels of their own); the f16 file keeps f16
      const TensorType expert_type = m->weights.layers[0].expert_gate[0].type;
      QCOMPARE(expert_type, std::string(file).find("mxfp4") != std::string::npos ? TensorType::MXFP4
                            : std::string(file).find("f16") != std::string::npos ? TensorType::F16
                                                                                   : TensorType::F32);
      // its tokenizer: the GPT-2 style byte-level vocabulary the oracle wrote
      QVERIFY(m->tokenizer != nullptr);
      QCOMPARE(c.vocab_size, 272);
    }
  }

  void matchesTransformers_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<int>("simd");
    for (SimdLevel level : testable_simd_levels()) {
      for (const char* file : kFiles) QTest::addRow("%s %s", simd_name(level).data(), file) << file << int(level);
    }
  }

  // Logits within 1e-4 (relative to the row's largest) and every argmax, and 32 greedy tokens
  // through the cache (40 positions, five windows), at each SIMD level. The MXFP4 file widened
  // to f32 within 1e-4 with every argmax and token, and as read within kQuantizedTolerance.
  void matchesTransformers() {
    QFETCH(QString, file);
    QFETCH(int, simd);
    const nlohmann::json& reference = reference_["files"][file.toStdString()];
    const auto loaded = load_model(kDataDir + file.toStdString());
    const bool quantized = file.contains("mxfp4");
    const Model wide = widened(*loaded);
    std::unique_ptr<Backend> backend = create_cpu_backend(2, SimdLevel(simd));
    for (const Model* model : {&wide, loaded.get()}) {
      if (!quantized && model == &wide) continue;
      const bool rounded = quantized && model == loaded.get();
      double error = 0.0;
      try {
        error = last_logits_error(*backend, *model, reference, !rounded, "transformers");
      } catch (const std::exception& e) {
        QFAIL(e.what());
      }
      qInfo("%s%s on %s: relative error %.3g", qPrintable(file), model == &wide ? " widened to f32" : "",
            simd_name(SimdLevel(simd)).data(), error);
      QVERIFY2(error < (rounded ? kQuantizedTolerance : 1e-4), qPrintable(QString::number(error)));
      if (rounded) continue;
      QCOMPARE(greedy_tokens(*backend, *model, reference["prompt"].get<std::vector<int32_t>>(), 32),
               reference["greedy"].get<std::vector<int>>());
    }
  }

  // Each of gpt-oss's stages matters on this model: leaving one out moves the logits far
  // past the tolerance above, so the match is not one the stage could miss.
  void everyStageMatters() {
    const auto loaded = load_model(kDataDir + kFiles[0]);
    const nlohmann::json& reference = file_reference(kFiles[0]);
    std::unique_ptr<Backend> backend = create_cpu_backend(2);
    QVERIFY(last_logits_error(*backend, *loaded, reference, false, "transformers") < 1e-4);
    const std::vector<std::pair<const char*, std::function<void(Model&)>>> changes = {
        {"no sinks", [](Model& m) { for (auto& L : m.weights.layers) L.attn_sinks = {}; }},
        {"no sliding window", [](Model& m) { m.config.sliding_window = 0; }},
        {"no yarn", [](Model& m) { m.config.rope_yarn_factor = 1.0f; }},
        {"unclamped SwiGLU as SiLU", [](Model& m) { m.config.activation = Activation::Silu; }},
        {"softmax before top k", [](Model& m) { m.config.expert_gating = ExpertGating::SoftmaxThenTopK; }},
        {"no router bias", [](Model& m) { for (auto& L : m.weights.layers) L.router_bias = {}; }},
        {"no expert biases", [](Model& m) {
           for (auto& L : m.weights.layers) L.expert_gate_bias = L.expert_up_bias = L.expert_down_bias = {};
         }},
    };
    for (const auto& [what, change] : changes) {
      Model changed = *loaded;
      change(changed);
      const double error = last_logits_error(*backend, changed, reference, false, "transformers");
      qInfo("%s: relative error %.3g", what, error);
      QVERIFY2(error > 1e-2, what);
    }
  }

  // A token's logits do not depend on the batch: two sequences in one ragged batch give the
  // bits each gives alone (they share experts and the sliding window's masking).
  void batchInvariant() {
    const auto model = load_model(kDataDir + kFiles[1]);
    std::unique_ptr<Backend> backend = create_cpu_backend(2);
    const std::vector<int32_t> a = reference_["files"][kFiles[1]]["cases"][1]["tokens"].get<std::vector<int32_t>>();
    const std::vector<int32_t> b(a.rbegin(), a.rend());
    std::unique_ptr<KvCache> cache = backend->create_cache(*model, 4 * static_cast<int>(a.size()));  // whole blocks for each
    RaggedBatch batch;
    batch.add(cache->create(), a, true);
    batch.add(cache->create(), b, true);
    std::vector<float> together;
    backend->forward(*model, *cache, batch, together);
    std::vector<float> alone = all_logits(*backend, *model, a);
    const std::vector<float> second = all_logits(*backend, *model, b);
    alone.insert(alone.end(), second.begin(), second.end());
    QVERIFY(together == alone);
  }

  // Greedy speculative decoding equals transformers' greedy tokens for the n-gram, layers:2
  // and model drafters (the MXFP4 file drafting for the f32 one), for 1, 4 and 8 candidates.
  void speculativeEqualsGreedy() {
    const auto target = load_model(kDataDir + kFiles[0]);
    const auto mxfp4 = load_model(kDataDir + kFiles[2]);
    const nlohmann::json& reference = file_reference(kFiles[0]);
    const std::vector<int> prompt = reference["prompt"].get<std::vector<int>>();
    const std::vector<int> expected = reference["greedy"].get<std::vector<int>>();
    std::unique_ptr<Backend> backend = create_cpu_backend(2);
    for (const char* kind : {"ngram", "layers:2", "model"}) {
      const std::shared_ptr<const Model> draft = std::string(kind) == "model" ? mxfp4 : nullptr;
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

  // The GPU backend refuses gpt-oss, naming what its kernels lack.
  void deviceRefuses() {
    const auto model = load_model(kDataDir + kFiles[1]);
    const std::string refusal = device_refusal(*model);
    for (const char* part : {"gpt-oss", "attention sinks", "YaRN", "clamped SwiGLU", "mixture of experts", "--device cpu"}) {
      QVERIFY2(refusal.find(part) != std::string::npos, refusal.c_str());
    }
  }

  // A gpt-oss file without its sinks is refused, saying so; so is writing gpt-oss as GGUF.
  void refusesMalformedFiles() {
    QTemporaryDir tmp;
    const std::string path = tmp.filePath("no-sinks.gguf").toStdString();
    {
      std::ifstream in(kDataDir + kFiles[0], std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      // rename every blk.N.attn_sinks.weight to a name the loader does not read (same length)
      for (size_t at = bytes.find("attn_sinks.weight"); at != std::string::npos; at = bytes.find("attn_sinks.weight", at)) {
        bytes.replace(at, 5, "xxxx_");
      }
      std::ofstream(path, std::ios::binary) << bytes;
    }
    try {
      load_model(path);
      QFAIL("a gpt-oss file without sinks loaded");
    } catch (const ModelError& e) {
      QVERIFY2(std::string(e.what()).find("lacks its attention sinks") != std::string::npos, e.what());
    }
    // the engine's GGUF writer would drop the sinks and biases: it refuses instead
    QVERIFY_THROWS_EXCEPTION(ModelError, write_gguf_model(*load_model(kDataDir + kFiles[0]),
                                                          tmp.filePath("copy.gguf").toStdString(), TensorType::F32));
  }
};

QTEST_GUILESS_MAIN(TestGptOssReference)
#include "test_gptoss_reference.moc"
