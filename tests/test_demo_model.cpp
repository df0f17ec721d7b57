// The demo pair in resources/models (trained by tools/train) loads with the engine,
// tokenizes as SentencePiece does, and computes the logits of PyTorch's float64 pass over
// the same GGUF weights (tests/data/demo_reference.json, written by tools/train/reference.py).
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "compute/backend.h"
#include "model/model.h"
#include "model/model_export.h"

using namespace specula;
using nlohmann::json;

namespace {

constexpr double kMaxRelativeError = 1e-3;  // F16 weights, float32 arithmetic vs float64

const json& reference() {
  static const json data = [] {
    std::ifstream in(SPECULA_TEST_DATA_DIR "/demo_reference.json");
    return in ? json::parse(in) : json();
  }();
  return data;
}

std::shared_ptr<const Model> demo_model(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const Model>> loaded;
  auto& model = loaded[name];
  if (!model)
    model = load_model(SPECULA_SOURCE_DIR "/resources/models/specula-demo-" + name + ".gguf");
  return model;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// max |got - want| / max |want| over one logits vector (or over the entries `ids` picks).
double relative_error(const float* got, const json& want, const std::vector<int>& ids) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double w = want[i].get<double>();
    diff = std::max(diff, std::abs(static_cast<double>(got[ids.empty() ? i : ids[i]]) - w));
    scale = std::max(scale, std::abs(w));
  }
  return diff / scale;
}

std::vector<int32_t> encode_with_bos(const Model& model, const std::string& text) {
  const std::vector<int> ids = model.tokenizer->encode(text, true);
  return {ids.begin(), ids.end()};
}

void add_model_rows() {
  QTest::addColumn<QString>("name");
  QTest::newRow("target") << QStringLiteral("target");
  QTest::newRow("draft") << QStringLiteral("draft");
}

void add_case_rows() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<int>("index");
  for (const QString& name : {QStringLiteral("target"), QStringLiteral("draft")})
    for (int i = 0; i < 3; ++i)
      QTest::addRow("%s, input %d", qPrintable(name), i) << name << i;
}

// Token by token through the cache: the greedy continuation of want["tokens"] equals
// want["greedy_tokens"]. Steps where the reference's choice leads the runner-up by too little
// for float32 to be sure are not compared; the reference's token is fed there, so the
// sequence stays on the reference's path.
void check_greedy(const Model& model, const json& want) {
  const auto expected = want["greedy_tokens"].get<std::vector<int32_t>>();
  const auto margins = want["greedy_margins"].get<std::vector<double>>();
  std::vector<int32_t> tokens = want["tokens"].get<std::vector<int32_t>>();

  std::unique_ptr<Backend> backend = create_cpu_backend(1);
  std::unique_ptr<KvCache> cache = backend->create_cache(model, static_cast<int>(tokens.size() + expected.size()));
  const int seq = cache->create();
  RaggedBatch batch;
  batch.add(seq, tokens, false);
  std::vector<float> logits;
  size_t compared = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    backend->forward(model, *cache, batch, logits);
    const auto best = std::max_element(logits.begin(), logits.end());
    if (margins[i] > 1e-2) {
      QCOMPARE(static_cast<int32_t>(best - logits.begin()), expected[i]);
      ++compared;
    }
    tokens.push_back(expected[i]);
    batch = RaggedBatch();
    batch.add(seq, std::span(tokens).last(1), false);
  }
  QVERIFY2(compared * 2 >= expected.size(), "too few clear choices to compare");
}

}  // namespace

