// The CUDA backend's forward pass against independent references: the CPU backend on
// random models of every weight type (ragged steps with forks, copy-on-write and rollback)
// and on the demo pair's greedy text, the reference C implementation's stories260K greedy
// outputs, greedy speculative decoding against plain greedy decoding on the GPU, the
// transformers oracles of the qwen2, qwen3 and scaled-rope llama blocks, and the choice of
// device. Skips, with the reason, where no
// GPU is usable.
#include <QtTest>

#include <QTemporaryDir>
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compute/backend.h"
#include "compute/cuda_backend.h"
#include "device_support.h"
#include "model/model.h"
#include "model/model_export.h"
#include "oracle_text.h"
#include "model/random_model.h"
#include "decode/session.h"
#include "shared_data.h"

using namespace specula;
using namespace specula::test;

namespace {

// The same ragged steps on one backend: three prompts, then a fork that copies a shared
// partial block, then a rollback; returns every step's logits.
std::vector<std::vector<float>> ragged_steps(Backend& backend, const Model& model) {
  auto cache = backend.create_cache(model, 512, -1, 4);
  const auto tokens = [&](int seed, int n) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back((seed * 37 + i * 11) % model.config.vocab_size);
    return t;
  };
  std::vector<std::vector<float>> out(3);
  const int a = cache->create(), b = cache->create(), c = cache->create();
  RaggedBatch first;
  first.add(a, tokens(1, 9), true);
  first.add(b, tokens(2, 1), true);
  first.add(c, tokens(3, 20), true);
  backend.forward(model, *cache, first, out[0]);
  const int d = cache->fork(a);  // shares a's partial last block
  RaggedBatch second;
  second.add(a, tokens(4, 4), true);
  second.add(d, tokens(5, 2), true);
  second.add(b, tokens(6, 1), true);
  backend.forward(model, *cache, second, out[1]);
  cache->truncate(c, 15);  // rejected draft tokens
  RaggedBatch third;
  third.add(c, tokens(7, 3), true);
  third.add(d, tokens(8, 1), false);
  backend.forward(model, *cache, third, out[2]);
  return out;
}

// llama2.c's generate loop with the argmax taken on the device: the oracle's texts hold
// `steps` tokens after BOS (as tests/test_stories260k_greedy.cpp reads them).
std::string greedy(const Model& model, Backend& backend, const std::string& prompt, int steps) {
  const Tokenizer& tokenizer = *model.tokenizer;
  std::vector<int32_t> tokens;
  for (int id : tokenizer.encode(prompt, true)) tokens.push_back(id);
  auto cache = backend.create_cache(model, steps + 1);
  const int seq = cache->create();
  RaggedBatch batch;
  batch.add(seq, tokens, false);
  std::vector<int32_t> next;
  while (static_cast<int>(tokens.size()) < steps + 1) {
    backend.forward_argmax(model, *cache, batch, next);
    if (next.at(0) == tokenizer.bos()) break;
    tokens.push_back(next[0]);
    batch = RaggedBatch();
    batch.add(seq, std::span(tokens).last(1), false);
  }
  std::string text = tokenizer.decode(std::vector<int>(tokens.begin() + 1, tokens.end()));
  if (!text.empty() && text.front() == ' ') text.erase(0, 1);  // the dummy-prefix space
  return text;
}

// The demo models: next to the sources this was built from, or where SPECULA_DEMO_DIR says
// (tests/device/run.sh sets it when the executables were built elsewhere).
std::string demo_dir() {
  const QByteArray env = qgetenv("SPECULA_DEMO_DIR");
  return env.isEmpty() ? std::string(SPECULA_SOURCE_DIR "/resources/models") : env.toStdString();
}

std::shared_ptr<const Model> stories260k() {
  const QString checkpoint = sharedFile(QStringLiteral("models/stories260K/stories260K.bin"));
  const QString tokenizer = sharedFile(QStringLiteral("models/stories260K/tok512.bin"));
  if (checkpoint.isEmpty() || tokenizer.isEmpty()) return nullptr;
  LoadOptions options;
  options.tokenizer_path = tokenizer.toStdString();
  return load_model(checkpoint.toStdString(), options);
}

