// specula-cli inspect and convert, run as a user would: conversion of stories260K to q8_0,
// inspection of the result as JSON, and clean failures on a corrupt file.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include "cli_run.h"
#include "shared_data.h"

using namespace specula::test;

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
    // on a GPU every matrix of the q8_0 / f32 mix is fp16; norms stay f32
    const QJsonObject device = j["device_weights"].toObject();
    QCOMPARE(device["type"].toString(), QString("f16"));
    QCOMPARE(device["bytes"].toInt(), (512 * 64 + 5 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 64 * 172)) * 2 + 11 * 64 * 4);
    const QJsonObject tokenizer = j["tokenizer"].toObject();
    QCOMPARE(tokenizer["vocab_size"].toInt(), 512);
    QCOMPARE(tokenizer["bos"].toInt(), 1);
    QCOMPARE(tokenizer["sample_ids"].toArray().first().toInt(), 1);
    QVERIFY(tokenizer["sample_ids"].toArray().size() > 5);

    const CliRun text = run_cli({"inspect", out});
    QCOMPARE(text.code, 0);
    QVERIFY(text.out.contains("q8_0") && text.out.contains("512 pieces"));
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
};

QTEST_GUILESS_MAIN(TestCliModels)
#include "test_cli_models.moc"
