// specula-cli inspect, convert and models, run as a user would: conversion of stories260K
// to q8_0, inspection of the result as JSON, the cost of its forwards measured then read
// from the cost cache, clean failures on a corrupt file, and the list of the models in a
// home's stores and a given folder; perplexity on a text, as the engine computes it.
#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include "cli_run.h"
#include "compute/backend.h"
#include "eval/perplexity.h"
#include "model/tokenizer.h"
#include "shared_data.h"
#include "small_models.h"

using namespace specula::test;

namespace {

// The environment with HOME at `home` and none of the model stores' variables set, so that
// `models` lists the folders a test names and nothing of the machine's.
QProcessEnvironment without_model_stores(const QString& home) {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("HOME", home);
  for (const char* name : {"OLLAMA_MODELS", "LLAMA_CACHE", "HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME"}) env.remove(name);
  return env;
}

}  // namespace

class TestCliModels : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;

 private slots:
  void convertThenInspect() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    const QString out = tmp_.filePath("stories260K-q8_0.gguf");
    const CliRun convert = run_cli({"convert", QString::fromStdString(bin), out, "--tokenizer", QString::fromStdString(tok),
                                 "--type", "q8_0"});
    QVERIFY2(convert.code == 0, convert.err.constData());
    QVERIFY(convert.out.contains("q8_0"));

    const CliRun inspect = run_cli({"inspect", out, "--json"});
    QVERIFY2(inspect.code == 0, inspect.err.constData());
    const QJsonObject j = QJsonDocument::fromJson(inspect.out).object();
    QCOMPARE(j["format"].toString(), QString("gguf"));
    QCOMPARE(j["config"].toObject()["dim"].toInt(), 64);
    QCOMPARE(j["config"].toObject()["n_kv_heads"].toInt(), 4);
    QVERIFY(j["tied_output"].toBool());
    // 5 layers x 7 matrices, of which ffn_down (172 columns) is not whole q8_0 blocks, plus
    // the embedding: 31 q8_0; 11 norms and 5 ffn_down stay f32.
    const QJsonObject types = j["tensor_types"].toObject();
    QCOMPARE(types["q8_0"].toObject()["tensors"].toInt(), 31);
    QCOMPARE(types["f32"].toObject()["tensors"].toInt(), 16);
    QCOMPARE(types["f32"].toObject()["bytes"].toInt(), 11 * 64 * 4 + 5 * 64 * 172 * 4);
    // on a GPU the q8_0 matrices stay q8_0, in tiles of 16 rows x 256 columns (4352 bytes:
    // 8-bit codes and 16 bytes of scales per row), the f32 ones become fp16; norms stay f32
    const QJsonObject device = j["device_weights"].toObject();
    QCOMPARE(device["type"].toString(), QString("f16"));
    const auto tiles = [](int rows) { return (rows + 15) / 16 * 4352; };  // 64 columns: one tile wide
    QCOMPARE(device["bytes"].toInt(),
             tiles(512) + 5 * (tiles(64 + 2 * 32) + tiles(64) + tiles(2 * 172) + 64 * 172 * 2) + 11 * 64 * 4);
    const QJsonObject tokenizer = j["tokenizer"].toObject();
    QCOMPARE(tokenizer["vocab_size"].toInt(), 512);
    QCOMPARE(tokenizer["bos"].toInt(), 1);
    QCOMPARE(tokenizer["kind"].toString(), QString("sentencepiece"));
    QCOMPARE(tokenizer["end_of_generation"].toArray(), QJsonArray{2});
    QCOMPARE(tokenizer["sample_ids"].toArray().first().toInt(), 1);
    QVERIFY(tokenizer["sample_ids"].toArray().size() > 5);

    const CliRun text = run_cli({"inspect", out});
    QCOMPARE(text.code, 0);
    QVERIFY(text.out.contains("q8_0") && text.out.contains("512 pieces"));
  }

  // A q5_0 file (quantized as llama.cpp does) is computed as q5_0, with a kernel of its own:
  // inspect names it, and no conversion at load.
  void convertToQ5_0ThenInspect() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    const QString out = tmp_.filePath("stories260K-q5_0.gguf");
    const CliRun convert = run_cli({"convert", QString::fromStdString(bin), out, "--tokenizer", QString::fromStdString(tok),
                                    "--type", "q5_0"});
    QVERIFY2(convert.code == 0, convert.err.constData());
    const CliRun inspect = run_cli({"inspect", out, "--json"});
    QVERIFY2(inspect.code == 0, inspect.err.constData());
    const QJsonObject j = QJsonDocument::fromJson(inspect.out).object();
    QCOMPARE(j["tensor_types"].toObject()["q5_0"].toObject()["tensors"].toInt(), 31);
    QVERIFY(!j["tensor_types"].toObject().contains("q8_0"));
    const CliRun text = run_cli({"inspect", out});
    QVERIFY2(text.out.contains("q5_0"), text.out.constData());
    const QProcessEnvironment env = without_model_stores(tmp_.path());  // no stores: the folder alone
    const CliRun models = run_cli({"models", "--dir", tmp_.path()}, 60000, env);
    QVERIFY2(models.out.contains("Q5_0"), models.out.constData());  // general.file_type 8
  }

  // A mixture of experts (the qwen3moe oracle file): inspect names its experts and says a GPU
  // does not run it; models lists it as loadable, with its experts.
  void inspectAndListAMixtureOfExperts() {
    const QString folder = tmp_.filePath("moe");
    QVERIFY(QDir().mkpath(folder));
    const QString file = folder + "/qwen3moe-q8_0.gguf";
    QVERIFY(QFile::copy(testDataDir() + "/qwen3moe/qwen3moe-q8_0.gguf", file));
    const CliRun inspect = run_cli({"inspect", file, "--json"});
    QVERIFY2(inspect.code == 0, inspect.err.constData());
    const QJsonObject j = QJsonDocument::fromJson(inspect.out).object();
    QCOMPARE(j["architecture"].toString(), QString("qwen3moe"));
    QVERIFY(j["loadable"].toBool());
    const QJsonObject experts = j["experts"].toObject();
    QCOMPARE(experts["count"].toInt(), 8);
    QCOMPARE(experts["used"].toInt(), 2);
    QCOMPARE(experts["hidden_dim"].toInt(), 32);
    QVERIFY(experts["weights_renormalised"].toBool());
    QVERIFY(j["device_weights"].toObject()["refusal"].toString().contains("mixture of experts"));
    const CliRun text = run_cli({"inspect", file});
    QVERIFY2(text.out.contains("experts       8 per layer of feed-forward width 32, 2 used per token"), text.out.constData());
    QVERIFY2(text.out.contains("not run: the GPU backend does not run qwen3moe models yet"), text.out.constData());

    const QProcessEnvironment env = without_model_stores(tmp_.path());  // no stores: the folder alone
    const CliRun json = run_cli({"models", "--dir", folder, "--json"}, 60000, env);
    QVERIFY2(json.code == 0, json.err.constData());
    const QJsonArray models = QJsonDocument::fromJson(json.out).object()["models"].toArray();
    QCOMPARE(models.size(), 1);
    const QJsonObject m = models[0].toObject();
    QCOMPARE(m["architecture"].toString(), QString("qwen3moe"));
    QVERIFY2(m["loadable"].toBool(), qPrintable(m["problem"].toString()));
    QCOMPARE(m["experts"].toInt(), 8);
    QCOMPARE(m["experts_used"].toInt(), 2);
    const CliRun table = run_cli({"models", "--dir", folder}, 60000, env);
    QVERIFY2(table.out.contains("qwen3moe (2 of 8 experts)") && table.out.contains("yes"), table.out.constData());
  }

  // gpt-oss (the gptoss oracle's MXFP4 file): inspect names its sinks, alternating sliding
  // window, YaRN and biased experts, and the GPU's refusal; models lists it as loadable.
  void inspectAndListGptOss() {
    const QString folder = tmp_.filePath("gptoss");
    QVERIFY(QDir().mkpath(folder));
    const QString file = folder + "/gptoss-mxfp4.gguf";
    QVERIFY(QFile::copy(testDataDir() + "/gptoss/gptoss-mxfp4.gguf", file));
    const CliRun inspect = run_cli({"inspect", file, "--json"});
    QVERIFY2(inspect.code == 0, inspect.err.constData());
    const QJsonObject j = QJsonDocument::fromJson(inspect.out).object();
    QCOMPARE(j["architecture"].toString(), QString("gpt-oss"));
    QVERIFY(j["loadable"].toBool());
    QCOMPARE(j["experts"].toObject()["gating"].toString(), QString("top_k_then_softmax"));
    QVERIFY(j["attention"].toObject()["sinks"].toBool());
    QCOMPARE(j["rope"].toObject()["yarn_factor"].toDouble(), 32.0);
    // its MXFP4 experts are computed as stored (kernels of their own)
    QVERIFY(j["tensor_types"].toObject().contains("mxfp4"));
    const QString refusal = j["device_weights"].toObject()["refusal"].toString();
    QVERIFY2(refusal.contains("attention sinks") && refusal.contains("gpt-oss"), qPrintable(refusal));
    const CliRun text = run_cli({"inspect", file});
    for (const char* line : {"a sink logit per head", "sliding window of 8 positions, one layer in 2 global",
                             "YaRN scaling 32", "3 used per token (router logits' top 3, softmax over them)",
                             "not run: the GPU backend does not run gpt-oss models yet"}) {
      QVERIFY2(text.out.contains(line), text.out.constData());
    }

    const QProcessEnvironment env = without_model_stores(tmp_.path());  // no stores: the folder alone
    const CliRun json = run_cli({"models", "--dir", folder, "--json"}, 60000, env);
    QVERIFY2(json.code == 0, json.err.constData());
    const QJsonArray models = QJsonDocument::fromJson(json.out).object()["models"].toArray();
    QCOMPARE(models.size(), 1);
    const QJsonObject m = models[0].toObject();
    QCOMPARE(m["architecture"].toString(), QString("gpt-oss"));
    QVERIFY2(m["loadable"].toBool(), qPrintable(m["problem"].toString()));
    QCOMPARE(m["experts"].toInt(), 8);
  }

  // starcoder2 (the transformers oracle file): inspect describes its LayerNorm, ungated
  // feed-forward and window and says a GPU does not run it; models lists it as loadable.
  void inspectAndListStarcoder2() {
    const QString folder = tmp_.filePath("starcoder2");
    QVERIFY(QDir().mkpath(folder));
    const QString file = folder + "/starcoder2.gguf";
    QVERIFY(QFile::copy(testDataDir() + "/arch_oracles_transformers/starcoder2.gguf", file));
    const CliRun inspect = run_cli({"inspect", file, "--json"});
    QVERIFY2(inspect.code == 0, inspect.err.constData());
    const QJsonObject j = QJsonDocument::fromJson(inspect.out).object();
    QCOMPARE(j["architecture"].toString(), QString("starcoder2"));
    QVERIFY(j["loadable"].toBool());
    QCOMPARE(j["norm"].toString(), QString("layer"));
    QCOMPARE(j["feed_forward"].toObject()["gated"].toBool(true), false);
    QCOMPARE(j["attention"].toObject()["sliding_window"].toInt(), 8);
    QVERIFY(j["device_weights"].toObject()["refusal"].toString().contains("LayerNorm with biases"));
    const CliRun text = run_cli({"inspect", file});
    QVERIFY2(text.out.contains("sliding window of 8 positions on every layer"), text.out.constData());
    QVERIFY2(text.out.contains("LayerNorm with biases; ungated GELU-tanh, with biases"), text.out.constData());
    QVERIFY2(text.out.contains("not run: the GPU backend does not run starcoder2 models yet"), text.out.constData());

    const QProcessEnvironment env = without_model_stores(tmp_.path());  // no stores: the folder alone
    const CliRun json = run_cli({"models", "--dir", folder, "--json"}, 60000, env);
    QVERIFY2(json.code == 0, json.err.constData());
    const QJsonArray models = QJsonDocument::fromJson(json.out).object()["models"].toArray();
    QCOMPARE(models.size(), 1);
    const QJsonObject m = models[0].toObject();
    QCOMPARE(m["architecture"].toString(), QString("starcoder2"));
    QVERIFY2(m["loadable"].toBool(), qPrintable(m["problem"].toString()));
  }

  // --cost measures (--remeasure: whatever the cache holds) and stores; the next run reads
  // the same figures back. The cache directory is the suite's (XDG_CACHE_HOME).
  // `perplexity --json` prints what the engine's perplexity() gives on the same text and
  // model, and a context the model does not have is a clear error (exit 2).
  void perplexityOfAText() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    const QString text_path = tmp_.filePath("story.txt");
    const QByteArray text = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.\n"
                            "One day, she saw a big, red ball. She wanted to play with it.\n";
    QFile f(text_path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(text);
    f.close();
    const QStringList model{"-m", QString::fromStdString(bin), "--tokenizer", QString::fromStdString(tok), "--device", "cpu"};
    const CliRun run = run_cli(QStringList{"perplexity"} + model + QStringList{"-f", text_path, "--ctx", "24", "--json"});
    QVERIFY2(run.code == 0, run.err.constData());
    const QJsonObject got = QJsonDocument::fromJson(run.out).object();

    specula::LoadOptions load;
    load.tokenizer_path = tok;
    const auto stories = specula::load_model(bin, load);
    const std::vector<int> tokens = stories->tokenizer->encode(text.toStdString(), false);
    specula::PerplexityOptions options;
    options.context = 24;
    const specula::PerplexityResult want = specula::perplexity(*specula::create_cpu_backend(2), *stories, tokens, options);
    QCOMPARE(got["tokens"].toInt(), int(want.tokens));
    QCOMPARE(got["scored"].toInt(), int(want.scored));
    QCOMPARE(got["windows"].toInt(), want.windows);
    QVERIFY(want.perplexity() > 1.0);
    QVERIFY2(std::abs(got["perplexity"].toDouble() / want.perplexity() - 1) < 1e-9, run.out.constData());

    const CliRun too_long = run_cli(QStringList{"perplexity"} + model + QStringList{"-f", text_path, "--ctx", "100000"});
    QCOMPARE(too_long.code, 2);
    QVERIFY2(too_long.err.contains("512"), too_long.err.constData());  // names the model's context
  }

  void inspectCost() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    const QStringList args{"inspect", QString::fromStdString(bin), "--tokenizer", QString::fromStdString(tok), "--cost",
                           "--device", "cpu", "--threads", "1", "--json"};
    const auto cost_of = [](const CliRun& run) { return QJsonDocument::fromJson(run.out).object()["forward_cost"].toObject(); };
    const CliRun measured = run_cli(args + QStringList{"--remeasure"});
    QVERIFY2(measured.code == 0, measured.err.constData());
    const QJsonObject first = cost_of(measured);
    QVERIFY(!first["from_file"].toBool());
    QVERIFY(first["backend"].toString().contains("1 thread"));
    QCOMPARE(first["layers"].toInt(), 5);
    const QJsonArray points = first["points"].toArray();
    QVERIFY(points.size() >= 3);
    QCOMPARE(points.first().toObject()["tokens"].toInt(), 1);
    QVERIFY(points.first().toObject()["forward_ms"].toDouble() > 0);
    QVERIFY(QFileInfo::exists(first["file"].toString()));

    const CliRun cached = run_cli(args);
    QVERIFY2(cached.code == 0, cached.err.constData());
    const QJsonObject second = cost_of(cached);
    QVERIFY(second["from_file"].toBool());
    QCOMPARE(second["points"].toArray(), points);

    const CliRun text = run_cli({"inspect", QString::fromStdString(bin), "--tokenizer", QString::fromStdString(tok), "--cost",
                                 "--device", "cpu", "--threads", "1"});
    QCOMPARE(text.code, 0);
    QVERIFY2(text.out.contains("forward cost on cpu") && text.out.contains("read from"), text.out.constData());
  }

  // --simd shows the cost of the kernels it names (the cost a bench-spec --simd run's
  // goodput weighs), measured apart from the best level's; a level needs --device cpu.
  void inspectCostAtASimdLevel() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    const QStringList args{"inspect", QString::fromStdString(bin), "--tokenizer", QString::fromStdString(tok), "--cost",
                           "--threads", "1", "--json", "--simd", "portable"};
    const CliRun portable = run_cli(args + QStringList{"--device", "cpu"});
    QVERIFY2(portable.code == 0, portable.err.constData());
    const QJsonObject cost = QJsonDocument::fromJson(portable.out).object()["forward_cost"].toObject();
    QVERIFY2(cost["backend"].toString().contains("portable"), qPrintable(cost["backend"].toString()));
    QVERIFY(cost["points"].toArray().first().toObject()["forward_ms"].toDouble() > 0);

    const CliRun elsewhere = run_cli(args + QStringList{"--device", "cuda"});
    QCOMPARE(elsewhere.code, 2);
    QVERIFY2(elsewhere.err.contains("--simd") && elsewhere.err.contains("--device cpu"), elsewhere.err.constData());
  }

  void corruptFilesFailCleanly() {
    const QString bad = tmp_.filePath("bad.gguf");
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QByteArray("GGUF\x03\0\0\0", 8) + QByteArray(16, '\xff'));
    f.close();
    const CliRun inspect = run_cli({"inspect", bad});
    QCOMPARE(inspect.code, 2);
    QVERIFY2(inspect.err.contains("bad.gguf") && inspect.err.contains("invalid GGUF file"), inspect.err.constData());
    const CliRun convert = run_cli({"convert", bad, tmp_.filePath("out.gguf")});
    QCOMPARE(convert.code, 2);
    QVERIFY(!QFile::exists(tmp_.filePath("out.gguf")));
    const CliRun type = run_cli({"convert", bad, tmp_.filePath("out.gguf"), "--type", "q5_1"});
    QVERIFY(type.code != 0);
  }

  // A file Specula reads but cannot run (a tensor type it does not compute with, an
  // architecture it lacks) is described from its header and vocabulary with the reason it
  // does not load, and never called invalid; --cost, which runs it, fails with that reason.
  void inspectAFileThatDoesNotLoad() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    const QString q8 = tmp_.filePath("stories-for-variants.gguf");
    const CliRun convert = run_cli({"convert", QString::fromStdString(bin), q8, "--tokenizer", QString::fromStdString(tok),
                                    "--type", "q8_0"});
    QVERIFY2(convert.code == 0, convert.err.constData());
    const QString typed = tmp_.filePath("stories-q8_1.gguf"), mamba = tmp_.filePath("stories-mamba.gguf");
    write_unrunnable_variant(q8.toStdString(), typed.toStdString(), "blk.0.attn_q.weight", specula::TensorType::Q8_1);
    write_unrunnable_variant(q8.toStdString(), mamba.toStdString(), "blk.0.attn_q.weight", specula::TensorType::Q8_1,
                             "mamba");

    const CliRun json = run_cli({"inspect", typed, "--json"});
    QVERIFY2(json.code == 0, json.err.constData());
    const QJsonObject j = QJsonDocument::fromJson(json.out).object();
    QCOMPARE(j["loadable"].toBool(true), false);
    const QString problem = j["problem"].toString();
    QVERIFY2(problem.contains("tensor 'blk.0.attn_q.weight' has type q8_1") &&
                 problem.contains("f32, f16, bf16, q8_0, q4_0, q4_K, q6_K") && !problem.contains("invalid"),
             qPrintable(problem));
    QCOMPARE(j["architecture"].toString(), QString("llama"));
    QCOMPARE(j["config"].toObject()["block_count"].toInt(), 5);
    const QJsonObject types = j["tensor_types"].toObject();
    QCOMPARE(types["q8_1"].toObject()["tensors"].toInt(), 1);
    QCOMPARE(types["q8_1"].toObject()["supported"].toBool(true), false);
    QCOMPARE(types["q8_0"].toObject()["tensors"].toInt(), 30);
    QCOMPARE(j["tokenizer"].toObject()["vocab_size"].toInt(), 512);
    QCOMPARE(j["tokenizer"].toObject()["sample_ids"].toArray().first().toInt(), 1);

    const CliRun text = run_cli({"inspect", mamba});
    QVERIFY2(text.code == 0, text.err.constData());
    QVERIFY2(text.out.contains("architecture mamba") && text.out.contains("512 pieces") &&
                 text.out.contains("q8_1") && text.out.contains("not supported") &&
                 text.out.contains("does not load") && text.out.contains("architecture 'mamba' is not supported"),
             text.out.constData());

    const CliRun cost = run_cli({"inspect", typed, "--cost", "--device", "cpu"});
    QCOMPARE(cost.code, 2);
    QVERIFY2(cost.err.contains("has type q8_1") && !cost.err.contains("invalid"), cost.err.constData());

    const QProcessEnvironment env = without_model_stores(tmp_.path());  // no stores: the folder alone
    const CliRun models = run_cli({"models", "--dir", tmp_.path(), "--json"}, 60000, env);
    QVERIFY2(models.code == 0, models.err.constData());
    QVERIFY2(models.out.contains("has type q8_1") && models.out.contains("architecture 'mamba' is not supported"),
             models.out.constData());
  }

  // A home with stories260K in LM Studio's folder and in Ollama's store (a second tag of
  // the same blob), a draft converted from it, and a --dir folder holding a file that is
  // not a model.
  void modelsListsTheStoresAndAFolder() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    QTemporaryDir home;
    const QString lmstudio = home.filePath(".lmstudio/models/someone/stories-GGUF");
    const QString blobs = home.filePath(".ollama/models/blobs");
    const QString manifests = home.filePath(".ollama/models/manifests/registry.ollama.ai/library/stories");
    const QString extra = home.filePath("extra");
    for (const QString& dir : {lmstudio, blobs, manifests, extra}) QVERIFY(QDir().mkpath(dir));
    const QString gguf = lmstudio + "/stories260K-f32.gguf";
    QCOMPARE(run_cli({"convert", QString::fromStdString(bin), gguf, "--tokenizer", QString::fromStdString(tok)}).code, 0);
    const QString blob = blobs + "/sha256-" + QString(64, 'e');
    QVERIFY(QFile::copy(gguf, blob));
    for (const char* tag : {"260k", "latest"}) {
      QFile manifest(manifests + "/" + tag);
      QVERIFY(manifest.open(QIODevice::WriteOnly));
      manifest.write(R"({"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:)" +
                     QByteArray(64, 'e') + R"("}]})");
    }
    QFile junk(extra + "/notes.gguf");
    QVERIFY(junk.open(QIODevice::WriteOnly));
    junk.write("these are notes, not a model");
    junk.close();

    const QProcessEnvironment env = without_model_stores(home.path());
    const CliRun json = run_cli({"models", "--json", "--dir", extra}, 60000, env);
    QVERIFY2(json.code == 0, json.err.constData());
    const QJsonObject j = QJsonDocument::fromJson(json.out).object();
    QJsonObject ollama, lm;
    for (const QJsonValue& m : j["models"].toArray()) {
      if (m["path"].toString() == blob) ollama = m.toObject();
      if (m["path"].toString() == gguf) lm = m.toObject();
    }
    QCOMPARE(ollama["name"].toString(), QString("stories:260k"));
    QCOMPARE(ollama["aliases"].toArray().first().toString(), QString("stories:latest"));
    QCOMPARE(ollama["store"].toString(), QString("ollama"));
    QCOMPARE(ollama["architecture"].toString(), QString("llama"));
    QCOMPARE(ollama["parameters"].toInteger(), qint64(260032));
    QCOMPARE(ollama["weight_type"].toString(), QString("F32"));
    QCOMPARE(ollama["vocabulary"].toInt(), 512);
    QVERIFY(ollama["loadable"].toBool());
    QVERIFY(ollama["problem"].isNull());
    QCOMPARE(lm["name"].toString(), QString("someone/stories-GGUF/stories260K-f32.gguf"));
    QCOMPARE(lm["store"].toString(), QString("lm-studio"));
    bool notes_skipped = false;
    for (const QJsonValue& s : j["skipped"].toArray()) {
      if (s["path"].toString().endsWith("notes.gguf")) notes_skipped = s["reason"].toString().contains("wrong magic");
    }
    QVERIFY(notes_skipped);
    QCOMPARE(j["roots"].toArray().first()["path"].toString(), extra);

    const CliRun table = run_cli({"models"}, 60000, env);
    QVERIFY2(table.code == 0, table.err.constData());
    QVERIFY(table.out.startsWith("NAME"));
    QVERIFY2(table.out.contains("stories:260k") && table.out.contains("260K") && table.out.contains(blob.toUtf8()),
             table.out.constData());
    const CliRun missing = run_cli({"models", "--dir", home.filePath("nowhere")}, 60000, env);
    QCOMPARE(missing.code, 2);
    QVERIFY(missing.err.contains("no such folder"));
  }
};

QTEST_GUILESS_MAIN(TestCliModels)
#include "test_cli_models.moc"
