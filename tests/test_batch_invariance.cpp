// A sequence's logits are the same bits however it is batched: alone in one call, token by
// token, in random chunks, inside batches of 8 sequences of different lengths, continued
// from a forked prefix (copy-on-write), and on 1 or 2 threads (these small matrices on the
// calling thread, as a forward runs them, or split between both); for every weight type and
// every SIMD level this processor runs (the 16-lane AVX-512 kernels too, emulated on AVX2),
// for the qwen2 (q/k/v biases), qwen3 (per-head q/k norms, q twice as wide as the model) and
// qwen3moe (experts shared by the tokens of a batch) stages, and with the weights prepared
// before the first forward.
#include <QtTest>
#include <algorithm>
#include <cstring>
#include <random>

#include "compute/backend.h"
#include "model/random_model.h"

using namespace specula;

namespace {

constexpr int kLength = 14;  // tokens of the sequence under test

std::vector<int32_t> random_tokens(std::mt19937& rng, int n, int vocab) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int32_t& t : tokens) t = std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng);
  return tokens;
}

// Logits of every position of `tokens`, fed in chunks of the given sizes.
std::vector<float> run_chunks(Backend& backend, const Model& model,
                              const std::vector<int32_t>& tokens, const std::vector<int>& chunks) {
  std::unique_ptr<KvCache> cache = backend.create_cache(model, 256, -1, 4);
  const int seq = cache->create();
  std::vector<float> all, logits;
  size_t next = 0;
  for (int chunk : chunks) {
    RaggedBatch batch;
    batch.add(seq, std::span(tokens).subspan(next, chunk), true);
    backend.forward(model, *cache, batch, logits);
    all.insert(all.end(), logits.begin(), logits.end());
    next += chunk;
  }
  return all;
}

// The sequence under test travels with 7 others of different lengths; each step gives every
// sequence a different number of new tokens, and asks for the logits of all of them.
std::vector<float> run_in_crowd(Backend& backend, const Model& model,
                                const std::vector<int32_t>& tokens, std::mt19937& rng) {
  const int vocab = model.config.vocab_size;
  std::unique_ptr<KvCache> cache = backend.create_cache(model, 512, -1, 4);
  std::vector<int> others;
  for (int i = 0; i < 7; ++i) {
    others.push_back(cache->create());
    RaggedBatch prefill;  // histories of 1..20 tokens
    prefill.add(others.back(), random_tokens(rng, 1 + 3 * i, vocab), false);
    std::vector<float> ignored;
    backend.forward(model, *cache, prefill, ignored);
  }
  const int seq = cache->create();
  std::vector<float> mine, logits;
  size_t next = 0;
  for (int step = 0; next < tokens.size(); ++step) {
    RaggedBatch batch;
    const int position = step % 8;  // where the sequence sits among the others
    const int chunk = std::min<int>(1 + step % 4, static_cast<int>(tokens.size() - next));
    size_t my_first_row = 0;
    for (int slot = 0, other = 0; slot < 8; ++slot) {
      if (slot == position) {
        my_first_row = static_cast<size_t>(batch.n_logit_rows());
        batch.add(seq, std::span(tokens).subspan(next, chunk), true);
      } else {
        batch.add(others[other++], random_tokens(rng, 1 + (slot + step) % 5, vocab), true);
      }
    }
    backend.forward(model, *cache, batch, logits);
    mine.insert(mine.end(), logits.begin() + my_first_row * vocab,
                logits.begin() + (my_first_row + chunk) * vocab);
    next += chunk;
  }
  return mine;
}

// The first 6 tokens go into a sequence that is then forked twice and released. The
// fork under test writes first, so it gets the copy of the shared partial block
// (copy-on-write); the other fork then writes its own tokens into the original.
std::vector<float> run_forked(Backend& backend, const Model& model,
                              const std::vector<int32_t>& tokens) {
  std::unique_ptr<KvCache> cache = backend.create_cache(model, 256, -1, 4);
  const int parent = cache->create();
  std::vector<float> all, logits;
  const auto feed = [&](int seq, std::span<const int32_t> part, bool keep) {
    RaggedBatch batch;
    batch.add(seq, part, true);
    backend.forward(model, *cache, batch, logits);
    if (keep) all.insert(all.end(), logits.begin(), logits.end());
  };
  feed(parent, std::span(tokens).first(6), true);
  const int child = cache->fork(parent);
  const int sibling = cache->fork(parent);
  cache->release(parent);
  feed(child, std::span(tokens).subspan(6, 1), true);
  feed(sibling, std::vector<int32_t>{3, 4}, false);
  feed(child, std::span(tokens).subspan(7), true);
  return all;
}

}  // namespace

