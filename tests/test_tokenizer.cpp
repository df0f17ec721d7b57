// Tokenizer: every file format against SentencePiece's own results and independent references.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>

#include "model/gguf.h"
#include "model/tokenizer.h"
#include "shared_data.h"
#include "tokenizer_cases.h"

using specula::TokenKind;
using specula::Tokenizer;
using specula::Vocabulary;

using namespace specula::test;

namespace {

// The tokenizer of a vocabulary (SentencePiece ones in this suite).
std::unique_ptr<Tokenizer> make(Vocabulary vocab) { return specula::create_tokenizer(std::move(vocab)); }

void writeBytes(const QString& path, std::string_view bytes) {
  std::ofstream out(path.toStdString(), std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Every case must give the expected ids; a mismatch names the case.
void checkVocabCases(const Tokenizer& tokenizer, const std::vector<VocabCase>& cases) {
  QCOMPARE(cases.size(), size_t(46));
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int> got = tokenizer.encode(cases[i].text, false);
    if (got != cases[i].ids)
      QFAIL(qPrintable(QStringLiteral("case %1 %2: got %3 ids, expected %4")
                           .arg(i)
                           .arg(QString::fromStdString(cases[i].text).toHtmlEscaped())
                           .arg(got.size())
                           .arg(cases[i].ids.size())));
  }
}

// llama2.c's encode (run.c), written out naively over the raw tokenizer.bin pieces: a dummy
// " " first, each UTF-8 character looked up (else its bytes as <0xNN> = byte + 3), then the
// adjacent pair whose concatenation has the best score is merged until none is left.
std::vector<int> llama2cEncode(const std::vector<std::string>& rawPieces,
                               const std::vector<float>& scores, const std::string& text) {
  std::map<std::string, int> idOf;
  for (size_t id = 0; id < rawPieces.size(); ++id) idOf.emplace(rawPieces[id], static_cast<int>(id));
  std::vector<int> tokens;
  if (!text.empty()) tokens.push_back(idOf.at(" "));
  for (size_t i = 0; i < text.size();) {
    size_t len = 1;
    while (i + len < text.size() && (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80 &&
           len < 4)
      ++len;
    const auto it = idOf.find(text.substr(i, len));
    if (it != idOf.end()) {
      tokens.push_back(it->second);
    } else {
      for (size_t k = 0; k < len; ++k) tokens.push_back(static_cast<unsigned char>(text[i + k]) + 3);
    }
    i += len;
  }
  for (;;) {
    float best = -1e10f;
    int bestId = -1;
    size_t bestAt = 0;
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      const auto it = idOf.find(rawPieces[static_cast<size_t>(tokens[i])] +
                                rawPieces[static_cast<size_t>(tokens[i + 1])]);
      if (it != idOf.end() && scores[static_cast<size_t>(it->second)] > best) {
        best = scores[static_cast<size_t>(it->second)];
        bestId = it->second;
        bestAt = i;
      }
    }
    if (bestId < 0) break;
    tokens[bestAt] = bestId;
    tokens.erase(tokens.begin() + static_cast<std::ptrdiff_t>(bestAt) + 1);
  }
  return tokens;
}

// The pieces and scores of a llama2.c tokenizer.bin exactly as stored.
void readLlama2cRaw(const std::string& path, std::vector<std::string>& pieces,
                    std::vector<float>& scores) {
  const std::string bytes = readBytes(path);
  for (size_t at = 4; at + 8 <= bytes.size();) {
    float score;
    int32_t len;
    std::memcpy(&score, bytes.data() + at, 4);
    std::memcpy(&len, bytes.data() + at + 4, 4);
    pieces.push_back(bytes.substr(at + 8, static_cast<size_t>(len)));
    scores.push_back(score);
    at += 8 + static_cast<size_t>(len);
  }
}

// The text of the fenced block after `heading` in the stories260K oracle file.
std::string oracleBlock(const std::string& markdown, const std::string& heading) {
  const size_t h = markdown.find(heading);
  const size_t start = markdown.find("```text\n", h) + 8;
  const size_t end = markdown.find("\n```", start);
  return markdown.substr(start, end - start);
}

std::string errorOf(const std::string& path) {
  try {
    make(specula::load_vocabulary(path));
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return {};
}

void checkRoundTrips(const Tokenizer& tokenizer, const std::string& humanEval) {
  std::vector<std::string> texts = humanEvalTexts(humanEval);
  QCOMPARE(texts.size(), size_t(2 * 164));
  texts.insert(texts.end(), kTrickyTexts.begin(), kTrickyTexts.end());
  for (const std::string& text : texts) {
    const std::vector<int> ids = tokenizer.encode(text, true);
    QCOMPARE(ids.front(), tokenizer.bos());
    if (tokenizer.decode(ids) != text)
      QFAIL(qPrintable(QStringLiteral("round trip differs for: %1").arg(QString::fromStdString(text))));
  }
}

}  // namespace

class TestTokenizer : public QObject {
  Q_OBJECT

 private slots:
  void llamaVocabularyFromModel() {
    SPECULA_SHARED_FILE(model, "tokenizers/llama2/tokenizer.model");
    const Vocabulary vocab = specula::load_vocabulary(model);
    QCOMPARE(vocab.size(), 32000);
    QCOMPARE(vocab.kinds[0], TokenKind::Unknown);
    QCOMPARE(vocab.kinds[1], TokenKind::Control);
    QCOMPARE(vocab.kinds[2], TokenKind::Control);
    QCOMPARE(vocab.pieces[3], std::string("<0x00>"));
    QCOMPARE(vocab.kinds[3], TokenKind::Byte);
    QCOMPARE(vocab.kinds[258], TokenKind::Byte);
    QCOMPARE(vocab.kinds[259], TokenKind::Normal);
    QCOMPARE(vocab.pieces[306], std::string("\xE2\x96\x81I"));
    QCOMPARE(vocab.bos, 1);
    QCOMPARE(vocab.eos, 2);
    QCOMPARE(vocab.unk, 0);
    QVERIFY(!vocab.serialized_model.empty());
  }

  void llamaSpmVectorsFromModel() {
    SPECULA_SHARED_FILE(model, "tokenizers/llama2/tokenizer.model");
    SPECULA_SHARED_FILE(inp, "tokenizers/llama-spm-vocab/ggml-vocab-llama-spm.gguf.inp");
    SPECULA_SHARED_FILE(out, "tokenizers/llama-spm-vocab/ggml-vocab-llama-spm.gguf.out");
    checkVocabCases(*make(specula::load_vocabulary(model)), readVocabCases(inp, out));
  }

  // The same vectors through our own ModelProto writer: pieces, scores and kinds only.
  void llamaSpmVectorsFromReserializedPieces() {
    SPECULA_SHARED_FILE(model, "tokenizers/llama2/tokenizer.model");
    SPECULA_SHARED_FILE(inp, "tokenizers/llama-spm-vocab/ggml-vocab-llama-spm.gguf.inp");
    SPECULA_SHARED_FILE(out, "tokenizers/llama-spm-vocab/ggml-vocab-llama-spm.gguf.out");
    Vocabulary vocab = specula::load_vocabulary(model);
    vocab.serialized_model.clear();
    const auto tokenizer = make(std::move(vocab));
    checkVocabCases(*tokenizer, readVocabCases(inp, out));
    const std::string text = "def f(x):\n\treturn x  # \xE2\x9C\x93\n";
    QCOMPARE(tokenizer->encode(text, true), make(specula::load_vocabulary(model))->encode(text, true));
  }

  // The same vectors from the vocabulary embedded in llama.cpp's GGUF (tokenizer.ggml.*).
  void llamaSpmVectorsFromGgufVocabulary() {
    SPECULA_SHARED_FILE(gguf, "tokenizers/llama-spm-vocab/ggml-vocab-llama-spm.gguf");
    SPECULA_SHARED_FILE(inp, "tokenizers/llama-spm-vocab/ggml-vocab-llama-spm.gguf.inp");
    SPECULA_SHARED_FILE(out, "tokenizers/llama-spm-vocab/ggml-vocab-llama-spm.gguf.out");
    Vocabulary vocab = specula::gguf_vocabulary(specula::GgufFile::open(gguf));
    QVERIFY(vocab.serialized_model.empty());
    checkVocabCases(*make(std::move(vocab)), readVocabCases(inp, out));
  }

  // The writer's flags survive a trip through a file: no dummy prefix means no leading "▁".
  void writtenModelWithoutDummyPrefix() {
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    Vocabulary vocab = specula::load_vocabulary(tok);
    QVERIFY(vocab.add_dummy_prefix);
    vocab.add_dummy_prefix = false;
    QTemporaryDir dir;
    const QString path = dir.filePath("tokenizer.model");
    writeBytes(path, specula::serialize_sentencepiece_model(vocab));
    const Vocabulary loaded = specula::load_vocabulary(path.toStdString());
    QVERIFY(!loaded.add_dummy_prefix);
    QCOMPARE(loaded.pieces, vocab.pieces);
    QCOMPARE(loaded.scores, vocab.scores);
    QCOMPARE(loaded.kinds, vocab.kinds);
    const auto tokenizer = make(loaded);
    const std::vector<int> ids = tokenizer->encode("Zoo", false);
    QVERIFY(tokenizer->piece(ids.front()).rfind("\xE2\x96\x81", 0) != 0);
    QCOMPARE(tokenizer->decode(ids), std::string("Zoo"));
  }

  void meaningOfLife() {
    SPECULA_SHARED_FILE(model, "tokenizers/llama2/tokenizer.model");
    const auto tokenizer = make(specula::load_vocabulary(model));
    const std::vector<int> expected = {1, 306, 4658, 278, 6593, 310, 2834, 338};
    QCOMPARE(tokenizer->encode("I believe the meaning of life is", true), expected);
    QCOMPARE(tokenizer->decode(expected), std::string("I believe the meaning of life is"));
  }

  // Byte fallback makes decode(encode(x)) == x for every valid UTF-8 text.
  void roundTripsLlama2Model() {
    SPECULA_SHARED_FILE(model, "tokenizers/llama2/tokenizer.model");
    SPECULA_SHARED_FILE(humanEval, "data/humaneval/HumanEval.jsonl.gz");
    checkRoundTrips(*make(specula::load_vocabulary(model)), humanEval);
  }

  void roundTripsStories260K() {
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    SPECULA_SHARED_FILE(humanEval, "data/humaneval/HumanEval.jsonl.gz");
    checkRoundTrips(*make(specula::load_vocabulary(tok)), humanEval);
  }

  // tinystories656k has no byte pieces: characters outside its vocabulary become <unk>, so
  // only texts made of known characters round-trip; the others must show <unk>.
  void tinystoriesRoundTrips() {
    SPECULA_SHARED_FILE(json, "models/tinystories656k/tokenizer.json");
    const auto owned = make(specula::load_vocabulary(json));
    const Tokenizer& tokenizer = *owned;
    QCOMPARE(tokenizer.size(), 2048);
    QCOMPARE(tokenizer.bos(), 1);
    QCOMPARE(tokenizer.eos(), 2);
    const std::vector<std::string> known = {
        "Once upon a time, there was a little girl named Lily.\nShe loved to play!",
        "  two  spaces\n\n\nand newlines ",
        "Tom said: \"I can't; it's 42.\" Then - he ran?",
    };
    for (const std::string& text : known) QCOMPARE(tokenizer.decode(tokenizer.encode(text, true)), text);
    const std::vector<int> ids = tokenizer.encode("a(b)", false);
    QVERIFY(std::count(ids.begin(), ids.end(), tokenizer.vocabulary().unk) > 0);
  }

  void tinystoriesMatchesHuggingFace() {
    SPECULA_SHARED_FILE(json, "models/tinystories656k/tokenizer.json");
    QFile file(QStringLiteral(SPECULA_TEST_DATA_DIR "/tinystories656k_tokens.json"));
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QJsonArray cases = QJsonDocument::fromJson(file.readAll()).array();
    QVERIFY(cases.size() >= 10);
    const auto tokenizer = make(specula::load_vocabulary(json));
    for (const QJsonValue& value : cases) {
      const std::string text = value["text"].toString().toStdString();
      std::vector<int> expected;
      for (const QJsonValue& id : value["ids"].toArray()) expected.push_back(id.toInt());
      const std::vector<int> got = tokenizer->encode(text, false);
      if (got != expected)
        QFAIL(qPrintable(QStringLiteral("ids differ for: %1").arg(QString::fromStdString(text))));
    }
  }

  // llama2.c encodes the prompt "Zoo" with the dummy-prefix space: " Zoo".
  void stories260KMatchesLlama2c() {
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    SPECULA_SHARED_FILE(oracles, "oracles/stories260K.md");
    const Vocabulary vocab = specula::load_vocabulary(tok);
    QCOMPARE(vocab.size(), 512);
    QCOMPARE(vocab.pieces[259], std::string("\xE2\x96\x81t"));
    QCOMPARE(vocab.kinds[3], TokenKind::Byte);
    const auto owned = make(vocab);
    const Tokenizer& tokenizer = *owned;
    std::vector<std::string> raw;
    std::vector<float> scores;
    readLlama2cRaw(tok, raw, scores);

    for (const std::string text : {"Zoo", " Zoo", "Zoo\n\tzoo  \xE4\xB8\xAD!"}) {
      const std::vector<int> ids = tokenizer.encode(text, false);
      QCOMPARE(ids, llama2cEncode(raw, scores, text));
      QCOMPARE(tokenizer.decode(ids), text);
    }
    const std::vector<int> zoo = tokenizer.encode("Zoo", false);
    QCOMPARE(tokenizer.piece(zoo.front()).substr(0, 3), std::string("\xE2\x96\x81"));
    const std::string markdown = readBytes(oracles);
    for (const char* heading : {"## 1.", "## 2."}) {
      const std::string story = oracleBlock(markdown, heading);
      QVERIFY(story.size() > 100);
      const std::vector<int> ids = tokenizer.encode(story, false);
      QCOMPARE(ids, llama2cEncode(raw, scores, story));
      std::vector<int> withBos = {1};
      withBos.insert(withBos.end(), ids.begin(), ids.end());
      QCOMPARE(tokenizer.decode(withBos), story);
    }
    const std::vector<int> story2 = tokenizer.encode(oracleBlock(markdown, "## 2."), false);
    QVERIFY(std::equal(zoo.begin(), zoo.end(), story2.begin()));
  }

  // Random streams (every kind of id, and text whose characters are split over byte pieces)
  // pushed in random chunks: deltas are whole UTF-8 and add up to decode(prefix + tokens).
  void incrementalDecoder() {
    SPECULA_SHARED_FILE(model, "tokenizers/llama2/tokenizer.model");
    const auto owned = make(specula::load_vocabulary(model));
    const Tokenizer& tokenizer = *owned;
    std::mt19937 rng(1234);
    const std::vector<int> prompt = tokenizer.encode("def f():\n    return '\xE4\xB8\xAD", true);
    const std::vector<int> emoji = tokenizer.encode(" \xF0\x9F\xA6\x99\xF0\x9F\x98\x80 \xE4\xB8\x80\xE9\xBE\x98", false);
    QVERIFY(std::count_if(emoji.begin(), emoji.end(), [&](int id) {
              return tokenizer.vocabulary().kinds[static_cast<size_t>(id)] == TokenKind::Byte;
            }) >= 4);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<int> stream;
      const int length = 1 + static_cast<int>(rng() % 40);
      for (int i = 0; i < length; ++i) {
        switch (rng() % 4) {
          case 0: stream.push_back(static_cast<int>(rng() % 32000)); break;
          case 1: stream.push_back(3 + static_cast<int>(rng() % 256)); break;  // any byte
          case 2: stream.insert(stream.end(), emoji.begin(), emoji.end()); break;
          default: stream.push_back(static_cast<int>(259 + rng() % 2000)); break;
        }
      }
      if (trial % 3 == 0 && rng() % 2) stream.resize(stream.size() - 1);  // end mid-character
      const std::vector<int> prefix = trial % 2 ? prompt : std::vector<int>{1};
      const std::string mismatch = streamingMismatch(tokenizer, prefix, stream, rng);
      QVERIFY2(mismatch.empty(), mismatch.c_str());
    }
  }

  void badInput() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString empty = dir.filePath("empty.model");
    writeBytes(empty, "");
    QVERIFY(errorOf(empty.toStdString()).find("empty") != std::string::npos);

    std::mt19937 rng(7);
    std::string noise(4096, '\0');
    for (char& c : noise) c = static_cast<char>(rng());
    const QString random = dir.filePath("random.bin");
    writeBytes(random, noise);
    QVERIFY(errorOf(random.toStdString()).find("not a tokenizer file") != std::string::npos);

    QVERIFY(errorOf(dir.filePath("missing.model").toStdString()).find("cannot open") != std::string::npos);

    const QString json = dir.filePath("tokenizer.json");
    writeBytes(json, "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}");
    QVERIFY(errorOf(json.toStdString()).find("WordPiece") != std::string::npos);
    writeBytes(json, "{\"model\": {\"type\": \"BPE\"");
    QVERIFY(errorOf(json.toStdString()).find("not valid JSON") != std::string::npos);

    SPECULA_SHARED_FILE(gguf, "tokenizers/llama-spm-vocab/ggml-vocab-llama-spm.gguf");
    QVERIFY(errorOf(gguf).find("GGUF") != std::string::npos);
    SPECULA_SHARED_FILE(checkpoint, "models/stories260K/stories260K.bin");
    QVERIFY(errorOf(checkpoint).find("not a tokenizer file") != std::string::npos);
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    const std::string tokBytes = readBytes(tok);
    const QString truncated = dir.filePath("truncated.bin");
    writeBytes(truncated, std::string_view(tokBytes).substr(0, tokBytes.size() - 3));
    QVERIFY(!errorOf(truncated.toStdString()).empty());
    SPECULA_SHARED_FILE(model, "tokenizers/llama2/tokenizer.model");
    const std::string modelBytes = readBytes(model);
    writeBytes(truncated, std::string_view(modelBytes).substr(0, modelBytes.size() / 2));
    QVERIFY(!errorOf(truncated.toStdString()).empty());

    Vocabulary inconsistent = specula::load_vocabulary(tok);
    inconsistent.scores.pop_back();
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, make(inconsistent));
    const auto tokenizer = make(specula::load_vocabulary(tok));
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, tokenizer->decode(std::vector<int>{5, 512}));
  }
};

QTEST_GUILESS_MAIN(TestTokenizer)
#include "test_tokenizer.moc"
