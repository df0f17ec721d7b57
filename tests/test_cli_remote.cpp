// specula-cli generate and eval with --remote, run as a user would against `specula-cli serve`
// on loopback: the same text and --json output as a local run of the same model, drafter and
// seed; the same Pass@All for eval on the demo problems; bench-serve's measurements, one
// row per n from as many requests as asked; and clear messages with their exit codes for
// options that do not fit a server and for a server that is not there; fill in the middle
// through a server, the same filling as a local run; perplexity through a server, the same
// figures as a local run.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>
#include <fstream>

#include "cli_run.h"
#include "serve_process.h"
#include "shared_data.h"
#include "small_models.h"

using namespace specula::test;

namespace {

const QString kDemoProblems = QStringLiteral(SPECULA_SOURCE_DIR "/resources/problems/demo.jsonl");

// --json output without what the clock decides.
QJsonObject without_timing(QJsonObject o) {
  QJsonObject totals = o["totals"].toObject();
  for (const char* key : {"wall_s", "tokens_per_s", "ms_per_token_per_seq"}) totals.remove(key);
  o["totals"] = totals;
  return o;
}

}  // namespace

class TestCliRemote : public QObject {
  Q_OBJECT

  QStringList model;
  std::unique_ptr<ServeProcess> server;

 private slots:
  void initTestCase() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    model = {"-m", QString::fromStdString(bin), "--tokenizer", QString::fromStdString(tok), "--device", "cpu"};
    server = std::make_unique<ServeProcess>(model + QStringList{"--draft", "layers:2", "--draft-policy", "bass"});
    QVERIFY2(server->started(), qPrintable(server->errors()));
  }

  void sameTextAsLocal() {
    const QStringList args{"-p", "Once upon a time", "--max-tokens", "80", "--temp", "0"};
    const CliRun local = run_cli(QStringList{"generate"} + model + QStringList{"--draft", "layers:2"} + args);
    const CliRun remote = run_cli(QStringList{"generate", "--remote", server->url()} + args);
    QVERIFY2(local.code == 0, local.err.constData());
    QVERIFY2(remote.code == 0, remote.err.constData());
    QCOMPARE(remote.out, local.out);
    QVERIFY2(remote.err.contains("server: stories260K at " + server->url().toUtf8()), remote.err.constData());
  }

  void sameJsonAsLocal() {
    const QStringList args{"-p", "Lily", "--max-tokens", "40", "--temp", "0.8", "--seed", "5", "-n", "3",
                           "--stop", "\n", "--json"};
    const CliRun local = run_cli(QStringList{"generate"} + model + QStringList{"--draft", "layers:2", "--draft-policy", "bass"} + args);
    const CliRun remote = run_cli(QStringList{"generate", "--remote", server->url()} + args);
    QVERIFY2(local.code == 0, local.err.constData());
    QVERIFY2(remote.code == 0, remote.err.constData());
    const QJsonObject l = without_timing(QJsonDocument::fromJson(local.out).object());
    const QJsonObject r = without_timing(QJsonDocument::fromJson(remote.out).object());
    QCOMPARE(r["candidates"].toArray().size(), 3);
    QCOMPARE(r, l);  // texts, token counts, finish reasons, log-probabilities, acceptance and totals
  }

  // The suffix travels in the request's `suffix` field and the server lays out the model's
  // fill-in-the-middle prompt: the filling equals a local run's, token for token.
  void fillInTheMiddleThroughAServer() {
    SPECULA_SHARED_FILE(deepseek, "tokenizers/bpe-vocab/ggml-vocab-deepseek-coder.gguf");
    QTemporaryDir dir;
    const QString gguf = dir.filePath("fim.gguf");
    write_tiny_model_with_vocabulary(deepseek, gguf.toStdString());
    const QString suffix_file = dir.filePath("suffix.py");
    std::ofstream(suffix_file.toStdString(), std::ios::binary) << "\n\nprint(add(1, 2))\n";

    const QStringList fim_model_args{"-m", gguf, "--device", "cpu", "--draft", "none"};
    ServeProcess fim_server(fim_model_args);
    QVERIFY2(fim_server.started(), qPrintable(fim_server.errors()));
    const QStringList args{"-p", "def add(a, b):\n    return ", "--suffix", suffix_file, "--temp", "0",
                           "--max-tokens", "6", "-n", "2", "--json"};
    const CliRun local = run_cli(QStringList{"generate"} + fim_model_args + args);
    const CliRun remote = run_cli(QStringList{"generate", "--remote", fim_server.url()} + args);
    QVERIFY2(local.code == 0, local.err.constData());
    QVERIFY2(remote.code == 0, remote.err.constData());
    const QJsonObject l = QJsonDocument::fromJson(local.out).object(), r = QJsonDocument::fromJson(remote.out).object();
    QCOMPARE(r["candidates"], l["candidates"]);
    QCOMPARE(r["totals"].toObject()["prompt_tokens"], l["totals"].toObject()["prompt_tokens"]);

    // a model without fill-in-the-middle tokens: the server's refusal reaches the user
    const CliRun refused = run_cli(QStringList{"generate", "--remote", server->url(), "-p", "Hi", "--suffix", suffix_file});
    QVERIFY(refused.code != 0);
    QVERIFY2(refused.err.contains("fill-in-the-middle"), refused.err.constData());
  }

  void optionsThatDoNotFitAServer() {
    CliRun r = run_cli(QStringList{"generate", "--remote", server->url()} + model + QStringList{"-p", "x"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("do not apply"), r.err.constData());
    r = run_cli({"generate", "--remote", server->url(), "--steps", "20"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--steps"), r.err.constData());
    r = run_cli({"generate", "--remote", "localhost:8000", "-p", "x"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("http://"), r.err.constData());
    r = run_cli({"generate", "--remote", server->url(), "--remote-model", "gpt-4", "-p", "x"});
    QCOMPARE(r.code, 6);
    QVERIFY2(r.err.contains("'gpt-4'") && r.err.contains("stories260K"), r.err.constData());
    // chat: asked for through the server's chat endpoint, which a model without a template lacks
    r = run_cli({"generate", "--remote", server->url(), "--prompt-style", "chat", "--code-stops", "-p", "def f():"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--remote-api chat"), r.err.constData());
    r = run_cli({"generate", "--remote", server->url(), "--remote-api", "chat", "--code-stops", "-p", "def f():"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("chat template"), r.err.constData());  // the server's 400 says why
    r = run_cli({"generate", "--remote", server->url(), "--remote-api", "messages", "-p", "x"});
    QVERIFY(r.code != 0);
    QVERIFY2(r.err.contains("--remote-api"), r.err.constData());
  }

  // perplexity --remote cuts the text in the server's ids (/tokenize) and has each window
  // scored there (echo): the same windows, token count and perplexity as a local run of the
  // same model (the server's passes are this process's, so the figures agree to rounding).
  void perplexityThroughAServer() {
    QTemporaryDir dir;
    const QString text_path = dir.filePath("story.txt");
    std::ofstream(text_path.toStdString()) << "Once upon a time, there was a little girl named Lily. She loved to play "
                                              "outside in the park with her friends. One day, she saw a big red ball.\n";
    const QStringList args{"-f", text_path, "--ctx", "16", "--json"};
    const CliRun local = run_cli(QStringList{"perplexity"} + model + args);
    const CliRun remote = run_cli(QStringList{"perplexity", "--remote", server->url()} + args);
    QVERIFY2(local.code == 0, local.err.constData());
    QVERIFY2(remote.code == 0, remote.err.constData());
    const QJsonObject l = QJsonDocument::fromJson(local.out).object(), r = QJsonDocument::fromJson(remote.out).object();
    QVERIFY(l["windows"].toInt() >= 3);  // several windows, each starting with BOS
    for (const char* key : {"tokens", "scored", "windows", "context"}) QCOMPARE(r[key].toInt(), l[key].toInt());
    QVERIFY(l["perplexity"].toDouble() > 1.0);
    QVERIFY2(std::abs(r["perplexity"].toDouble() / l["perplexity"].toDouble() - 1) < 1e-9, remote.out.constData());

    const CliRun both = run_cli(QStringList{"perplexity", "--remote", server->url()} + model + args);
    QCOMPARE(both.code, 2);
    QVERIFY2(both.err.contains("-m and --tokenizer do not apply"), both.err.constData());
  }

  void absentServerIsAMessage() {
    ServeProcess gone(model);
    QVERIFY(gone.started());
    const QString url = gone.url();
    QVERIFY(gone.stopsCleanly());
    const CliRun r = run_cli({"generate", "--remote", url, "-p", "x"});
    QCOMPARE(r.code, 6);
    QVERIFY2(r.err.contains("cannot connect"), r.err.constData());
    const CliRun scored = run_cli({"perplexity", "--remote", url, "-f", SPECULA_SOURCE_DIR "/README.md"});
    QCOMPARE(scored.code, 6);
    QVERIFY2(scored.err.contains("cannot connect"), scored.err.constData());
    const CliRun bench = run_cli({"bench-serve", "--remote", url});
    QCOMPARE(bench.code, 6);
    QVERIFY2(bench.err.contains("cannot connect"), bench.err.constData());
  }

  void benchServeMeasuresEachN() {
    const int completed = health(server->port())["completed"].get<int>();
    const CliRun r = run_cli({"bench-serve", "--remote", server->url(), "--n", "1", "3", "--requests", "4",
                              "--concurrency", "2", "--max-tokens", "8", "--json"});
    QVERIFY2(r.code == 0, r.err.constData());
    const QJsonArray rows = QJsonDocument::fromJson(r.out).array();
    QCOMPARE(rows.size(), 2);
    for (int i = 0; i < 2; ++i) {
      const QJsonObject row = rows[i].toObject();
      QCOMPARE(row["n"].toInt(), i == 0 ? 1 : 3);
      QCOMPARE(row["requests"].toInt(), 4);
      QCOMPARE(row["concurrency"].toInt(), 2);
      QVERIFY(row["requests_per_s"].toDouble() > 0 && row["tokens_per_s"].toDouble() > 0);
      QVERIFY(row["median_first_text_ms"].toDouble() > 0);
      QVERIFY(row["median_first_text_ms"].toDouble() <= row["median_total_ms"].toDouble());
    }
    QCOMPARE(health(server->port())["completed"].get<int>(), completed + 8);  // every request, served whole
  }

  void evalPassAllEqualsLocal() {
    ServeProcess demo({"--device", "cpu"});
    QVERIFY2(demo.started(), qPrintable(demo.errors()));
    const QStringList args{"--problems", kDemoProblems, "-n", "2", "--temp", "0.8", "--seed", "3",
                           "--max-tokens", "128", "--budget", "120", "--json"};
    // a server is sent the prompt as it is: token healing is the local engine's alone
    const CliRun local = run_cli(QStringList{"eval", "--device", "cpu", "--no-token-healing"} + args, 600000);
    const CliRun remote = run_cli(QStringList{"eval", "--remote", demo.url()} + args, 600000);
    QVERIFY2(local.code == 0, local.err.constData());
    QVERIFY2(remote.code == 0, remote.err.constData());
    const QJsonObject l = QJsonDocument::fromJson(local.out).object();
    const QJsonObject r = QJsonDocument::fromJson(remote.out).object();
    QCOMPARE(r["summary"].toObject()["problems"].toInt(), 32);
    QCOMPARE(r["summary"].toObject()["pass_all"].toDouble(), l["summary"].toObject()["pass_all"].toDouble());
    const QJsonArray lp = l["problems"].toArray(), rp = r["problems"].toArray();
    for (int i = 0; i < lp.size(); ++i) {  // problem by problem, the same candidates passed
      QCOMPARE(rp[i].toObject()["n"].toInt(), lp[i].toObject()["n"].toInt());
      QCOMPARE(rp[i].toObject()["c"].toInt(), lp[i].toObject()["c"].toInt());
    }
  }
};

QTEST_GUILESS_MAIN(TestCliRemote)
#include "test_cli_remote.moc"