// Greedy candidates of stories260K for a story opening, drafted by `draft`.
std::vector<std::vector<int>> generate(Backend& backend, const Model& model, int n, const std::string& draft) {
  GenerationRequest request;
  request.prompt = "Once upon a time";
  request.n_candidates = n;
  request.max_new_tokens = 80;
  request.draft.kind = draft;
  std::vector<std::vector<int>> tokens;
  for (const Candidate& c : run_session(backend, model, request).candidates) tokens.push_back(c.tokens);
  return tokens;
}

}  // namespace

class TestCudaForward : public QObject {
  Q_OBJECT

 private slots:
  void logitsMatchTheCpuBackend_data() {
    QTest::addColumn<QString>("shape");
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("second");
    QTest::addColumn<bool>("invariant");
    QTest::addColumn<double>("bound");
    // f16/bf16: the device rounds every product's input to the weights' type, the CPU does not.
    // Quantized: the CPU rounds those products' activations to 8 bits (its logits are 1.9e-2
    // from f32 products with the same weights), the device to fp16.
    const auto row = [](const std::string& name, const char* shape, TensorType t, TensorType second, bool invariant,
                        double bound) {
      QTest::newRow(name.c_str()) << QString(shape) << static_cast<int>(t) << static_cast<int>(second) << invariant << bound;
    };
    row("f32 cublas", "tiny", TensorType::F32, TensorType::F32, false, 1e-4);
    row("f32 invariant", "tiny", TensorType::F32, TensorType::F32, true, 1e-4);
    row("f16 cublas", "tiny", TensorType::F16, TensorType::F16, false, 1e-2);
    row("bf16 invariant", "tiny", TensorType::BF16, TensorType::BF16, true, 5e-2);
    // K-quant rows are 256 values: "wide" is tiny with dim 256 and FFN 512, "wide-qwen2" and
    // "wide-qwen3" the qwen shapes widened alike
    row("q8_0", "wide", TensorType::Q8_0, TensorType::Q8_0, false, 5e-2);
    row("q4_0 invariant", "wide", TensorType::Q4_0, TensorType::Q4_0, true, 5e-2);
    row("q4_K", "wide", TensorType::Q4_K, TensorType::Q4_K, false, 5e-2);
    row("q6_K invariant", "wide", TensorType::Q6_K, TensorType::Q6_K, true, 5e-2);
    row("q4_K with q6_K (as Q4_K_M)", "wide", TensorType::Q4_K, TensorType::Q6_K, false, 5e-2);
    // quantized products with biases (stacked over Q4_K_M's two parts of q|k|v) and with q/k
    // norms (qwen3's 32-wide heads make wo 128 columns: 32-value blocks only)
    row("qwen2 q4_K with q6_K (as Q4_K_M)", "wide-qwen2", TensorType::Q4_K, TensorType::Q6_K, false, 5e-2);
    row("qwen2 q8_0 invariant", "wide-qwen2", TensorType::Q8_0, TensorType::Q8_0, true, 5e-2);
    row("qwen3 q4_0", "wide-qwen3", TensorType::Q4_0, TensorType::Q4_0, false, 5e-2);
    row("qwen3 q8_0 invariant", "wide-qwen3", TensorType::Q8_0, TensorType::Q8_0, true, 5e-2);
    // biases; q/k norms with 32-wide heads (q twice dim); linear and llama3 rope scaling
    for (const char* shape : {"tiny-qwen2", "tiny-qwen3", "tiny+linear", "tiny+llama3"}) {
      row(std::string(shape) + " f32 cublas", shape, TensorType::F32, TensorType::F32, false, 1e-4);
      row(std::string(shape) + " f16 cublas", shape, TensorType::F16, TensorType::F16, false, 1e-2);
    }
  }
  void logitsMatchTheCpuBackend() {
    SPECULA_REQUIRE_GPU();
    QFETCH(QString, shape);
    QFETCH(int, type);
    QFETCH(int, second);
    QFETCH(bool, invariant);
    QFETCH(double, bound);
    const bool wide = shape.startsWith("wide");
    ModelConfig config =
        random_model_config((wide ? "tiny" + shape.mid(4) : shape.section('+', 0, 0)).toStdString());
    if (wide) {
      config.dim = 256;
      config.hidden_dim = 512;
    }
    if (shape.endsWith("+linear")) config.rope_linear_factor = 4.0f;
    if (shape.endsWith("+llama3")) config.rope_freq_factors = llama3_rope_factors(config.rope_theta, config.head_dim(), 8, 1, 4, 64);
    const auto model = make_random_model(config, static_cast<TensorType>(type), static_cast<TensorType>(second), 11);
    std::string why;
    auto gpu = create_cuda_backend(&why, CudaOptions{invariant});
    QVERIFY2(gpu, why.c_str());
    auto cpu = create_cpu_backend(2);
    const auto want = ragged_steps(*cpu, *model);
    const auto got = ragged_steps(*gpu, *model);
    for (size_t step = 0; step < want.size(); ++step) {
      SPECULA_EXPECT_CLOSE(got[step], std::vector<double>(want[step].begin(), want[step].end()), bound,
                           "step " + std::to_string(step));
    }
  }