class TestDemoModel : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QVERIFY2(reference().contains("models"),
             "tests/data/demo_reference.json is missing or unreadable");
  }

  // Shapes from the GGUF keys; matrices F16 in the target and F32 in the draft, norms F32,
  // classifier tied to the embedding.
  void configAndTypes_data() { add_model_rows(); }
  void configAndTypes() {
    QFETCH(QString, name);
    const Model& model = *demo_model(name.toStdString());
    const json& want = reference()["models"][name.toStdString()]["config"];
    QCOMPARE(model.config.dim, want["dim"].get<int>());
    QCOMPARE(model.config.hidden_dim, want["hidden_dim"].get<int>());
    QCOMPARE(model.config.n_layers, want["n_layers"].get<int>());
    QCOMPARE(model.config.n_heads, want["n_heads"].get<int>());
    QCOMPARE(model.config.n_kv_heads, want["n_kv_heads"].get<int>());
    QCOMPARE(model.config.vocab_size, want["vocab_size"].get<int>());
    QCOMPARE(model.config.context_length, want["context_length"].get<int>());
    QVERIFY(model.tied_output());
    const TensorType matrix = name == "target" ? TensorType::F16 : TensorType::F32;
    QVERIFY(model.weights.token_embedding.type == matrix);
    for (const LayerWeights& layer : model.weights.layers) {
      for (const TensorView* m : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w_gate,
                                  &layer.w_up, &layer.w_down})
        QVERIFY(m->type == matrix);
      QVERIFY(layer.attn_norm.type == TensorType::F32);
      QVERIFY(layer.ffn_norm.type == TensorType::F32);
    }
    QVERIFY(model.weights.final_norm.type == TensorType::F32);
  }

  // The prompt in one call: every position's logits at the sampled ids, and all of the last.
  void logitsMatchReference_data() { add_case_rows(); }
  void logitsMatchReference() {
    QFETCH(QString, name);
    QFETCH(int, index);
    const Model& model = *demo_model(name.toStdString());
    const json& want = reference()["models"][name.toStdString()]["cases"][index];
    const std::vector<int32_t> tokens = encode_with_bos(model, want["text"].get<std::string>());
    QCOMPARE(tokens, want["tokens"].get<std::vector<int32_t>>());

    std::unique_ptr<Backend> backend = create_cpu_backend(1);
    std::unique_ptr<KvCache> cache = backend->create_cache(model, static_cast<int>(tokens.size()));
    RaggedBatch batch;
    batch.add(cache->create(), tokens, true);
    std::vector<float> logits;
    backend->forward(model, *cache, batch, logits);
    const size_t vocab = static_cast<size_t>(model.config.vocab_size);
    QCOMPARE(logits.size(), tokens.size() * vocab);

    const std::vector<int> sampled = reference()["sampled_ids"].get<std::vector<int>>();
    double worst = 0;
    for (size_t p = 0; p < tokens.size(); ++p) {
      const double error = relative_error(&logits[p * vocab], want["sampled_logits"][p], sampled);
      QVERIFY2(error < kMaxRelativeError,
               qPrintable(QStringLiteral("position %1: %2").arg(p).arg(error)));
      worst = std::max(worst, error);
    }
    const double error = relative_error(&logits[(tokens.size() - 1) * vocab], want["last_logits"], {});
    QVERIFY2(error < kMaxRelativeError, qPrintable(QStringLiteral("last position: %1").arg(error)));
    qInfo("%zu positions, largest relative error %.2e", tokens.size(), std::max(worst, error));
  }

  // Token by token through the cache: the greedy continuation (check_greedy).
  void greedyContinuationMatches_data() { add_case_rows(); }
  void greedyContinuationMatches() {
    QFETCH(QString, name);
    QFETCH(int, index);
    const json& want = reference()["models"][name.toStdString()]["cases"][index];
    check_greedy(*demo_model(name.toStdString()), want);
  }

  // Fill in the middle (tools/train/fim.py): the engine lays a hole out as the pair was
  // trained on it, suffix first as the files say (specula.fim.order "spm"): <fim_suffix>
  // suffix <fim_prefix> prefix <fim_middle>, and writes the reference's greedy middle.
  void fimPromptAndMiddleMatchReference_data() { add_model_rows(); }
  void fimPromptAndMiddleMatchReference() {
    QFETCH(QString, name);
    const Model& model = *demo_model(name.toStdString());
    const json& holes = reference()["models"][name.toStdString()]["fim"];
    QVERIFY2(holes.is_array() && !holes.empty(), "no FIM holes in tests/data/demo_reference.json");
    QVERIFY(model.tokenizer->fim().complete());
    for (const json& hole : holes) {
      const std::vector<int> ids = model.tokenizer->fim_prompt(hole["prefix"].get<std::string>(),
                                                               hole["suffix"].get<std::string>());
      QCOMPARE(ids, hole["tokens"].get<std::vector<int>>());
      check_greedy(model, hole);
    }
  }

  // The order survives a GGUF written by the engine (model_export).
  void fimOrderSurvivesExport() {
    QVERIFY(demo_model("target")->tokenizer->fim().spm);
    QTemporaryDir dir;
    const std::string path = dir.filePath("target.gguf").toStdString();
    write_gguf_model(*demo_model("target"), path, TensorType::F16);
    QVERIFY(load_model(path)->tokenizer->fim().spm);
  }

  // Both files carry the same vocabulary, and the engine's tokenizer (rebuilt from the GGUF
  // vocabulary) gives SentencePiece's ids and decodes them back byte for byte.
  void tokenizerMatchesSentencePiece() {
    const Tokenizer& target = *demo_model("target")->tokenizer;
    const Tokenizer& draft = *demo_model("draft")->tokenizer;
    QCOMPARE(draft.vocabulary().pieces, target.vocabulary().pieces);
    QVERIFY(!reference()["tokenizer"].empty());
    for (const json& entry : reference()["tokenizer"]) {
      const std::string text = entry["text"].get<std::string>();
      const std::vector<int> ids = target.encode(text, false);
      QCOMPARE(ids, entry["ids"].get<std::vector<int>>());
      QCOMPARE(target.decode(ids), text);
    }
  }

  // Whole source files the tokenizer was never shown round-trip exactly: the training
  // scripts and the demo problem set.
  void tokenizerRoundTripsFiles() {
    const Tokenizer& tokenizer = *demo_model("target")->tokenizer;
    std::vector<std::filesystem::path> files{SPECULA_SOURCE_DIR "/resources/problems/demo.jsonl"};
    for (const auto& entry : std::filesystem::directory_iterator(SPECULA_SOURCE_DIR "/tools/train"))
      if (entry.path().extension() == ".py") files.push_back(entry.path());
    QVERIFY(files.size() > 5);
    for (const auto& path : files) {
      const std::string text = read_file(path);
      QVERIFY(!text.empty());
      QVERIFY2(tokenizer.decode(tokenizer.encode(text, false)) == text,
               qPrintable(QString::fromStdString(path.string())));
    }
  }
};

QTEST_GUILESS_MAIN(TestDemoModel)
#include "test_demo_model.moc"
