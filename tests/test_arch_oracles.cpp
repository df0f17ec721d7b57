// The llama (linear and llama3 RoPE scaling, attention biases), qwen2 and qwen3 forward
// passes against Hugging Face transformers, on the tiny random models of
// tests/data/arch_oracles (made by tools/oracles/arch_oracles.py): each as its Hugging Face
// directory (bf16 safetensors) and as the GGUF the `gguf` package wrote the way llama.cpp's
// converter does (f16, llama's q/k permuted, rope_freqs.weight, tied output left out).
// Every position's argmax and the last position's logits (relative error < 1e-4) of fixed
// token sequences, and 32 tokens of greedy generation, token for token; the same for the
// engine's own f32 GGUF of each; drafts of these families in speculative decoding.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "compute/backend.h"
#include "decode/decoder.h"
#include "model/model.h"
#include "logit_error.h"
#include "oracle_forward.h"
#include "model/model_export.h"
#include "shared_data.h"

using namespace specula;
using namespace specula::test;

namespace {

const std::string kDataDir = specula::test::testDataDir().toStdString() + "/arch_oracles/";

}  // namespace

class TestArchOracles : public QObject {
  Q_OBJECT

  nlohmann::json reference_ = load_oracle_reference("arch_oracles");
  QTemporaryDir tmp_;

  const nlohmann::json& model_reference(const std::string& name) { return reference_["models"][name]; }

