// Byte-level BPE: the real vocabularies against llama.cpp's and tiktoken's vectors id for id,
// the pre-tokenizer rules and tokenizer.json files against Hugging Face `tokenizers`
// (tests/data/bpe_oracle.json), special tokens, the end-of-generation set, fill-in-the-middle
// prompts against each family's reference, round trips and streaming decode.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>

#include "model/gguf.h"
#include "model/model_export.h"
#include "model/random_model.h"
#include "model/tokenizer.h"
#include "shared_data.h"
#include "tokenizer_cases.h"

using namespace specula;
using namespace specula::test;

namespace {

// Qwen2.5's special tokens, from id 151643 (its tokenizer_config.json).
const std::vector<std::string> kQwenSpecials = {
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
    "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
};

// The Qwen vocabulary as a GGUF of Qwen2.5 holds it: pieces and merges from the tiktoken
// ranks, then the special tokens as control tokens, <|endoftext|> as EOS.
Vocabulary qwenVocabulary(const std::string& ranks) {
  Vocabulary vocab = tiktoken_vocabulary(readBytes(ranks), "qwen2");
  for (const std::string& special : kQwenSpecials) {
    vocab.pieces.push_back(special);
    vocab.scores.push_back(0.0f);
    vocab.kinds.push_back(TokenKind::Control);
  }
  vocab.eos = 151643;
  return vocab;
}

std::unique_ptr<Tokenizer> ggufTokenizer(const std::string& path) {
  return create_tokenizer(gguf_vocabulary(GgufFile::open(path)));
}

QJsonObject readOracle() {
  QFile file(QStringLiteral(SPECULA_TEST_DATA_DIR "/bpe_oracle.json"));
  if (!file.open(QIODevice::ReadOnly)) return {};
  return QJsonDocument::fromJson(file.readAll()).object();
}

std::vector<int> toIds(const QJsonValue& array) {
  std::vector<int> ids;
  for (const QJsonValue& id : array.toArray()) ids.push_back(id.toInt());
  return ids;
}

QString shown(const std::string& text) { return QString::fromStdString(text).toHtmlEscaped(); }

// Streaming the ids one at a time and in chunks of three gives exactly decode(ids).
bool streamsLikeDecode(const Tokenizer& tokenizer, const std::vector<int>& ids) {
  const std::string whole = tokenizer.decode(ids);
  for (const size_t chunk : {size_t(1), size_t(3)}) {
    IncrementalDecoder decoder(tokenizer);
    std::string text;
    for (size_t at = 0; at < ids.size(); at += chunk) {
      const std::string delta = decoder.push(std::span<const int>(ids).subspan(at, std::min(chunk, ids.size() - at)));
      if (!isValidUtf8(delta)) return false;
      text += delta;
    }
    text += decoder.finish();
    if (text != whole) return false;
  }
  return true;
}

// Every case gives the expected ids, decodes back to its text and streams like decode.
void checkCases(const Tokenizer& tokenizer, const std::vector<VocabCase>& cases) {
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int> got = tokenizer.encode(cases[i].text, false);
    if (got != cases[i].ids)
      QFAIL(qPrintable(QStringLiteral("case %1 \"%2\": got %3 ids, expected %4")
                           .arg(i).arg(shown(cases[i].text)).arg(got.size()).arg(cases[i].ids.size())));
    if (tokenizer.decode(got) != cases[i].text)
      QFAIL(qPrintable(QStringLiteral("case %1 \"%2\" does not decode back").arg(i).arg(shown(cases[i].text))));
    if (!streamsLikeDecode(tokenizer, got))
      QFAIL(qPrintable(QStringLiteral("case %1 \"%2\" streams differently").arg(i).arg(shown(cases[i].text))));
  }
}

