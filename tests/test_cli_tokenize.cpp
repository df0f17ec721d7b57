// specula-cli tokenize, run as a user would: the ids of llama.cpp's test inputs from the
// vocabulary-only GGUF files (as llama-tokenize --no-bos --no-parse-special prints them),
// special tokens on request, --json, files, tiktoken ranks with --pre, the benchmark's report
// and clean failures.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "cli_run.h"
#include "model/gguf.h"
#include "shared_data.h"
#include "tokenizer_cases.h"

using namespace specula::test;

namespace {

QString joined(const std::vector<int>& ids) {
  QStringList parts;
  for (const int id : ids) parts << QString::number(id);
  return parts.join(' ');
}

}  // namespace

class TestCliTokenize : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;

 private slots:
  // Every llama.cpp case of the deepseek-coder vocabulary, through -f (the texts hold
  // newlines and leading spaces a shell argument would mangle).
  void idsLikeLlamaTokenize() {
    SPECULA_SHARED_FILE(gguf, "tokenizers/bpe-vocab/ggml-vocab-deepseek-coder.gguf");
    SPECULA_SHARED_FILE(inp, "tokenizers/bpe-vocab/ggml-vocab-deepseek-coder.gguf.inp");
    SPECULA_SHARED_FILE(out, "tokenizers/bpe-vocab/ggml-vocab-deepseek-coder.gguf.out");
    const std::vector<VocabCase> cases = readVocabCases(inp, out);
    QCOMPARE(cases.size(), size_t(46));
    for (size_t i = 0; i < cases.size(); i += 5) {
      const QString file = tmp_.filePath(QStringLiteral("case%1.txt").arg(i));
      std::ofstream(file.toStdString(), std::ios::binary) << cases[i].text;
      const CliRun r = run_cli({"tokenize", "-m", QString::fromStdString(gguf), "-f", file});
      QVERIFY2(r.code == 0, r.err.constData());
      QCOMPARE(QString::fromUtf8(r.out).trimmed(), joined(cases[i].ids));
    }
    // the vocabulary adds BOS (32013, <｜begin▁of▁sentence｜>) when asked
    const auto hello = std::find_if(cases.begin(), cases.end(), [](const VocabCase& c) { return c.text == "Hello world"; });
    QVERIFY(hello != cases.end());
    std::vector<int> with_bos = {32013};
    with_bos.insert(with_bos.end(), hello->ids.begin(), hello->ids.end());
    const CliRun bos = run_cli({"tokenize", "-m", QString::fromStdString(gguf), "-p", "Hello world", "--add-special"});
    QCOMPARE(QString::fromUtf8(bos.out).trimmed(), joined(with_bos));
  }

  void specialTokensAndJson() {
    SPECULA_SHARED_FILE(gguf, "tokenizers/bpe-vocab/ggml-vocab-starcoder.gguf");
    const QString m = QString::fromStdString(gguf);
    const CliRun plain = run_cli({"tokenize", "-m", m, "-p", "<|endoftext|>"});
    QVERIFY2(plain.code == 0, plain.err.constData());
    QVERIFY(QString::fromUtf8(plain.out).trimmed().split(' ').size() > 1);
    const CliRun parsed = run_cli({"tokenize", "-m", m, "-p", "<|endoftext|>", "--parse-special"});
    QCOMPARE(QString::fromUtf8(parsed.out).trimmed(), QString("0"));
    const CliRun json = run_cli({"tokenize", "-m", m, "-p", "def f():", "--json"});
    QVERIFY2(json.code == 0, json.err.constData());
    const QJsonObject j = QJsonDocument::fromJson(json.out).object();
    QCOMPARE(j["tokenizer"].toString(), QString("bpe"));
    const QJsonArray ids = j["ids"].toArray(), pieces = j["pieces"].toArray();
    QCOMPARE(ids.size(), pieces.size());
    QCOMPARE(pieces.first().toString(), QString("def"));
    QCOMPARE(pieces.at(1).toString(), QString("\u0120f"));  // "Ġf": the space in GPT-2's mapping
  }

  // tiktoken ranks name no pre-tokenizer: --pre gives it; tiktoken's own ids come out.
  void tiktokenWithPre() {
    SPECULA_SHARED_FILE(ranks, "tokenizers/qwen/qwen.tiktoken");
    SPECULA_SHARED_FILE(inp, "tokenizers/qwen/qwen.tiktoken.inp");
    SPECULA_SHARED_FILE(out, "tokenizers/qwen/qwen.tiktoken.out");
    const std::vector<VocabCase> cases = readVocabCases(inp, out);
    const VocabCase& last = cases.back();  // a code case
    const QString file = tmp_.filePath("qwen-case.txt");
    std::ofstream(file.toStdString(), std::ios::binary) << last.text;
    const QString m = QString::fromStdString(ranks);
    const CliRun r = run_cli({"tokenize", "-m", m, "--pre", "qwen2", "-f", file});
    QVERIFY2(r.code == 0, r.err.constData());
    QCOMPARE(QString::fromUtf8(r.out).trimmed(), joined(last.ids));
    const CliRun missing = run_cli({"tokenize", "-m", m, "-p", "Hello world"});
    QCOMPARE(missing.code, 2);
    QVERIFY(missing.err.contains("pre-tokenizer"));
  }

  void sentencePieceVocabulary() {
    SPECULA_SHARED_FILE(gguf, "tokenizers/llama-spm-vocab/ggml-vocab-llama-spm.gguf");
    const CliRun r = run_cli({"tokenize", "-m", QString::fromStdString(gguf), "-p", "I believe the meaning of life is",
                              "--add-special"});
    QVERIFY2(r.code == 0, r.err.constData());
    QCOMPARE(QString::fromUtf8(r.out).trimmed(), QString("1 306 4658 278 6593 310 2834 338"));
  }

  // The vocabulary is metadata: a model file whose weights Specula cannot run (an
  // architecture it lacks, a tensor type it does not compute with, even a type id it does
  // not know) still tokenizes; so does a vocabulary whose <unk> is typed a control token.
  void vocabularyOfAnUnrunnableModel() {
    SPECULA_SHARED_FILE(vocab, "tokenizers/llama-spm-vocab/ggml-vocab-llama-spm.gguf");
    const specula::GgufFile source = specula::GgufFile::open(vocab);
    specula::GgufWriter w;
    for (const auto& [key, value] : source.metadata) w.set(key, value);
    w.set("general.architecture", specula::GgufValue::string("gemma3"));
    // as in Gemma's files, <unk> (id 0 here) typed a control token
    specula::GgufValue kinds = source.find("tokenizer.ggml.token_type") ? *source.find("tokenizer.ggml.token_type")
                                                                         : specula::GgufValue{};
    QCOMPARE(kinds.integers.at(0), int64_t{2});
    kinds.integers[0] = 3;
    w.set("tokenizer.ggml.token_type", kinds);
    w.add_tensor("token_embd.weight", specula::TensorType::Q8_1, {32, 4},
                 [](uint8_t* d) { std::memset(d, 1, 4 * 36); });
    const QString typed = tmp_.filePath("gemma3-q8_1.gguf");
    w.write(typed.toStdString());
    // the same file with the tensor's type id 4000: patched in place, after its name, its
    // dimension count and its two dimensions
    QFile f(typed);
    QVERIFY(f.open(QIODevice::ReadWrite));
    QByteArray bytes = f.readAll();
    const qsizetype name = bytes.lastIndexOf("token_embd.weight");
    QVERIFY(name > 0);
    const qsizetype type_at = name + 17 + 4 + 2 * 8;
    QCOMPARE(bytes.mid(type_at, 4), QByteArray("\x09\0\0\0", 4));
    const uint32_t unknown = 4000;
    bytes.replace(type_at, 4, QByteArray(reinterpret_cast<const char*>(&unknown), 4));
    const QString untyped = tmp_.filePath("unknown-type.gguf");
    QFile out(untyped);
    QVERIFY(out.open(QIODevice::WriteOnly));
    out.write(bytes);
    out.close();
    for (const QString& model : {typed, untyped}) {
      const CliRun r = run_cli({"tokenize", "-m", model, "-p", "I believe the meaning of life is", "--add-special"});
      QVERIFY2(r.code == 0, r.err.constData());
      QCOMPARE(QString::fromUtf8(r.out).trimmed(), QString("1 306 4658 278 6593 310 2834 338"));
    }
  }

  // The real files people download (SPECULA_REAL_MODELS_DIR): SmolLM2's byte-level BPE
  // ("smollm") gives the ids Hugging Face `tokenizers` gives from the file's own vocabulary
  // and merges (tests/data/real_models_oracle.json, tools/oracles/real_models_oracle.py);
  // Gemma 3's 262,144-piece SentencePiece vocabulary (its <unk> typed a control token, its
  // runs of spaces stored with real spaces) gives the ids `transformers` builds from the file
  // (tests/data/gemma3_tokenizer_oracle.json, tools/oracles/gemma3_tokenizer_oracle.py), with
  // and without special parsing, BOS 2 first when asked; and SmolLM2 generates greedily.
  void realModels() {
    SPECULA_REAL_MODEL(smol, "SmolLM2-135M-Instruct.Q4_1.gguf");
    SPECULA_REAL_MODEL(gemma, "gemma-3-270m-q4_k_m.gguf");
    QFile oracle(testDataDir() + "/real_models_oracle.json");
    QVERIFY(oracle.open(QIODevice::ReadOnly));
    const QJsonArray cases = QJsonDocument::fromJson(oracle.readAll()).object()["cases"].toArray();
    QCOMPARE(cases.size(), 5);
    int i = 0;
    for (const QJsonValue& c : cases) {
      const QString file = tmp_.filePath(QStringLiteral("real%1.txt").arg(i++));
      QFile text(file);
      QVERIFY(text.open(QIODevice::WriteOnly));
      text.write(c["text"].toString().toUtf8());
      text.close();
      const CliRun r = run_cli({"tokenize", "-m", QString::fromStdString(smol), "-f", file});
      QVERIFY2(r.code == 0, r.err.constData());
      QStringList ids;
      for (const QJsonValue& id : c["ids"].toArray()) ids << QString::number(id.toInt());
      QCOMPARE(QString::fromUtf8(r.out).trimmed(), ids.join(' '));
    }
    QFile gemmaOracle(testDataDir() + "/gemma3_tokenizer_oracle.json");
    QVERIFY(gemmaOracle.open(QIODevice::ReadOnly));
    const QJsonArray gemmaCases = QJsonDocument::fromJson(gemmaOracle.readAll()).object()["cases"].toArray();
    QVERIFY(gemmaCases.size() >= 10);
    for (const QJsonValue& c : gemmaCases) {
      const QString file = tmp_.filePath(QStringLiteral("gemma%1.txt").arg(i++));
      QFile text(file);
      QVERIFY(text.open(QIODevice::WriteOnly));
      text.write(c["text"].toString().toUtf8());
      text.close();
      for (const char* key : {"ids", "special_ids"}) {
        QStringList args{"tokenize", "-m", QString::fromStdString(gemma), "-f", file};
        if (QByteArray(key) == "special_ids") args << "--parse-special";
        const CliRun r = run_cli(args);
        QVERIFY2(r.code == 0, r.err.constData());
        QStringList ids;
        for (const QJsonValue& id : c[key].toArray()) ids << QString::number(id.toInt());
        QCOMPARE(QString::fromUtf8(r.out).trimmed(), ids.join(' '));
      }
    }
    const CliRun g = run_cli({"tokenize", "-m", QString::fromStdString(gemma), "-p", "def f(x): return x", "--add-special",
                              "--json"});
    QVERIFY2(g.code == 0, g.err.constData());
    const QJsonObject j = QJsonDocument::fromJson(g.out).object();
    QCOMPARE(j["ids"].toArray().first().toInt(), 2);
    QCOMPARE(j["pieces"].toArray().at(1).toString(), QString("def"));
    const CliRun gen = run_cli({"generate", "-m", QString::fromStdString(smol), "-p", "def fibonacci(n):", "--temp", "0",
                                "--max-tokens", "12", "--device", "cpu", "--threads", "2"});
    QVERIFY2(gen.code == 0, gen.err.constData());
    QVERIFY2(gen.out.startsWith("def fibonacci(n):") && gen.out.size() > 30, gen.out.constData());
  }

  // SmolLM2 against llama.cpp itself (tests/data/smollm2_llamacpp_reference.json, made by
  // tools/oracles/llamacpp_reference.py from llama-tokenize and libllama): the ids of code and
  // Unicode strings, plain and with --parse-special (llama-tokenize's --no-parse-special and
  // default); `generate --temp 0`'s first 8 tokens, as text, equal to llama.cpp's greedy text
  // on at least 4 of the 5 code prompts; and `perplexity --ctx 128` within 1 % of
  // transformers' float32 figure with the same windows (test_forward_reference holds the
  // engine to llama-perplexity's windows as well).
  void realSmolLM2LikeLlamaCpp() {
    SPECULA_REAL_MODEL(smol, "SmolLM2-135M-Instruct.Q4_1.gguf");
    QFile file(testDataDir() + "/smollm2_llamacpp_reference.json");
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QJsonObject oracle = QJsonDocument::fromJson(file.readAll()).object();
    const QString model = QString::fromStdString(smol);
    const QJsonArray cases = oracle["tokenize"].toArray();
    QVERIFY(cases.size() >= 10);
    int i = 0;
    for (const QJsonValue& c : cases) {
      const QString path = tmp_.filePath(QStringLiteral("llama%1.txt").arg(i++));
      QFile text(path);
      QVERIFY(text.open(QIODevice::WriteOnly));
      text.write(c["text"].toString().toUtf8());
      text.close();
      for (const char* key : {"ids", "special_ids"}) {
        QStringList args{"tokenize", "-m", model, "-f", path};
        if (QByteArray(key) == "special_ids") args << "--parse-special";
        const CliRun r = run_cli(args);
        QVERIFY2(r.code == 0, r.err.constData());
        QStringList ids;
        for (const QJsonValue& id : c[key].toArray()) ids << QString::number(id.toInt());
        QCOMPARE(QString::fromUtf8(r.out).trimmed(), ids.join(' '));
      }
    }
    int alike = 0;
    for (const QJsonValue& c : oracle["greedy"].toArray()) {
      const QString prompt = tmp_.filePath(QStringLiteral("prompt%1.txt").arg(i++));
      QFile text(prompt);
      QVERIFY(text.open(QIODevice::WriteOnly));
      text.write(c["prompt"].toString().toUtf8());
      text.close();
      const CliRun g = run_cli({"generate", "-m", model, "-f", prompt, "--temp", "0", "--max-tokens", "8", "--json",
                                "--device", "cpu", "--threads", "2"});
      QVERIFY2(g.code == 0, g.err.constData());
      const QString got = QJsonDocument::fromJson(g.out).object()["candidates"].toArray().at(0)["text"].toString();
      const QString want = c["llama_cpp_text_8"].toString();
      if (got == want) ++alike;
      else qInfo("generate: %s, llama.cpp: %s", qPrintable(got), qPrintable(want));
    }
    QVERIFY2(alike >= 4, qPrintable(QString("%1 of 5 greedy texts as llama.cpp's").arg(alike)));
    const QJsonObject ppl = oracle["perplexity"].toObject();
    QFile textSource(testDataDir() + "/perplexity_oracle.json");
    QVERIFY(textSource.open(QIODevice::ReadOnly));
    const QString textPath = tmp_.filePath("python_text.py");
    QFile pythonText(textPath);
    QVERIFY(pythonText.open(QIODevice::WriteOnly));
    pythonText.write(QJsonDocument::fromJson(textSource.readAll())["text"].toString().toUtf8());
    pythonText.close();
    const CliRun p = run_cli({"perplexity", "-m", model, "-f", textPath, "--ctx",
                              QString::number(ppl["context"].toInt()), "--json"});
    QVERIFY2(p.code == 0, p.err.constData());
    const QJsonObject got = QJsonDocument::fromJson(p.out).object();
    const QJsonObject want = ppl["transformers_specula_windows"].toObject();
    QCOMPARE(got["tokens"].toInt(), ppl["ids"].toArray().size());
    QCOMPARE(got["scored"].toInt(), want["scored"].toInt());
    QVERIFY2(std::abs(got["perplexity"].toDouble() / want["perplexity"].toDouble() - 1) < 0.01, p.out.constData());
  }

  // --bench reports what it measured; the figures themselves are for docs/performance.md.
  void benchReport() {
    SPECULA_SHARED_FILE(gguf, "tokenizers/bpe-vocab/ggml-vocab-gpt-2.gguf");
    const CliRun r = run_cli({"tokenize", "-m", QString::fromStdString(gguf), "-p", QString("def f(x):\n    return x\n").repeated(50),
                              "--bench", "--repeat", "3", "--json"});
    QVERIFY2(r.code == 0, r.err.constData());
    const QJsonObject j = QJsonDocument::fromJson(r.out).object();
    QCOMPARE(j["bytes"].toInt(), 23 * 50);
    QCOMPARE(j["repeats"].toInt(), 3);
    QVERIFY(j["tokens"].toInt() > 100);
    QVERIFY(j.contains("encode_mb_per_s") && j.contains("decode_mb_per_s"));
  }

  void badUse() {
    SPECULA_SHARED_FILE(gguf, "tokenizers/bpe-vocab/ggml-vocab-gpt-2.gguf");
    const QString m = QString::fromStdString(gguf);
    CliRun r = run_cli({"tokenize", "-m", m});
    QCOMPARE(r.code, 2);
    QVERIFY(r.err.contains("-p and -f"));
    r = run_cli({"tokenize", "-m", tmp_.filePath("missing.gguf"), "-p", "x"});
    QCOMPARE(r.code, 2);
    QVERIFY(r.err.contains("cannot open"));
    SPECULA_SHARED_FILE(checkpoint, "models/stories260K/stories260K.bin");
    r = run_cli({"tokenize", "-m", QString::fromStdString(checkpoint), "-p", "x"});
    QCOMPARE(r.code, 2);
    QVERIFY(r.err.contains("needs a tokenizer file"));
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    r = run_cli({"tokenize", "-m", QString::fromStdString(checkpoint), "--tokenizer", QString::fromStdString(tok), "-p", "Zoo"});
    QVERIFY2(r.code == 0, r.err.constData());
  }
};

QTEST_GUILESS_MAIN(TestCliTokenize)
#include "test_cli_tokenize.moc"
