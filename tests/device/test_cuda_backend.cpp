// The CUDA backend as a whole: what happens without a GPU (on every machine), and with one,
// that a sequence's logits do not depend on the rest of its batch or on how its tokens were
// split across calls (bit for bit in the batch-invariant mode).
#include <QtTest>

#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "compute/backend.h"
#include "compute/batch.h"
#include "compute/cuda_backend.h"
#include "compute/device_plan.h"
#include "device_support.h"
#include "model/random_model.h"

using namespace specula;
using namespace specula::test;

namespace {

// Wide enough for 16-byte vector loads, 8-way grouped-query attention and K-quant rows; of
// the named tiny shape's architecture ("tiny-qwen2": q|k|v biases, "tiny-qwen3": q/k norms
// and 32-wide heads; both rotate halves).
ModelConfig small_shape(const std::string& tiny = "tiny") {
  ModelConfig c = random_model_config(tiny);
  c.dim = 256;
  c.hidden_dim = 768;
  c.n_heads = 8;
  c.n_kv_heads = 1;
  c.vocab_size = 1000;
  c.context_length = 512;
  return c;
}

// The tiny shape a data row names by its first word ("qwen2 q4_K": tiny-qwen2).
std::string tiny_of(const char* tag) {
  const std::string t(tag);
  return t.starts_with("qwen") ? "tiny-" + t.substr(0, t.find(' ')) : "tiny";
}

std::vector<int32_t> tokens_for(int seq, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((seq * 131 + i * 17) % 1000);
  return t;
}

// Logits of three sequences run together in ragged steps (prefill 20/7/33 tokens, then a
// verify-like step of 5/1/3), and of each sequence alone, its prompt split in two calls.
struct Runs {
  std::vector<std::vector<float>> together, alone;  // per sequence, the last step's rows
};

Runs run_both_ways(Backend& backend, const Model& model) {
  const std::vector<int> prompt{20, 7, 33}, step{5, 1, 3};
  Runs r;
  {
    auto cache = backend.create_cache(model, 256);
    std::vector<int> seqs;
    RaggedBatch first, second;
    for (int s = 0; s < 3; ++s) {
      seqs.push_back(cache->create());
      first.add(seqs.back(), tokens_for(s, prompt[s]), false);
    }
    std::vector<float> logits;
    backend.forward(model, *cache, first, logits);
    for (int s = 0; s < 3; ++s) second.add(seqs[s], tokens_for(s + 10, step[s]), true);
    backend.forward(model, *cache, second, logits);
    size_t at = 0;
    for (int s = 0; s < 3; ++s) {
      const size_t n = static_cast<size_t>(step[s]) * model.config.vocab_size;
      r.together.emplace_back(logits.begin() + at, logits.begin() + at + n);
      at += n;
    }
  }
  for (int s = 0; s < 3; ++s) {
    auto cache = backend.create_cache(model, 256);
    const int seq = cache->create();
    const std::vector<int32_t> p = tokens_for(s, prompt[s]);
    const size_t half = p.size() / 2 + 1;
    std::vector<float> logits;
    for (const auto& part : {std::vector<int32_t>(p.begin(), p.begin() + half), std::vector<int32_t>(p.begin() + half, p.end())}) {
      if (part.empty()) continue;
      RaggedBatch b;
      b.add(seq, part, false);
      backend.forward(model, *cache, b, logits);
    }
    RaggedBatch b;
    b.add(seq, tokens_for(s + 10, step[s]), true);
    backend.forward(model, *cache, b, logits);
    r.alone.push_back(logits);
  }
  return r;
}

}  // namespace

class TestCudaBackend : public QObject {
  Q_OBJECT

 private slots:
  void missingGpuGivesAReasonNotACrash() {
    std::string why;
    auto backend = create_cuda_backend(&why);
    if (gpu_unavailable().empty()) {
      QVERIFY2(backend, why.c_str());
      QVERIFY(backend->name().rfind("cuda (", 0) == 0);
    } else {
      QVERIFY(!backend);
      QVERIFY2(why.find("CUDA") != std::string::npos, why.c_str());
    }
  }