  // The transformers oracles of tests/data/arch_oracles, as the engine's f32 GGUF of each
  // (so the device computes in f32): 32 greedy tokens equal to transformers' generate.
  void archOraclesGreedyMatchTransformers() {
    SPECULA_REQUIRE_GPU();
    std::string why;
    auto gpu = create_cuda_backend(&why);
    QVERIFY2(gpu, why.c_str());
    const std::string data = testDataDir().toStdString() + "/arch_oracles/";
    std::ifstream in(data + "reference.json");
    QVERIFY2(in, (data + "reference.json is missing (set SPECULA_TEST_DATA_DIR)").c_str());
    const nlohmann::json reference = nlohmann::json::parse(in);
    QTemporaryDir tmp;
    for (const char* name : {"llama-linear", "llama3", "qwen2", "qwen3"}) {
      const std::string f32 = tmp.filePath(QString(name) + ".gguf").toStdString();
      write_gguf_model(*load_model(data + name + ".gguf"), f32, TensorType::F32);
      const auto model = load_model(f32);
      const nlohmann::json& r = reference["models"][name];
      std::vector<int32_t> tokens = r["prompt"].get<std::vector<int32_t>>();
      const size_t prompt = tokens.size();
      auto cache = gpu->create_cache(*model, static_cast<int>(prompt) + 32);
      const int seq = cache->create();
      RaggedBatch batch;
      batch.add(seq, tokens, false);
      std::vector<int32_t> next;
      while (tokens.size() < prompt + 32) {
        gpu->forward_argmax(*model, *cache, batch, next);
        tokens.push_back(next.at(0));
        batch = RaggedBatch();
        batch.add(seq, std::span(tokens).last(1), false);
      }
      QCOMPARE(std::vector<int>(tokens.begin() + static_cast<long>(prompt), tokens.end()),
               r["greedy"].get<std::vector<int>>());
    }
  }

  // The demo pair (f16 weights) through a whole greedy session on both backends: the same
  // text, plain and with the draft model.
  void demoPairTextMatchesTheCpu() {
    SPECULA_REQUIRE_GPU();
    const std::string dir = demo_dir();
    if (!QFile::exists(QString::fromStdString(dir + "/specula-demo-target.gguf"))) QSKIP("the demo models are missing");
    const auto target = load_model(dir + "/specula-demo-target.gguf");
    const auto draft = load_model(dir + "/specula-demo-draft.gguf");
    auto cpu = create_cpu_backend(2);
    std::string why;
    for (bool invariant : {true, false}) {
      auto gpu = create_cuda_backend(&why, CudaOptions{invariant});
      QVERIFY2(gpu, why.c_str());
      for (const std::string kind : {"none", "model"}) {
        GenerationRequest request;
        request.prompt = "def add(a, b):\n    \"\"\"Return a + b.\"\"\"\n";
        request.n_candidates = 2;
        request.max_new_tokens = 48;
        request.draft.kind = kind;
        if (kind == "model") request.draft.draft_model = draft;
        const SessionResult want = run_session(*cpu, *target, request);
        const SessionResult got = run_session(*gpu, *target, request);
        for (size_t i = 0; i < want.candidates.size(); ++i) {
          QCOMPARE(QString::fromStdString(got.candidates[i].text), QString::fromStdString(want.candidates[i].text));
        }
      }
    }
  }