// A Hugging Face tokenizer.json: the oracle's skeleton (written by `tokenizers`) with the
// vocabulary's pieces, merges and its control and user-defined tokens as added tokens.
void writeTokenizerJson(const QString& path, const QJsonObject& skeleton, const Vocabulary& vocab) {
  nlohmann::json doc = nlohmann::json::parse(QJsonDocument(skeleton).toJson().toStdString());
  nlohmann::json pieces = nlohmann::json::object(), added = nlohmann::json::array();
  for (int id = 0; id < vocab.size(); ++id) {
    const TokenKind kind = vocab.kinds[static_cast<size_t>(id)];
    const std::string& piece = vocab.pieces[static_cast<size_t>(id)];
    if (kind == TokenKind::Control || kind == TokenKind::UserDefined)
      added.push_back({{"id", id}, {"content", piece}, {"special", kind == TokenKind::Control}, {"single_word", false},
                       {"lstrip", false}, {"rstrip", false}, {"normalized", false}});
    else
      pieces[piece] = id;
  }
  doc["model"]["vocab"] = pieces;
  doc["model"]["merges"] = vocab.merges;
  doc["added_tokens"] = added;
  std::ofstream(path.toStdString(), std::ios::binary) << doc.dump();
}

void writeJson(const QString& path, const QJsonObject& doc) {
  QFile file(path);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write(QJsonDocument(doc).toJson(QJsonDocument::Compact));
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

}  // namespace

class TestTokenizerBpe : public QObject {
  Q_OBJECT

  // Made once: the Qwen vocabulary takes a moment to derive.
  std::unique_ptr<Tokenizer> qwen_;
  QJsonObject oracle_;

  // The oracle's "ids" or "skeleton" of one pre-tokenizer family.
  QJsonValue family(const QString& pre, const char* what) const {
    return oracle_.value("pre_tokenizers").toObject().value(pre).toObject().value(what);
  }

  const Tokenizer* qwen() {
    if (!qwen_) {
      const QString ranks = sharedFile(QStringLiteral("tokenizers/qwen/qwen.tiktoken"));
      if (!ranks.isEmpty()) qwen_ = create_tokenizer(qwenVocabulary(ranks.toStdString()));
    }
    return qwen_.get();
  }

 private slots:
  void initTestCase() {
    oracle_ = readOracle();
    QVERIFY2(!oracle_.isEmpty(), "tests/data/bpe_oracle.json is missing");
  }

  // llama.cpp's vectors for the byte-level vocabularies it ships (ids from each model's
  // Hugging Face tokenizer).
  void llamaCppVectors_data() {
    QTest::addColumn<QString>("name");
    for (const char* name : {"deepseek-coder", "starcoder", "gpt-2"}) QTest::newRow(name) << QString(name);
  }
  void llamaCppVectors() {
    QFETCH(QString, name);
    const QString base = "tokenizers/bpe-vocab/ggml-vocab-" + name + ".gguf";
    SPECULA_SHARED_PATH(gguf, base);
    SPECULA_SHARED_PATH(inp, base + ".inp");
    SPECULA_SHARED_PATH(out, base + ".out");
    const auto tokenizer = ggufTokenizer(gguf);
    QCOMPARE(tokenizer->model(), TokenizerModel::ByteLevelBpe);
    const std::vector<VocabCase> cases = readVocabCases(inp, out);
    QCOMPARE(cases.size(), size_t(46));
    checkCases(*tokenizer, cases);
  }

  // tiktoken's ids for the Qwen vocabulary, with the vocabulary built from the ranks the way
  // a GGUF holds it (pieces in GPT-2's byte mapping, merges derived from the ranks).
  void qwenTiktokenVectors() {
    SPECULA_SHARED_FILE(inp, "tokenizers/qwen/qwen.tiktoken.inp");
    SPECULA_SHARED_FILE(out, "tokenizers/qwen/qwen.tiktoken.out");
    QVERIFY(qwen());
    QCOMPARE(qwen()->size(), 151643 + 22);
    QCOMPARE(qwen()->vocabulary().merges.size(), size_t(151643 - 256));
    QCOMPARE(qwen()->piece(220), std::string("\xC4\xA0"));  // "Ġ": a space
    const std::vector<VocabCase> cases = readVocabCases(inp, out);
    QCOMPARE(cases.size(), size_t(51));
    checkCases(*qwen(), cases);
  }

