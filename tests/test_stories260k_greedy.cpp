// Greedy decoding of the real stories260K model with the CPU backend reproduces the
// reference C implementation's outputs (../shared/oracles/stories260K.md) byte for byte.
#include <QtTest>
#include <algorithm>

#include "backend.h"
#include "model.h"
#include "oracle_text.h"
#include "shared_data.h"

using namespace specula;
using namespace specula::test;

namespace {

// llama2.c's generate loop: `steps` forward passes over positions 0 .. steps-1, each
// yielding the next token (the prompt's own while inside it, else the argmax), stopping
// early at BOS; the text is every token after BOS, so steps tokens in all. (The oracle's
// note counts BOS among the steps, but its texts hold steps tokens after BOS, as run.c
// prints.) The prompt goes through in one call; each generated token in its own.
std::string greedy(const Model& model, Backend& backend, const std::string& prompt, int steps) {
  const Tokenizer& tokenizer = *model.tokenizer;
  std::vector<int32_t> tokens;
  for (int id : tokenizer.encode(prompt, true)) tokens.push_back(id);
  std::unique_ptr<KvCache> cache = backend.create_cache(model, steps);
  const int seq = cache->create();
  std::vector<float> logits;
  RaggedBatch batch;
  batch.add(seq, tokens, false);
  while (static_cast<int>(tokens.size()) < steps + 1) {
    backend.forward(model, *cache, batch, logits);
    const int next =
        static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (next == tokenizer.bos()) break;
    tokens.push_back(next);
    batch = RaggedBatch();
    batch.add(seq, std::span(tokens).last(1), false);
  }
  const std::vector<int> ids(tokens.begin() + 1, tokens.end());
  std::string text = tokenizer.decode(ids);
  if (!text.empty() && text.front() == ' ') text.erase(0, 1);  // the dummy-prefix space
  return text;
}

}  // namespace

class TestStories260kGreedy : public QObject {
  Q_OBJECT

 private slots:
  void matchesReference_data() {
    QTest::addColumn<QString>("prompt");
    QTest::addColumn<int>("steps");
    QTest::addColumn<int>("threads");
    QTest::addColumn<int>("block");  // which ```text block of the oracle file
    QTest::newRow("no prompt, 200 steps, 1 thread") << QString() << 200 << 1 << 0;
    QTest::newRow("no prompt, 200 steps, 2 threads") << QString() << 200 << 2 << 0;
    QTest::newRow("Zoo, 60 steps") << QStringLiteral("Zoo") << 60 << 2 << 1;
  }

  void matchesReference() {
    QFETCH(QString, prompt);
    QFETCH(int, steps);
    QFETCH(int, threads);
    QFETCH(int, block);
    SPECULA_SHARED_FILE(checkpoint, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tokenizer, "models/stories260K/tok512.bin");
    SPECULA_SHARED_FILE(oracle, "oracles/stories260K.md");
    const QString expected = QString::fromStdString(oracle_text_block(oracle, static_cast<size_t>(block)));
    QVERIFY(!expected.isEmpty());
    LoadOptions options;
    options.tokenizer_path = tokenizer;
    const std::shared_ptr<const Model> model = load_model(checkpoint, options);
    QVERIFY(model->tokenizer);
    std::unique_ptr<Backend> backend = create_cpu_backend(threads);
    const std::string text = greedy(*model, *backend, prompt.toStdString(), steps);
    QCOMPARE(QString::fromStdString(text), expected);
  }
};

QTEST_GUILESS_MAIN(TestStories260kGreedy)
#include "test_stories260k_greedy.moc"