class TestBatchInvariance : public QObject {
  Q_OBJECT

 private slots:
  void identicalLogits_data() {
    QTest::addColumn<QString>("shape");
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("simd");
    for (SimdLevel level : testable_simd_levels()) {
      // Q5_0 computed as stored, by its own kernel (as a loaded file's is)
      for (TensorType type : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0,
                              TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_1, TensorType::Q5_0,
                              TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K,
                              TensorType::Q6_K, TensorType::IQ4_XS, TensorType::IQ4_NL, TensorType::MXFP4}) {
        QTest::addRow("%s %s", simd_name(level).data(), type_traits(type).name.data())
            << QStringLiteral("tiny") << int(type) << int(level);
      }
      for (const char* shape : {"tiny-qwen2", "tiny-qwen3"}) {
        QTest::addRow("%s %s q8_0", simd_name(level).data(), shape)
            << QString(shape) << int(TensorType::Q8_0) << int(level);
      }
      // a mixture of experts: the crowd's tokens share the experts of the sequence's tokens
      for (TensorType type : {TensorType::F32, TensorType::Q8_0, TensorType::Q4_K, TensorType::MXFP4}) {
        QTest::addRow("%s tiny-qwen3moe %s", simd_name(level).data(), type_traits(type).name.data())
            << QStringLiteral("tiny-qwen3moe") << int(type) << int(level);
      }
    }
  }

  void identicalLogits() {
    QFETCH(QString, shape);
    QFETCH(int, type);
    QFETCH(int, simd);
    const SimdLevel level = SimdLevel(simd);
    ModelConfig config = random_model_config(shape.toStdString());
    if (type_traits(TensorType(type)).block_elements == 256) {
      config.dim = 256;  // whole 256-value blocks; head_dim 64 as in real models
      config.hidden_dim = config.has_experts() ? 256 : 512;
      if (config.explicit_head_dim > 0) config.explicit_head_dim = 64;  // q 256 wide, whole blocks
    }
    const auto model = make_random_model(config, TensorType(type), 9);
    std::mt19937 rng(5);
    const std::vector<int32_t> tokens = random_tokens(rng, kLength, model->config.vocab_size);
    std::unique_ptr<Backend> one_thread = create_cpu_backend(1, level);
    const std::vector<float> reference = run_chunks(*one_thread, *model, tokens, {kLength});
    QCOMPARE(reference.size(), size_t(kLength) * model->config.vocab_size);

    for (const auto& [threads, split] : {std::pair{1, false}, std::pair{2, false}, std::pair{2, true}}) {
      std::unique_ptr<Backend> backend = create_cpu_backend(threads, level, split);
      const auto check = [&](const std::vector<float>& logits, const char* how) {
        QVERIFY2(logits.size() == reference.size(), how);
        QVERIFY2(
            std::memcmp(logits.data(), reference.data(), reference.size() * sizeof(float)) == 0,
            qPrintable(QStringLiteral("%1 on %2 threads%3").arg(how).arg(threads).arg(split ? ", every job split" : "")));
      };
      check(run_chunks(*backend, *model, tokens, {kLength}), "one call");
      check(run_chunks(*backend, *model, tokens, std::vector<int>(kLength, 1)), "token by token");
      check(run_chunks(*backend, *model, tokens, {3, 5, 1, 4, 1}), "chunks 3,5,1,4,1");
      check(run_chunks(*backend, *model, tokens, {9, 2, 3}), "prompt then chunks");
      check(run_in_crowd(*backend, *model, tokens, rng), "in a batch of 8");
      check(run_forked(*backend, *model, tokens), "continued from a fork");
    }

    // weights prepared before the first forward (repacked, pages read in) give the same
    // bits; preparing reports its progress up to the whole, and stops when told to
    std::unique_ptr<Backend> prepared = create_cpu_backend(2, level);
    std::vector<double> done;
    prepared->prepare(*model, [&](double f) {
      done.push_back(f);
      return true;
    });
    QVERIFY(!done.empty() && std::is_sorted(done.begin(), done.end()) && done.back() == 1.0);
    const std::vector<float> logits = run_chunks(*prepared, *model, tokens, {3, 5, 1, 4, 1});
    QVERIFY2(logits.size() == reference.size() &&
                 std::memcmp(logits.data(), reference.data(), reference.size() * sizeof(float)) == 0,
             "after prepare()");
    QVERIFY_THROWS_EXCEPTION(ModelError, create_cpu_backend(1, level)->prepare(*model, [](double) { return false; }));
  }
};

QTEST_GUILESS_MAIN(TestBatchInvariance)
#include "test_batch_invariance.moc"
