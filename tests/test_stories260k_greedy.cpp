// Greedy decoding of the real stories260K model with the CPU backend reproduces the
// reference C implementation's outputs (../shared/oracles/stories260K.md) byte for byte,
// from the llama2.c checkpoint and from the same model converted to GGUF; converted to F16
// and Q8_0 its first 40 generated tokens stay the same.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>

#include "compute/backend.h"
#include "model/model.h"
#include "model/model_export.h"
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
std::vector<int> greedy_tokens(const Model& model, Backend& backend, const std::string& prompt, int steps) {
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
  return std::vector<int>(tokens.begin() + 1, tokens.end());  // without BOS
}

std::string greedy(const Model& model, Backend& backend, const std::string& prompt, int steps) {
  std::string text = model.tokenizer->decode(greedy_tokens(model, backend, prompt, steps));
  if (!text.empty() && text.front() == ' ') text.erase(0, 1);  // the dummy-prefix space
  return text;
}

// The checkpoint as loaded, or written as GGUF of `type` into `dir` and loaded back.
std::shared_ptr<const Model> load_as(const std::string& checkpoint, const std::string& tokenizer,
                                     const QString& format, const QTemporaryDir& dir) {
  LoadOptions options;
  options.tokenizer_path = tokenizer;
  std::shared_ptr<const Model> model = load_model(checkpoint, options);
  if (format == "llama2.c") return model;
  const std::string path = dir.filePath(format + ".gguf").toStdString();
  write_gguf_model(*model, path, *tensor_type_from_name(format.toStdString()));
  return load_model(path);
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
    QTest::addColumn<QString>("format");
    QTest::newRow("no prompt, 200 steps, 1 thread") << QString() << 200 << 1 << 0 << "llama2.c";
    QTest::newRow("no prompt, 200 steps, 2 threads") << QString() << 200 << 2 << 0 << "llama2.c";
    QTest::newRow("Zoo, 60 steps") << QStringLiteral("Zoo") << 60 << 2 << 1 << "llama2.c";
    QTest::newRow("no prompt, 200 steps, GGUF f32") << QString() << 200 << 2 << 0 << "f32";
    QTest::newRow("Zoo, 60 steps, GGUF f32") << QStringLiteral("Zoo") << 60 << 2 << 1 << "f32";
  }

  void matchesReference() {
    QFETCH(QString, prompt);
    QFETCH(int, steps);
    QFETCH(int, threads);
    QFETCH(int, block);
    QFETCH(QString, format);
    SPECULA_SHARED_FILE(checkpoint, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tokenizer, "models/stories260K/tok512.bin");
    SPECULA_SHARED_FILE(oracle, "oracles/stories260K.md");
    const QString expected = QString::fromStdString(oracle_text_block(oracle, static_cast<size_t>(block)));
    QVERIFY(!expected.isEmpty());
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::shared_ptr<const Model> model = load_as(checkpoint, tokenizer, format, dir);
    QVERIFY(model->tokenizer);
    std::unique_ptr<Backend> backend = create_cpu_backend(threads);
    const std::string text = greedy(*model, *backend, prompt.toStdString(), steps);
    QCOMPARE(QString::fromStdString(text), expected);
  }

  void convertedFirst40TokensMatch_data() {
    QTest::addColumn<QString>("format");
    QTest::newRow("f16") << "f16";
    QTest::newRow("q8_0") << "q8_0";
  }

  void convertedFirst40TokensMatch() {
    QFETCH(QString, format);
    SPECULA_SHARED_FILE(checkpoint, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tokenizer, "models/stories260K/tok512.bin");
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    std::unique_ptr<Backend> backend = create_cpu_backend(2);
    const auto reference = load_as(checkpoint, tokenizer, "llama2.c", dir);
    const auto converted = load_as(checkpoint, tokenizer, format, dir);
    QCOMPARE(type_traits(converted->weights.layers[0].wq.type).name, format.toStdString());
    for (const std::string prompt : {"", "Zoo"}) {
      const std::vector<int> want = greedy_tokens(*reference, *backend, prompt, 60);
      const std::vector<int> got = greedy_tokens(*converted, *backend, prompt, 60);
      const size_t prompt_tokens = reference->tokenizer->encode(prompt, true).size() - 1;
      QVERIFY(want.size() >= prompt_tokens + 40);
      QVERIFY(got.size() >= prompt_tokens + 40);
      QCOMPARE(std::vector<int>(got.begin(), got.begin() + static_cast<long>(prompt_tokens) + 40),
               std::vector<int>(want.begin(), want.begin() + static_cast<long>(prompt_tokens) + 40));
    }
  }
};

QTEST_GUILESS_MAIN(TestStories260kGreedy)
#include "test_stories260k_greedy.moc"