  // decode(encode(x)) == x and streaming == decode for every HumanEval prompt and solution
  // and the whitespace / UTF-8 texts, in every vocabulary.
  void roundTrips_data() {
    QTest::addColumn<QString>("name");
    for (const char* name : {"deepseek-coder", "starcoder", "gpt-2", "qwen"}) QTest::newRow(name) << QString(name);
  }
  void roundTrips() {
    QFETCH(QString, name);
    SPECULA_SHARED_FILE(humanEval, "data/humaneval/HumanEval.jsonl.gz");
    std::unique_ptr<Tokenizer> owned;
    const Tokenizer* tokenizer = nullptr;
    if (name == "qwen") {
      tokenizer = qwen();
      if (!tokenizer) QSKIP("qwen.tiktoken is missing");
    } else {
      SPECULA_SHARED_PATH(gguf, "tokenizers/bpe-vocab/ggml-vocab-" + name + ".gguf");
      owned = ggufTokenizer(gguf);
      tokenizer = owned.get();
    }
    std::vector<std::string> texts = humanEvalTexts(humanEval);
    QCOMPARE(texts.size(), size_t(2 * 164));
    texts.insert(texts.end(), kTrickyTexts.begin(), kTrickyTexts.end());
    for (const std::string& text : texts) {
      const std::vector<int> ids = tokenizer->encode(text, false);
      if (tokenizer->decode(ids) != text) QFAIL(qPrintable("round trip differs for: " + shown(text)));
      if (!streamsLikeDecode(*tokenizer, ids)) QFAIL(qPrintable("streaming differs for: " + shown(text)));
    }
  }

  // The seven pre-tokenizers by their GGUF names, over one vocabulary (GPT-2's), against
  // Hugging Face with each family's own pipeline. Texts that NFC changes are left to the
  // tokenizer.json test: a GGUF carries no normalizer.
  void preTokenizerRules_data() {
    QTest::addColumn<QString>("pre");
    for (const QString& pre : oracle_.value("pre_tokenizers").toObject().keys()) QTest::newRow(qPrintable(pre)) << pre;
  }
  void preTokenizerRules() {
    QFETCH(QString, pre);
    SPECULA_SHARED_FILE(gguf, "tokenizers/bpe-vocab/ggml-vocab-gpt-2.gguf");
    Vocabulary vocab = gguf_vocabulary(GgufFile::open(gguf));
    vocab.pre = pre.toStdString();
    const auto tokenizer = create_tokenizer(vocab);
    QCOMPARE(tokenizer->vocabulary().ignore_merges, pre == "llama-bpe");
    const QJsonArray texts = oracle_.value("texts").toArray();
    const QJsonArray nfc = oracle_.value("nfc_changes").toArray();
    const QJsonArray expected = family(pre, "ids").toArray();
    QCOMPARE(expected.size(), texts.size());
    for (qsizetype i = 0; i < texts.size(); ++i) {
      if (pre == "qwen2" && nfc[i].toBool()) continue;
      const std::string text = texts[i].toString().toStdString();
      if (tokenizer->encode(text, false) != toIds(expected[i]))
        QFAIL(qPrintable(QStringLiteral("text %1 \"%2\"").arg(i).arg(shown(text))));
    }
  }