 private slots:
  void matchesTransformers_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("file");
    for (const char* name : {"llama-linear", "llama3", "qwen2", "qwen3"}) {
      QTest::newRow((std::string(name) + " safetensors").c_str()) << name << name;
      QTest::newRow((std::string(name) + " gguf").c_str()) << name << QString(name) + ".gguf";
    }
  }

  // Logits and greedy generation, as read, and as the engine's own f32 GGUF of the same.
  void matchesTransformers() {
    QFETCH(QString, name);
    QFETCH(QString, file);
    const nlohmann::json& reference = model_reference(name.toStdString());
    const auto loaded = load_model(kDataDir + file.toStdString());
    const std::string f32_path = tmp_.filePath(file + ".f32.gguf").toStdString();
    write_gguf_model(*loaded, f32_path, TensorType::F32);
    const auto f32 = load_model(f32_path);
    QCOMPARE(f32->weights.layers[0].wq.type, TensorType::F32);
    std::unique_ptr<Backend> backend = create_cpu_backend(2);
    for (const auto& model : {loaded, f32}) {
      double error = 0.0;
      try {
        error = last_logits_error(*backend, *model, reference, true, "transformers");
      } catch (const std::exception& e) {
        QFAIL(qPrintable(QString::fromStdString(model->path + ": " + e.what())));
      }
      qInfo("%s (%s): relative error %.3g", qPrintable(name), model == loaded ? "as read" : "f32 conversion", error);
      QVERIFY2(error < 1e-4, qPrintable(QString::number(error)));
      const std::vector<int> expected = reference["greedy"].get<std::vector<int>>();
      QCOMPARE(greedy_tokens(*backend, *model, reference["prompt"].get<std::vector<int32_t>>(), 32), expected);
    }
  }

  // What each file says about its architecture, and that both formats agree on it.
  void configurations() {
    for (const char* name : {"llama-linear", "llama3", "qwen2", "qwen3"}) {
      const auto hf = load_model(kDataDir + name);
      const auto gguf = load_model(kDataDir + name + ".gguf");
      for (const auto& m : {hf, gguf}) {
        const ModelConfig& c = m->config;
        const LayerWeights& L = m->weights.layers[1];
        const std::string arch = std::string(name).substr(0, 5);
        QCOMPARE(c.architecture, arch == "llama" ? std::string("llama") : arch);
        QCOMPARE(c.rope_style, arch == "llama" ? RopeStyle::Adjacent : RopeStyle::Halves);
        QCOMPARE(c.head_dim(), std::string(name) == "qwen3" ? 16 : 8);
        QCOMPARE(c.q_dim(), std::string(name) == "qwen3" ? 64 : 32);
        QCOMPARE(c.rope_linear_factor, std::string(name) == "llama-linear" ? 4.0f : 1.0f);
        QCOMPARE(c.rope_freq_factors.size(), std::string(name) == "llama3" ? size_t{4} : size_t{0});
        QCOMPARE(m->tied_output(), std::string(name) == "llama3" || std::string(name) == "qwen2");
        QCOMPARE(!L.bq.empty() && !L.bk.empty() && !L.bv.empty(),
                 std::string(name) == "llama-linear" || std::string(name) == "qwen2");
        QCOMPARE(!L.bo.empty(), std::string(name) == "llama-linear");
        QCOMPARE(!L.q_norm.empty() && !L.k_norm.empty(), std::string(name) == "qwen3");
      }
      // HF's llama3 factors, computed by the loader, and the converter's rope_freqs.weight
      for (size_t i = 0; i < gguf->config.rope_freq_factors.size(); ++i) {
        QVERIFY(std::fabs(hf->config.rope_freq_factors[i] - gguf->config.rope_freq_factors[i]) <
                1e-6f * gguf->config.rope_freq_factors[i]);
      }
      if (std::string(name) == "llama3") {
        const std::vector<float>& f = gguf->config.rope_freq_factors;
        QVERIFY(f[0] == 1.0f && f[1] > 1.0f && f[1] < 8.0f && f[2] == 8.0f && f[3] == 8.0f);
      }
    }
  }

  // Q8_0 conversions keep the architecture's extra tensors (biases, norms and rope_freqs stay
  // f32) and stay within the 8-bit bound of test_forward_reference.
  void quantizedConversions() {
    std::unique_ptr<Backend> backend = create_cpu_backend(2);
    for (const char* name : {"llama-linear", "llama3", "qwen2", "qwen3"}) {
      const std::string path = tmp_.filePath(QString(name) + ".q8_0.gguf").toStdString();
      write_gguf_model(*load_model(kDataDir + name), path, TensorType::Q8_0);
      const auto q8 = load_model(path);
      QCOMPARE(q8->weights.layers[0].wq.type, TensorType::Q8_0);
      const double error = last_logits_error(*backend, *q8, model_reference(name), false, "transformers");
      qInfo("%s q8_0: relative error %.3g", name, error);
      QVERIFY2(error < 5e-2, qPrintable(QString::number(error)));
    }
  }

  // Drafts of these families: greedy speculative decoding equals the reference greedy
  // output whatever proposes the drafts (the target's own Q8_0 copy, a qwen2 model for a
  // qwen3 target, its first layer).
  void draftsKeepGreedyOutput() {
    const auto target = load_model(kDataDir + "qwen3.gguf");
    const std::string q8_path = tmp_.filePath("qwen3-draft.q8_0.gguf").toStdString();
    write_gguf_model(*target, q8_path, TensorType::Q8_0);
    const nlohmann::json& reference = model_reference("qwen3");
    const std::vector<int> prompt = reference["prompt"].get<std::vector<int>>();
    const std::vector<int> expected = reference["greedy"].get<std::vector<int>>();
    std::unique_ptr<Backend> backend = create_cpu_backend(2);
    DecodeOptions o;
    o.n_seqs = 2;
    o.max_new_tokens = 32;
    const int tokens = decode_cache_tokens(static_cast<int>(prompt.size()), target->config.context_length, o);
    for (const auto& [kind, draft] : {std::pair{std::string("model"), load_model(q8_path)},
                                      {std::string("model"), load_model(kDataDir + "qwen2")},
                                      {std::string("layers:1"), std::shared_ptr<const Model>()}}) {
      std::unique_ptr<KvCache> cache = backend->create_cache(*target, tokens);
      std::unique_ptr<Drafter> drafter = create_drafter(kind, *backend, *target, draft, o.sampling, o.n_seqs, tokens);
      std::unique_ptr<DraftPolicy> policy = create_draft_policy("fixed:3", o.n_seqs);
      const DecodeResult result = decode(*backend, *target, *cache, *drafter, *policy, prompt, o);
      for (const SequenceOutput& s : result.seqs) QCOMPARE(s.tokens, expected);
      qInfo("%s %s: %d of %d drafted tokens accepted", kind.c_str(), draft ? draft->config.architecture.c_str() : "",
            result.seqs[0].accepted, result.seqs[0].proposed);
      QVERIFY(result.seqs[0].proposed > 0);
    }
  }

  // Files that ask for what the engine does not do are refused with the reason.
  void refusesWhatItCannotRun() {
    const auto config_with = [&](const char* model, const std::function<void(nlohmann::json&)>& change) {
      const QString dir = tmp_.filePath(QString("edited-%1").arg(tmp_counter_++));
      QDir().mkpath(dir);
      nlohmann::json j = nlohmann::json::parse(std::ifstream(kDataDir + model + "/config.json"));
      change(j);
      std::ofstream(dir.toStdString() + "/config.json") << j.dump();
      QFile::copy(QString::fromStdString(kDataDir + model + "/model.safetensors"), dir + "/model.safetensors");
      return dir.toStdString();
    };
    const auto error_of = [](const std::string& path) {
      try {
        load_model(path);
      } catch (const ModelError& e) {
        return std::string(e.what());
      }
      return std::string("loaded");
    };
    const std::string yarn = error_of(config_with("qwen2", [](nlohmann::json& j) {
      j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"rope_theta", 1e6}};
    }));
    QVERIFY2(yarn.find("rope scaling 'yarn' is not supported") != std::string::npos, yarn.c_str());
    const std::string window = error_of(config_with("qwen2", [](nlohmann::json& j) { j["use_sliding_window"] = true; }));
    QVERIFY2(window.find("sliding-window") != std::string::npos, window.c_str());
    const std::string no_norms = error_of(config_with("qwen2", [](nlohmann::json& j) {
      j["architectures"] = {"Qwen3ForCausalLM"};
      j["model_type"] = "qwen3";
    }));
    QVERIFY2(no_norms.find("missing tensor 'model.layers.0.self_attn.q_norm.weight'") != std::string::npos,
             no_norms.c_str());
    const std::string unknown = error_of(config_with("qwen2", [](nlohmann::json& j) {
      j["architectures"] = {"Qwen2MoeForCausalLM"};
    }));
    QVERIFY2(unknown.find("architecture 'Qwen2MoeForCausalLM' is not supported") != std::string::npos, unknown.c_str());

    // validate_model on configurations no loader should produce
    Model model = *load_model(kDataDir + "llama3.gguf");
    model.config.rope_freq_factors.pop_back();
    QVERIFY_THROWS_EXCEPTION(ModelError, validate_model(model));
    model = *load_model(kDataDir + "qwen3.gguf");
    model.weights.layers[1].k_norm = {};
    QVERIFY_THROWS_EXCEPTION(ModelError, validate_model(model));
    model = *load_model(kDataDir + "qwen3.gguf");
    model.config.explicit_head_dim = 0;  // q 32 wide no more, but its matrices are 64 rows
    QVERIFY_THROWS_EXCEPTION(ModelError, validate_model(model));
    QVERIFY_THROWS_EXCEPTION(ModelError, write_gguf_model([&] {
      Model halves = *load_model(kDataDir + "llama3.gguf");
      halves.config.rope_style = RopeStyle::Halves;  // no GGUF holds llama weights rotating halves
      return halves;
    }(), tmp_.filePath("halves.gguf").toStdString(), TensorType::F32));
  }

 private:
  int tmp_counter_ = 0;
};

QTEST_GUILESS_MAIN(TestArchOracles)
#include "test_arch_oracles.moc"