  void stories260kGreedyMatchesTheOracle_data() {
    QTest::addColumn<QString>("prompt");
    QTest::addColumn<int>("steps");
    QTest::addColumn<int>("block");
    QTest::addColumn<bool>("invariant");
    QTest::newRow("no prompt, 200 steps") << QString() << 200 << 0 << false;
    QTest::newRow("no prompt, 200 steps, invariant") << QString() << 200 << 0 << true;
    QTest::newRow("Zoo, 60 steps") << QStringLiteral("Zoo") << 60 << 1 << false;
  }
  void stories260kGreedyMatchesTheOracle() {
    SPECULA_REQUIRE_GPU();
    QFETCH(QString, prompt);
    QFETCH(int, steps);
    QFETCH(int, block);
    QFETCH(bool, invariant);
    SPECULA_SHARED_FILE(oracle, "oracles/stories260K.md");
    const auto model = stories260k();
    if (!model) QSKIP("stories260K missing from the shared data");
    const QString expected = QString::fromStdString(oracle_text_block(oracle, static_cast<size_t>(block)));
    QVERIFY(!expected.isEmpty());
    std::string why;
    auto gpu = create_cuda_backend(&why, CudaOptions{invariant});
    QVERIFY2(gpu, why.c_str());
    QCOMPARE(QString::fromStdString(greedy(*model, *gpu, prompt.toStdString(), steps)), expected);
  }

  // Exact in the batch-invariant mode; with cuBLAS the agreement rate is reported.
  void greedySpeculativeEqualsPlainGreedy_data() {
    QTest::addColumn<int>("n");
    QTest::newRow("N=1") << 1;
    QTest::newRow("N=8") << 8;
  }
  void greedySpeculativeEqualsPlainGreedy() {
    SPECULA_REQUIRE_GPU();
    QFETCH(int, n);
    const auto model = stories260k();
    if (!model) QSKIP("stories260K missing from the shared data");
    for (bool invariant : {true, false}) {
      std::string why;
      auto gpu = create_cuda_backend(&why, CudaOptions{invariant});
      QVERIFY2(gpu, why.c_str());
      const auto plain = generate(*gpu, *model, n, "none");
      QCOMPARE(plain.size(), static_cast<size_t>(n));
      for (const std::string draft : {"layers:2", "ngram"}) {
        const auto speculative = generate(*gpu, *model, n, draft);
        QCOMPARE(speculative.size(), static_cast<size_t>(n));
        int same = 0;
        for (int i = 0; i < n; ++i) {
          QVERIFY(!plain[static_cast<size_t>(i)].empty());
          same += plain[static_cast<size_t>(i)] == speculative[static_cast<size_t>(i)] ? 1 : 0;
        }
        if (invariant) {
          QVERIFY2(same == n, qPrintable(QStringLiteral("%1: %2 of %3 candidates equal plain greedy")
                                             .arg(QString::fromStdString(draft)).arg(same).arg(n)));
        } else {
          qInfo("cuBLAS products, %s: %d of %d candidates identical to plain greedy", draft.c_str(), same, n);
        }
      }
    }
  }

  // auto takes the GPU when one is usable and says which; without one it says why and
  // takes the CPU, and an explicit cuda is a clear error (never a crash)
  void deviceChoice() {
    std::string note;
    auto automatic = create_backend(DeviceChoice::Auto, &note);
    QVERIFY(create_backend(DeviceChoice::Cpu)->name().rfind("cpu", 0) == 0);
    if (gpu_unavailable().empty()) {
      QVERIFY(automatic->name().rfind("cuda (", 0) == 0);
      QVERIFY2(note.find(automatic->name()) != std::string::npos, note.c_str());
      QVERIFY(create_backend(DeviceChoice::Cuda)->name().rfind("cuda (", 0) == 0);
      return;
    }
    QVERIFY(automatic->name().rfind("cpu", 0) == 0);
    QVERIFY2(note.find("CUDA") != std::string::npos, note.c_str());  // the reason
    try {
      create_backend(DeviceChoice::Cuda);
      QFAIL("--device cuda without a usable GPU must throw");
    } catch (const std::runtime_error& e) {
      QVERIFY2(std::string(e.what()).find("CUDA") != std::string::npos, e.what());
    }
  }
};

QTEST_GUILESS_MAIN(TestCudaForward)
#include "test_cuda_forward.moc"