  // The same rules read from a tokenizer.json as `tokenizers` writes it (Split, Digits,
  // ByteLevel, Sequence; NFC for qwen2; ignore_merges for llama-bpe), every text.
  void tokenizerJsonRules_data() { preTokenizerRules_data(); }
  void tokenizerJsonRules() {
    QFETCH(QString, pre);
    SPECULA_SHARED_FILE(gguf, "tokenizers/bpe-vocab/ggml-vocab-gpt-2.gguf");
    const Vocabulary source = gguf_vocabulary(GgufFile::open(gguf));
    QTemporaryDir dir;
    const QString path = dir.filePath("tokenizer.json");
    writeTokenizerJson(path, family(pre, "skeleton").toObject(), source);
    const Vocabulary vocab = load_vocabulary(path.toStdString());
    QCOMPARE(vocab.model, TokenizerModel::ByteLevelBpe);
    QCOMPARE(vocab.pieces, source.pieces);
    QCOMPARE(vocab.merges, source.merges);
    QCOMPARE(vocab.pre, pre.toStdString());  // the rules are recognised as the named ones
    QCOMPARE(vocab.nfc, pre == "qwen2");
    const auto tokenizer = create_tokenizer(vocab);
    const QJsonArray texts = oracle_.value("texts").toArray();
    const QJsonArray expected = family(pre, "ids").toArray();
    for (qsizetype i = 0; i < texts.size(); ++i) {
      const std::string text = texts[i].toString().toStdString();
      if (tokenizer->encode(text, false) != toIds(expected[i]))
        QFAIL(qPrintable(QStringLiteral("text %1 \"%2\"").arg(i).arg(shown(text))));
    }
  }

  // The llama.cpp vectors again through a tokenizer.json of the same vocabulary, and the
  // special tokens named by tokenizer_config.json and generation_config.json beside it.
  void tokenizerJsonOfDeepSeekCoder() {
    SPECULA_SHARED_FILE(gguf, "tokenizers/bpe-vocab/ggml-vocab-deepseek-coder.gguf");
    SPECULA_SHARED_FILE(inp, "tokenizers/bpe-vocab/ggml-vocab-deepseek-coder.gguf.inp");
    SPECULA_SHARED_FILE(out, "tokenizers/bpe-vocab/ggml-vocab-deepseek-coder.gguf.out");
    const Vocabulary source = gguf_vocabulary(GgufFile::open(gguf));
    QTemporaryDir dir;
    writeTokenizerJson(dir.filePath("tokenizer.json"), family("deepseek-coder", "skeleton").toObject(), source);
    writeJson(dir.filePath("tokenizer_config.json"),
              QJsonObject{{"add_bos_token", true},
                          {"bos_token", QJsonObject{{"content", "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"}}},
                          {"eos_token", "<|EOT|>"}});
    writeJson(dir.filePath("generation_config.json"), QJsonObject{{"eos_token_id", QJsonArray{32014, 32021}}});
    const auto tokenizer = create_tokenizer(load_vocabulary(dir.filePath("tokenizer.json").toStdString()));
    checkCases(*tokenizer, readVocabCases(inp, out));
    QCOMPARE(tokenizer->bos(), 32013);
    QCOMPARE(tokenizer->eos(), 32021);
    QCOMPARE(tokenizer->end_of_generation(), (std::vector<int>{32014, 32021}));
    QCOMPARE(tokenizer->encode("x", true), (std::vector<int>{32013, tokenizer->encode("x", false).at(0)}));
    QCOMPARE(tokenizer->vocabulary().kinds[32016], TokenKind::UserDefined);
  }

