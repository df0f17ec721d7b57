// The CPU backend on the real tinystories656k model (Hugging Face layout: safetensors,
// halves-rotation permuted at load) against logits computed by transformers' float32
// LlamaForCausalLM (tests/data/tinystories656k_logits.json): every position's argmax,
// and the full logits of the last position to a relative error below 1e-4.
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "compute/backend.h"
#include "logit_error.h"
#include "model/model.h"
#include "shared_data.h"

using namespace specula;

class TestTinyStories656kLogits : public QObject {
  Q_OBJECT

 private slots:
  void matchesTransformers_data() {
    QTest::addColumn<int>("threads");
    QTest::newRow("1 thread") << 1;
    QTest::newRow("2 threads") << 2;
  }

  void matchesTransformers() {
    QFETCH(int, threads);
    SPECULA_SHARED_FILE(config, "models/tinystories656k/config.json");
    const std::string directory = config.substr(0, config.rfind('/'));
    std::ifstream in(SPECULA_TEST_DATA_DIR "/tinystories656k_logits.json");
    QVERIFY2(in, "tests/data/tinystories656k_logits.json is missing");
    const nlohmann::json reference = nlohmann::json::parse(in);
    const std::shared_ptr<const Model> model = load_model(directory);
    std::unique_ptr<Backend> backend = create_cpu_backend(threads);
    QVERIFY(!reference["cases"].empty());
    for (const nlohmann::json& c : reference["cases"]) {
      const std::vector<int32_t> tokens = c["tokens"].get<std::vector<int32_t>>();
      const std::vector<int> argmax = c["argmax"].get<std::vector<int>>();
      const std::vector<double> last = c["last_logits"].get<std::vector<double>>();
      const int vocab = model->config.vocab_size;
      QCOMPARE(static_cast<int>(last.size()), vocab);
      std::unique_ptr<KvCache> cache =
          backend->create_cache(*model, static_cast<int>(tokens.size()));
      RaggedBatch batch;
      batch.add(cache->create(), tokens, true);
      std::vector<float> logits;
      backend->forward(*model, *cache, batch, logits);
      QCOMPARE(logits.size(), tokens.size() * vocab);
      for (size_t t = 0; t < tokens.size(); ++t) {
        const float* row = logits.data() + t * vocab;
        QCOMPARE(static_cast<int>(std::max_element(row, row + vocab) - row), argmax[t]);
      }
      const double error = specula::test::relative_error(logits.data() + (tokens.size() - 1) * vocab, last);
      qInfo("%s: relative error %.3g", c["text"].get<std::string>().substr(0, 24).c_str(), error);
      QVERIFY2(error < 1e-4, qPrintable(QString::number(error)));
    }
  }
};

QTEST_GUILESS_MAIN(TestTinyStories656kLogits)
#include "test_tinystories656k_logits.moc"