  void logitsDoNotDependOnTheBatch_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<bool>("invariant");
    QTest::addColumn<bool>("exact");
    QTest::newRow("f16 cublas") << static_cast<int>(TensorType::F16) << false << false;
    QTest::newRow("f16 invariant") << static_cast<int>(TensorType::F16) << true << true;
    QTest::newRow("bf16 invariant") << static_cast<int>(TensorType::BF16) << true << true;
    QTest::newRow("f32 invariant") << static_cast<int>(TensorType::F32) << true << true;
    // quantized products run on quant_gemm up to 64 rows in either mode: exact in both here
    QTest::newRow("q8_0") << static_cast<int>(TensorType::Q8_0) << false << true;
    QTest::newRow("q4_K invariant") << static_cast<int>(TensorType::Q4_K) << true << true;
    QTest::newRow("q6_K") << static_cast<int>(TensorType::Q6_K) << false << true;
    QTest::newRow("qwen2 q4_K") << static_cast<int>(TensorType::Q4_K) << false << true;
    QTest::newRow("qwen3 f16 invariant") << static_cast<int>(TensorType::F16) << true << true;
  }
  void logitsDoNotDependOnTheBatch() {
    SPECULA_REQUIRE_GPU();
    QFETCH(int, type);
    QFETCH(bool, invariant);
    QFETCH(bool, exact);
    std::string why;
    auto backend = create_cuda_backend(&why, CudaOptions{invariant});
    QVERIFY2(backend, why.c_str());
    const auto model = make_random_model(small_shape(tiny_of(QTest::currentDataTag())), static_cast<TensorType>(type), 5);
    const Runs r = run_both_ways(*backend, *model);
    for (size_t s = 0; s < 3; ++s) {
      QCOMPARE(r.together[s].size(), r.alone[s].size());
      if (exact) {
        QVERIFY2(std::memcmp(r.together[s].data(), r.alone[s].data(), r.alone[s].size() * sizeof(float)) == 0,
                 qPrintable(QStringLiteral("sequence %1: logits differ in bits").arg(s)));
      } else {
        const std::vector<double> want(r.alone[s].begin(), r.alone[s].end());
        SPECULA_EXPECT_CLOSE(r.together[s], want, 2e-2, "sequence " + std::to_string(s));
      }
    }
  }

  // One device copy of a model's weights for every backend object: a second backend (and a
  // batch-invariant one) uploads nothing, and gets the same logits as the first.
  void backendsShareOneCopyOfTheWeights() {
    SPECULA_REQUIRE_GPU();
    const auto model = make_random_model(small_shape(), TensorType::Q4_0, 8);
    auto first = create_cuda_backend(nullptr);
    QVERIFY(first);
    int calls = 0;
    first->prepare(*model, [&](double) { return ++calls > 0; });
    QVERIFY(calls > 0);
    const auto free_memory = [] {
      size_t free = 0, total = 0;
      cuda::check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
      return free;
    };
    const size_t before = free_memory();
    auto second = create_cuda_backend(nullptr, CudaOptions{true});
    QVERIFY(second);
    int second_calls = 0;
    second->prepare(*model, [&](double) { return ++second_calls > 0; });
    QCOMPARE(second_calls, 0);  // nothing to upload
    QVERIFY(before - free_memory() < device_weight_bytes(*model) / 2);
    // a cancelled upload throws and leaves nothing behind
    const auto other = make_random_model(small_shape(), TensorType::Q8_0, 9);
    QVERIFY_THROWS_EXCEPTION(ModelError, second->prepare(*other, [](double) { return false; }));
  }

  // A step that fails after planning (here: a batch whose logits would not fit the device)
  // leaves every sequence as long as it was.
  void aFailedStepRollsTheCacheBack() {
    SPECULA_REQUIRE_GPU();
    auto backend = create_cuda_backend(nullptr);
    QVERIFY(backend);
    ModelConfig c = small_shape();
    c.vocab_size = 1 << 20;
    c.context_length = 1 << 17;
    c.dim = 64;
    c.hidden_dim = 64;
    c.n_heads = 2;
    c.n_layers = 1;
    const auto model = make_random_model(c, TensorType::F16, 10);
    auto cache = backend->create_cache(*model, 1 << 16);
    const int s = cache->create();
    RaggedBatch small;
    small.add(s, tokens_for(0, 3), false);
    std::vector<float> logits;
    backend->forward(*model, *cache, small, logits);
    QCOMPARE(cache->length(s), 3);
    RaggedBatch huge;  // 60,000 rows of 2^20 logits: 240 GB
    huge.add(s, std::vector<int32_t>(60000, 7), true);
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, backend->forward(*model, *cache, huge, logits));
    QCOMPARE(cache->length(s), 3);
    backend->forward(*model, *cache, small, logits);  // still usable
    QCOMPARE(cache->length(s), 6);
  }

  // Steps replayed from captured graphs (their metadata padded to a bucket) give the bits of
  // the same steps launched kernel by kernel, across bucket changes as contexts grow past
  // attention pieces and as sequences come and go.
  void graphsReplayTheSameBits_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<bool>("invariant");
    QTest::newRow("q4_K") << static_cast<int>(TensorType::Q4_K) << false;
    QTest::newRow("f16 invariant") << static_cast<int>(TensorType::F16) << true;
    QTest::newRow("qwen2 q8_0") << static_cast<int>(TensorType::Q8_0) << false;
    QTest::newRow("qwen3 q4_K") << static_cast<int>(TensorType::Q4_K) << false;
  }
  void graphsReplayTheSameBits() {
    SPECULA_REQUIRE_GPU();
    QFETCH(int, type);
    QFETCH(bool, invariant);
    const auto model = make_random_model(small_shape(tiny_of(QTest::currentDataTag())), static_cast<TensorType>(type), 13);
    const auto steps = [&](bool graphs) {
      CudaOptions options;
      options.batch_invariant = invariant;
      options.graphs = graphs;
      auto backend = create_cuda_backend(nullptr, options);
      auto cache = backend->create_cache(*model, 2048);
      std::vector<int> seqs;
      RaggedBatch prompt;
      for (int s = 0; s < 3; ++s) {
        seqs.push_back(cache->create());
        prompt.add(seqs.back(), tokens_for(s, 60 + 30 * s), false);
      }
      std::vector<float> logits, all;
      backend->forward(*model, *cache, prompt, logits);
      for (int step = 0; step < 120; ++step) {
        RaggedBatch b;
        for (int s = 0; s < 3; ++s) {
          if (s == 2 && step % 40 >= 20) continue;  // a sequence leaves and comes back
          b.add(seqs[s], tokens_for(step, 1 + (step + s) % 4), true);  // decode and verify sizes
        }
        backend->forward(*model, *cache, b, logits);
        all.insert(all.end(), logits.begin(), logits.end());
        for (int s = 0; s < 3; ++s) {
          if (s == 2 && step % 40 >= 20) continue;
          cache->truncate(seqs[s], cache->length(seqs[s]) - (step + s) % 4);  // keep one token each
        }
      }
      return all;
    };
    const std::vector<float> replayed = steps(true), launched = steps(false);
    QCOMPARE(replayed.size(), launched.size());
    QVERIFY(std::memcmp(replayed.data(), launched.data(), replayed.size() * sizeof(float)) == 0);
  }

  void argmaxOnTheDeviceMatchesTheLogits() {
    SPECULA_REQUIRE_GPU();
    auto backend = create_cuda_backend(nullptr);
    QVERIFY(backend);
    const auto model = make_random_model(small_shape(), TensorType::F16, 6);
    auto cache = backend->create_cache(*model, 256);
    const int a = cache->create(), b = cache->fork(a);
    RaggedBatch batch;
    batch.add(a, tokens_for(1, 9), true);
    batch.add(b, tokens_for(2, 4), true);
    std::vector<float> logits;
    backend->forward(*model, *cache, batch, logits);
    cache->truncate(a, 0);
    cache->truncate(b, 0);
    std::vector<int32_t> tokens;
    backend->forward_argmax(*model, *cache, batch, tokens);
    QCOMPARE(tokens.size(), static_cast<size_t>(13));
    const size_t vocab = static_cast<size_t>(model->config.vocab_size);
    for (size_t r = 0; r < tokens.size(); ++r) {
      const float* row = logits.data() + r * vocab;
      QCOMPARE(static_cast<size_t>(std::max_element(row, row + vocab) - row), static_cast<size_t>(tokens[r]));
    }
  }

  // Acceptance on the device against the host's (Backend::forward_accept on the same
  // backend, so the same logits): the same tokens kept, the same log-probabilities to
  // rounding, and every sequence's generator left where the host leaves it; greedy, sampled
  // (with and without draft distributions) and forced.
  void acceptanceOnTheDeviceMatchesTheHost_data() {
    QTest::addColumn<float>("temperature");
    QTest::addColumn<double>("forced");
    QTest::addColumn<bool>("with_q");
    QTest::newRow("greedy") << 0.0f << -1.0 << false;
    QTest::newRow("sampled, one-hot drafts") << 0.9f << -1.0 << false;
    QTest::newRow("sampled, draft distributions") << 0.9f << -1.0 << true;
    QTest::newRow("forced, greedy") << 0.0f << 0.6 << false;
    QTest::newRow("forced, sampled") << 0.9f << 0.6 << false;
  }
  void acceptanceOnTheDeviceMatchesTheHost() {
    SPECULA_REQUIRE_GPU();
    QFETCH(float, temperature);
    QFETCH(double, forced);
    QFETCH(bool, with_q);
    auto backend = create_cuda_backend(nullptr);
    QVERIFY(backend);
    const auto model = make_random_model(small_shape(), TensorType::Q8_0, 12);
    const int vocab = model->config.vocab_size;
    auto cache = backend->create_cache(*model, 512);
    std::vector<int> seqs;
    RaggedBatch prompt;
    for (int s = 0; s < 4; ++s) {
      seqs.push_back(cache->create());
      prompt.add(seqs.back(), tokens_for(s, 9 + s), false);
    }
    std::vector<float> logits;
    backend->forward(*model, *cache, prompt, logits);
    // drafts of 0..3 tokens: the first of each the target's own greedy choice, so some are kept
    std::vector<int32_t> next;
    RaggedBatch probe;
    for (int s = 0; s < 4; ++s) probe.add(seqs[s], tokens_for(s + 20, 1), false);
    backend->forward_argmax(*model, *cache, probe, next);
    for (int s = 0; s < 4; ++s) cache->truncate(seqs[s], 9 + s);
    RaggedBatch batch;
    std::vector<std::vector<float>> q(4);
    std::mt19937 rng(3);
    for (int s = 0; s < 4; ++s) {
      std::vector<int32_t> rows = tokens_for(s + 20, 1);
      for (int j = 0; j < s; ++j) rows.push_back(j == 0 ? next[s] : (s * 7 + j) % vocab);
      batch.add(seqs[s], rows, true);
      if (with_q) {
        for (int j = 0; j < s; ++j) {
          std::vector<float> row(static_cast<size_t>(vocab));
          for (float& v : row) v = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
          const float sum = std::accumulate(row.begin(), row.end(), 0.0f);
          for (float& v : row) v /= sum;
          q[s].insert(q[s].end(), row.begin(), row.end());
        }
      }
    }
    AcceptanceRule rule;
    rule.sampling.temperature = temperature;
    rule.sampling.top_k = 50;
    rule.forced_acceptance = forced;
    for (uint64_t seed = 0; seed < 6; ++seed) {
      std::vector<Rng> device_rngs, host_rngs;
      for (int s = 0; s < 4; ++s) device_rngs.emplace_back(seed * 10 + s), host_rngs.emplace_back(seed * 10 + s);
      std::vector<DraftRows> on_device, on_host;
      for (int s = 0; s < 4; ++s) {
        on_device.push_back({q[s], &device_rngs[s]});
        on_host.push_back({q[s], &host_rngs[s]});
      }
      std::vector<AcceptedRows> got, want;
      backend->forward_accept(*model, *cache, batch, rule, on_device, got);
      for (int s = 0; s < 4; ++s) cache->truncate(seqs[s], 9 + s);
      backend->Backend::forward_accept(*model, *cache, batch, rule, on_host, want);
      for (int s = 0; s < 4; ++s) cache->truncate(seqs[s], 9 + s);
      for (int s = 0; s < 4; ++s) {
        QCOMPARE(got[s].accepted, want[s].accepted);
        QVERIFY(got[s].tokens == want[s].tokens);
        QCOMPARE(got[s].logprobs.size(), want[s].logprobs.size());
        for (size_t t = 0; t < want[s].logprobs.size(); ++t) QVERIFY(std::abs(got[s].logprobs[t] - want[s].logprobs[t]) < 1e-4);
        QCOMPARE(device_rngs[s].next(), host_rngs[s].next());
      }
    }
  }

  void badRequestsThrowClearly() {
    SPECULA_REQUIRE_GPU();
    auto backend = create_cuda_backend(nullptr);
    QVERIFY(backend);
    const auto model = make_random_model(small_shape(), TensorType::F16, 7);
    auto cache = backend->create_cache(*model, 64, 2);
    const int s = cache->create();
    RaggedBatch bad_token;
    bad_token.add(s, std::vector<int32_t>{1, 1000}, false);
    std::vector<float> logits;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, backend->forward(*model, *cache, bad_token, logits));
    RaggedBatch ok;
    ok.add(s, std::vector<int32_t>{1}, true);
    // the cache holds 2 of the 3 layers
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, backend->forward(*model, *cache, ok, logits, 3));
    backend->forward(*model, *cache, ok, logits, 2);
    QCOMPARE(logits.size(), static_cast<size_t>(model->config.vocab_size));
  }
};

QTEST_GUILESS_MAIN(TestCudaBackend)
#include "test_cuda_backend.moc"