  // Special-token text is plain text unless asked for; user-defined tokens are always
  // matched (Hugging Face's and llama.cpp's rule), leftmost-longest.
  void specialTokens() {
    SPECULA_SHARED_FILE(starcoder, "tokenizers/bpe-vocab/ggml-vocab-starcoder.gguf");
    SPECULA_SHARED_FILE(deepseek, "tokenizers/bpe-vocab/ggml-vocab-deepseek-coder.gguf");
    SPECULA_SHARED_FILE(llama, "tokenizers/llama2/tokenizer.model");
    const auto sc = ggufTokenizer(starcoder);
    const auto id_of = [](const Tokenizer& t, const std::string& piece) {
      const auto& pieces = t.vocabulary().pieces;
      return static_cast<int>(std::find(pieces.begin(), pieces.end(), piece) - pieces.begin());
    };
    const std::string text = "a<|endoftext|><fim_prefix>b";
    QCOMPARE(sc->encode(text, false, true), (std::vector<int>{id_of(*sc, "a"), 0, 1, id_of(*sc, "b")}));
    const std::vector<int> plain = sc->encode(text, false);
    QVERIFY(plain.size() > 4);
    QVERIFY(std::none_of(plain.begin(), plain.end(), [](int id) { return id <= 1; }));
    QCOMPARE(sc->decode(plain), text);
    QCOMPARE(sc->decode(sc->encode(text, false, true)), std::string("ab"));  // control tokens decode to nothing

    const auto ds = ggufTokenizer(deepseek);
    const std::string hole = "x<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>y";  // user-defined in this vocabulary
    QCOMPARE(ds->encode(hole, false), (std::vector<int>{id_of(*ds, "x"), 32015, id_of(*ds, "y")}));
    QCOMPARE(ds->decode(ds->encode(hole, false)), hole);
    QCOMPARE(ds->encode("", true), (std::vector<int>{32013}));
    QCOMPARE(ds->encode("y", true), (std::vector<int>{32013, id_of(*ds, "y")}));

    if (const Tokenizer* q = qwen()) {
      const std::string chat = "<|im_start|>user\nhi<|im_end|>";
      const std::vector<int> ids = q->encode(chat, false, true);
      QCOMPARE(ids.front(), 151644);
      QCOMPARE(ids.back(), 151645);
      QCOMPARE(q->encode("hi", false), q->encode("hi", true));  // Qwen adds no BOS
    }

    // SentencePiece: control pieces only on request, and text after one gets its dummy prefix again
    const auto sp = create_tokenizer(load_vocabulary(llama));
    QCOMPARE(sp->encode("a</s>b", false, true),
             [&] {
               std::vector<int> ids = sp->encode("a", false);
               ids.push_back(2);
               const std::vector<int> b = sp->encode("b", false);
               ids.insert(ids.end(), b.begin(), b.end());
               return ids;
             }());
    const std::vector<int> literal = sp->encode("a</s>b", false);
    QVERIFY(std::find(literal.begin(), literal.end(), 2) == literal.end());
  }

  // EOS, EOT and the known end-of-turn / FIM-padding pieces end a generation.
  void endOfGeneration() {
    SPECULA_SHARED_FILE(starcoder, "tokenizers/bpe-vocab/ggml-vocab-starcoder.gguf");
    SPECULA_SHARED_FILE(deepseek, "tokenizers/bpe-vocab/ggml-vocab-deepseek-coder.gguf");
    SPECULA_SHARED_FILE(gpt2, "tokenizers/bpe-vocab/ggml-vocab-gpt-2.gguf");
    SPECULA_SHARED_FILE(llama, "tokenizers/llama2/tokenizer.model");
    // <|endoftext|>, <fim_pad>, <repo_name>, <file_sep>
    QCOMPARE(ggufTokenizer(starcoder)->end_of_generation(), (std::vector<int>{0, 4, 5, 6}));
    // <｜end▁of▁sentence｜> (EOS) and <|EOT|> (DeepSeek-Coder-Instruct's end of turn)
    QCOMPARE(ggufTokenizer(deepseek)->end_of_generation(), (std::vector<int>{32014, 32021}));
    QCOMPARE(ggufTokenizer(gpt2)->end_of_generation(), (std::vector<int>{50256}));
    QCOMPARE(create_tokenizer(load_vocabulary(llama))->end_of_generation(), (std::vector<int>{2}));
    if (const Tokenizer* q = qwen()) {
      // <|endoftext|>, <|im_end|>, <|fim_pad|>, <|repo_name|>, <|file_sep|>
      QCOMPARE(q->end_of_generation(), (std::vector<int>{151643, 151645, 151662, 151663, 151664}));
      QVERIFY(q->ends_generation(151645));
      QVERIFY(!q->ends_generation(151644));
    }
    // an EOT named in the metadata joins the set
    Vocabulary vocab = gguf_vocabulary(GgufFile::open(gpt2));
    vocab.eot = 11;
    QCOMPARE(create_tokenizer(vocab)->end_of_generation(), (std::vector<int>{11, 50256}));
  }

  // Fill-in-the-middle prompts in each family's documented layout, against the family's own
  // reference encoder (tools/oracles/bpe_oracle.py). The layouts, prefix-suffix-middle:
  //   Qwen2.5-Coder (its README's FIM example): <|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>
  //   DeepSeek-Coder (its README's code insertion example): BOS <｜fim▁begin｜>{prefix}<｜fim▁hole｜>{suffix}<｜fim▁end｜>
  //   StarCoder (the bigcode model card): <fim_prefix>{prefix}<fim_suffix>{suffix}<fim_middle>
  //   CodeLlama (Meta's llama/generation.py, infilling_prompt_tokens): BOS ▁<PRE> encode(prefix)
  //     ▁<SUF> encode_infilling(suffix) ▁<MID>, the suffix without SentencePiece's leading space
  void fimPrompts() {
    SPECULA_SHARED_FILE(starcoder, "tokenizers/bpe-vocab/ggml-vocab-starcoder.gguf");
    SPECULA_SHARED_FILE(deepseek, "tokenizers/bpe-vocab/ggml-vocab-deepseek-coder.gguf");
    SPECULA_SHARED_FILE(gpt2, "tokenizers/bpe-vocab/ggml-vocab-gpt-2.gguf");
    SPECULA_SHARED_FILE(llama, "tokenizers/llama2/tokenizer.model");
    const QJsonObject fim = oracle_.value("fim").toObject();
    const QJsonArray cases = fim.value("cases").toArray();
    QVERIFY(cases.size() >= 3);

    // CodeLlama: the Llama 2 pieces plus its 16 added ones, the infill pieces at 32007..32010,
    // written as a tokenizer.model (so the no-dummy-prefix rewrite of a stored model is used)
    Vocabulary codellama = load_vocabulary(llama);
    codellama.serialized_model.clear();
    for (int id = 32000; id < 32016; ++id) {
      const char* infill[] = {"\xE2\x96\x81<PRE>", "\xE2\x96\x81<SUF>", "\xE2\x96\x81<MID>", "\xE2\x96\x81<EOT>"};
      codellama.pieces.push_back(id >= 32007 && id <= 32010 ? infill[id - 32007] : "<unused" + std::to_string(id) + ">");
      codellama.scores.push_back(0.0f);
      codellama.kinds.push_back(TokenKind::Control);
    }
    QTemporaryDir dir;
    const std::string model = dir.filePath("tokenizer.model").toStdString();
    std::ofstream(model, std::ios::binary) << serialize_sentencepiece_model(codellama);

    const std::pair<const char*, std::unique_ptr<Tokenizer>> families[] = {
        {"deepseek-coder", ggufTokenizer(deepseek)},
        {"starcoder", ggufTokenizer(starcoder)},
        {"codellama", create_tokenizer(load_vocabulary(model))},
    };
    const auto prefix = [&](qsizetype i) { return cases[i].toObject().value("prefix").toString().toStdString(); };
    const auto suffix = [&](qsizetype i) { return cases[i].toObject().value("suffix").toString().toStdString(); };
    for (const auto& [name, tokenizer] : families) {
      QVERIFY2(tokenizer->fim().complete(), name);
      const QJsonArray expected = fim.value(name).toArray();
      for (qsizetype i = 0; i < cases.size(); ++i)
        QVERIFY2(tokenizer->fim_prompt(prefix(i), suffix(i)) == toIds(expected[i]),
                 qPrintable(QString(name) + " case " + QString::number(i)));
    }
    QCOMPARE(families[2].second->fim().middle, 32009);
    QCOMPARE(families[2].second->end_of_generation(), (std::vector<int>{2, 32010}));  // ▁<EOT> ends an infill
    if (const Tokenizer* q = qwen()) {
      QCOMPARE(q->fim().prefix, 151659);
      for (qsizetype i = 0; i < cases.size(); ++i)
        QCOMPARE(q->fim_prompt(prefix(i), suffix(i)), toIds(fim.value("qwen").toArray()[i]));
    }
    // ids from the metadata win over names
    Vocabulary named = gguf_vocabulary(GgufFile::open(starcoder));
    named.fim.prefix = 7;
    QCOMPARE(create_tokenizer(named)->fim().prefix, 7);
    const auto none = ggufTokenizer(gpt2);
    QVERIFY(!none->fim().complete());
    QVERIFY(errorOf([&] { none->fim_prompt("a", "b"); }).find("fill-in-the-middle") != std::string::npos);
  }

  // Random id streams, byte tokens that split characters included, pushed in random chunks:
  // deltas are whole UTF-8 and add up to decode(prefix + tokens) minus the prefix's text.
  void streamingRandomIds() {
    const Tokenizer* q = qwen();
    if (!q) QSKIP("qwen.tiktoken is missing");
    std::mt19937 rng(99);
    const std::vector<int> prompt = q->encode("def f():\n    return '\xE4\xB8\xAD", false);
    const std::vector<int> emoji = q->encode("\xF0\x9F\xA6\x99\xF0\x9F\x98\x80 \xE4\xB8\x80\xE9\xBE\x98", false);
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<int> stream;
      const int length = 1 + static_cast<int>(rng() % 40);
      for (int i = 0; i < length; ++i) {
        switch (rng() % 4) {
          case 0: stream.push_back(static_cast<int>(rng() % static_cast<unsigned>(q->size()))); break;
          case 1: stream.push_back(static_cast<int>(rng() % 256)); break;  // single bytes, many not UTF-8 alone
          case 2: stream.insert(stream.end(), emoji.begin(), emoji.end()); break;
          default: stream.push_back(151643 + static_cast<int>(rng() % 22)); break;  // control tokens
        }
      }
      const std::vector<int> prefix = trial % 2 ? prompt : std::vector<int>{};
      const std::string mismatch = streamingMismatch(*q, prefix, stream, rng);
      QVERIFY2(mismatch.empty(), mismatch.c_str());
    }
  }

  // Text that is not UTF-8 still encodes (as its bytes) and decodes with U+FFFD per bad byte.
  void invalidUtf8() {
    SPECULA_SHARED_FILE(gpt2, "tokenizers/bpe-vocab/ggml-vocab-gpt-2.gguf");
    const auto tokenizer = ggufTokenizer(gpt2);
    const std::string text = "caf\xE9 \xFF ok \xE2\x82";
    const std::vector<int> ids = tokenizer->encode(text, false);
    QVERIFY(!ids.empty());
    QCOMPARE(tokenizer->decode(ids), std::string("caf\xEF\xBF\xBD \xEF\xBF\xBD ok \xEF\xBF\xBD\xEF\xBF\xBD"));
    QVERIFY(streamsLikeDecode(*tokenizer, ids));
  }

  // A model written as GGUF keeps its byte-level vocabulary: llama.cpp's keys (model "gpt2",
  // merges, pre, token types, special ids), read back to the same tokenizer; a vocabulary
  // from tokenizer.json gets the GGUF name of its rules.
  void vocabularySurvivesGguf() {
    SPECULA_SHARED_FILE(gguf, "tokenizers/bpe-vocab/ggml-vocab-deepseek-coder.gguf");
    SPECULA_SHARED_FILE(gpt2, "tokenizers/bpe-vocab/ggml-vocab-gpt-2.gguf");
    QTemporaryDir dir;
    const std::string text = "def f(x):\n    return x * 2  # \xE2\x9C\x93\n";
    Vocabulary from_json;
    {
      const QString path = dir.filePath("tokenizer.json");
      writeTokenizerJson(path, family("qwen2", "skeleton").toObject(), gguf_vocabulary(GgufFile::open(gpt2)));
      from_json = load_vocabulary(path.toStdString());
    }
    for (const Vocabulary& source : {gguf_vocabulary(GgufFile::open(gguf)), from_json}) {
      ModelConfig config = random_model_config("tiny");
      config.vocab_size = source.size();
      auto model = std::make_shared<Model>(*make_random_model(config, TensorType::F32, 1, 1));
      model->tokenizer = create_tokenizer(source);
      const std::string out = dir.filePath("bpe.gguf").toStdString();
      write_gguf_model(*model, out, TensorType::F32);
      const GgufFile written = GgufFile::open(out);
      QCOMPARE(written.get_string("tokenizer.ggml.model", ""), std::string("gpt2"));
      QCOMPARE(written.find("tokenizer.ggml.unknown_token_id"), nullptr);  // none: not written as -1
      const auto back = create_tokenizer(gguf_vocabulary(written));
      const Vocabulary& a = model->tokenizer->vocabulary();
      const Vocabulary& b = back->vocabulary();
      QCOMPARE(b.pieces, a.pieces);
      QCOMPARE(b.kinds, a.kinds);
      QCOMPARE(b.merges, a.merges);
      QCOMPARE(b.pre, source.pre.empty() ? std::string("qwen2") : source.pre);
      QCOMPARE(b.bos, a.bos);
      QCOMPARE(b.eos, a.eos);
      QCOMPARE(b.add_bos, a.add_bos);
      QCOMPARE(back->encode(text, true), model->tokenizer->encode(text, true));
    }
  }

  // Clear messages for what cannot be used.
  void badVocabularies() {
    SPECULA_SHARED_FILE(gpt2, "tokenizers/bpe-vocab/ggml-vocab-gpt-2.gguf");
    const Vocabulary good = gguf_vocabulary(GgufFile::open(gpt2));
    Vocabulary v = good;
    v.pre = "mystery-pre";
    QVERIFY(errorOf([&] { create_tokenizer(v); }).find("'mystery-pre'") != std::string::npos);
    v.pre.clear();
    QVERIFY(errorOf([&] { create_tokenizer(v); }).find("names no pre-tokenizer") != std::string::npos);
    v = good;
    v.merges.push_back("Ġ nonexistent");
    QVERIFY(errorOf([&] { create_tokenizer(v); }).find("nonexistent") != std::string::npos);
    v = good;
    v.merges[3] = "abc";
    QVERIFY(errorOf([&] { create_tokenizer(v); }).find("is not two pieces") != std::string::npos);
    v = good;
    v.kinds.pop_back();
    QVERIFY(errorOf([&] { create_tokenizer(v); }).find("inconsistent") != std::string::npos);
    QVERIFY(errorOf([&] { create_tokenizer(good)->decode(std::vector<int>{50257}); }).find("outside") != std::string::npos);

    QVERIFY(errorOf([] { tiktoken_vocabulary("YQ== 0\nYg== 2\n", "qwen2"); }).find("ranks must be") != std::string::npos);
    QVERIFY(errorOf([] { tiktoken_vocabulary("YQ== 0\nYWI= 1\n", "qwen2"); }).find("rank 1") != std::string::npos);

    QTemporaryDir dir;
    const QString json = dir.filePath("tokenizer.json");
    const QJsonObject skeleton = family("gpt-2", "skeleton").toObject();
    QJsonObject doc = skeleton;
    doc["pre_tokenizer"] = QJsonObject{{"type", "Sequence"},
                                       {"pretokenizers", QJsonArray{QJsonObject{{"type", "Whitespace"}},
                                                                    skeleton["pre_tokenizer"]}}};
    writeJson(json, doc);
    QVERIFY(errorOf([&] { load_vocabulary(json.toStdString()); }).find("\"Whitespace\" is not supported") != std::string::npos);
    doc = skeleton;
    doc["normalizer"] = QJsonObject{{"type", "NFKD"}};
    writeJson(json, doc);
    QVERIFY(errorOf([&] { load_vocabulary(json.toStdString()); }).find("NFKD") != std::string::npos);
    // a vocabulary-only GGUF is read through load_vocabulary_of, never load_vocabulary
    QVERIFY(errorOf([&] { load_vocabulary(gpt2); }).find("GGUF") != std::string::npos);
    QCOMPARE(load_vocabulary_of(gpt2).size(), 50257);
    QVERIFY(errorOf([&] { load_vocabulary_of(dir.path().toStdString() + "/nothing-here"); }).find("cannot open") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestTokenizerBpe)
#include "test_tokenizer_bpe.moc"
