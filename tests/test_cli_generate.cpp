// specula-cli generate, run as a user would: greedy text equals the reference output
// (shared/oracles/stories260K.md) with and without a draft; --json has the documented
// fields; a code prompt (--code-stops) ends with its newline; --suffix fills the middle of a
// model with FIM tokens; bad arguments exit with code 2 and say why.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

#include "cli_run.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/model_export.h"
#include "model/random_model.h"
#include "model/tokenizer.h"
#include "oracle_text.h"
#include "shared_data.h"
#include "small_models.h"

using namespace specula::test;

class TestCliGenerate : public QObject {
  Q_OBJECT

  QStringList model;
  std::string oracle;

 private slots:
  void initTestCase() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    SPECULA_SHARED_FILE(md, "oracles/stories260K.md");
    model = {"-m", QString::fromStdString(bin), "--tokenizer", QString::fromStdString(tok), "--device", "cpu"};
    oracle = md;
  }

  void greedyTextIsTheReference_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<int>("block");
    QTest::newRow("no prompt, 200 steps") << QStringList{"--steps", "200"} << 0;
    QTest::newRow("no prompt, 200 steps, layers:2") << QStringList{"--steps", "200", "--draft", "layers:2"} << 0;
    QTest::newRow("Zoo, 60 steps, ngram bass") << QStringList{"-p", "Zoo", "--steps", "60", "--draft", "ngram", "--draft-policy", "bass"} << 1;
  }
  void greedyTextIsTheReference() {
    if (model.isEmpty()) QSKIP("no model");
    QFETCH(QStringList, args);
    QFETCH(int, block);
    const CliRun r = run_cli(QStringList{"generate"} + model + QStringList{"--temp", "0"} + args);
    QCOMPARE(r.code, 0);
    const std::string expected = oracle_text_block(oracle, static_cast<size_t>(block));
    QVERIFY(!expected.empty());
    QCOMPARE(r.out, QByteArray::fromStdString(expected) + "\n");
  }

  // On a terminal, loading shows one line of progress (reading, preparing, measuring the
  // forward for goodput's drafts), erased before the text; through a pipe none of it appears.
  void loadProgressOnATerminalOnly() {
    if (model.isEmpty()) QSKIP("no model");
    const QString script = QStandardPaths::findExecutable("script");  // util-linux: a pseudo-terminal
    if (script.isEmpty()) QSKIP("script(1) is not installed");
    QStringList args = QStringList{"generate"} + model + QStringList{"-p", "Zoo", "--steps", "60", "--temp", "0", "--draft", "layers:2"};
    QTemporaryDir cache;  // no cost file yet: the forward is measured
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("XDG_CACHE_HOME", cache.path());
    const CliRun piped = run_cli(args, 180000, env);
    QCOMPARE(piped.code, 0);
    QVERIFY2(!piped.err.contains("\r") && !piped.err.contains("reading "), piped.err.constData());

    QTemporaryDir other_cache;
    env.insert("XDG_CACHE_HOME", other_cache.path());
    QStringList quoted;
    for (const QString& a : QStringList{QStringLiteral(SPECULA_CLI)} + args) quoted << "'" + a + "'";
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(script, {"-qec", quoted.join(' '), "/dev/null"});
    QVERIFY(p.waitForFinished(180000));
    QCOMPARE(p.exitCode(), 0);
    const QByteArray terminal = p.readAllStandardOutput();  // the terminal's stdout and stderr together
    QVERIFY2(terminal.contains("reading stories260K.bin") && terminal.contains("preparing stories260K.bin") &&
                 terminal.contains("measuring the forward of stories260K.bin 100 %"),
             terminal.constData());
    // the line is erased before the text, which reads as through the pipe
    const qsizetype text_at = terminal.indexOf(piped.out.left(20));
    QVERIFY2(text_at > 0, terminal.constData());
    QVERIFY(terminal.lastIndexOf("\r\033[K", text_at) == text_at - 4);
  }

  // The loader the app, the commands and serve share: a text file named .gguf gets GGUF's
  // own message, not that of the llama2.c format tried for other files.
  void textFileNamedGgufGetsTheGgufMessage() {
    QTemporaryDir dir;
    QFile file(dir.filePath("notes.gguf"));
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("a text file, not a model\n");
    file.close();
    const CliRun r = run_cli({"generate", "-m", file.fileName(), "-p", "def f():"});
    QVERIFY(r.code != 0);
    QVERIFY2(r.err.contains("invalid GGUF file: wrong magic"), r.err.constData());
  }

  void jsonOutput() {
    if (model.isEmpty()) QSKIP("no model");
    const CliRun r = run_cli(QStringList{"generate"} + model +
                      QStringList{"-p", "Zoo", "--max-tokens", "20", "--temp", "0.8", "--seed", "5", "-n", "3",
                                  "--draft", "layers:3", "--draft-policy", "adaptive", "--stop", "\n", "--json"});
    QCOMPARE(r.code, 0);
    const QJsonObject o = QJsonDocument::fromJson(r.out).object();
    const QJsonArray candidates = o["candidates"].toArray();
    QCOMPARE(candidates.size(), 3);
    for (const auto& v : candidates) {
      const QJsonObject c = v.toObject();
      for (const char* key : {"text", "tokens", "finish", "mean_logprob", "accepted", "proposed"}) QVERIFY2(c.contains(key), key);
      QVERIFY(!c["text"].toString().contains('\n'));  // cut before the stop string
      QVERIFY(QStringList({"stop", "eos", "length"}).contains(c["finish"].toString()));
      QVERIFY(c["mean_logprob"].toDouble() < 0);
      QVERIFY(c["accepted"].toInt() <= c["proposed"].toInt());
    }
    const QJsonObject t = o["totals"].toObject();
    for (const char* key : {"wall_s", "tokens_per_s", "ms_per_token_per_seq", "acceptance_rate", "target_forwards"}) QVERIFY2(t.contains(key), key);
    QVERIFY(t["target_forwards"].toInt() >= 2);
    int generated = 0;
    for (const auto& v : candidates) generated += v.toObject()["tokens"].toInt();
    QCOMPARE(t["generated_tokens"].toInt(), generated);
    QVERIFY(t["draft_forwards"].toInt() >= 1);  // the layers:3 draft ran
    QVERIFY(t["steps"].toInt() >= 1);
    QVERIFY(t["steps"].toInt() < t["target_forwards"].toInt());  // the prefill is a forward, not a step
    QVERIFY(t["prompt_tokens"].toInt() >= 2);                      // BOS and "Zoo"
    QVERIFY(t["peak_kv_blocks"].toInt() >= 1);
  }

  // Generating code (--code-stops), a prompt without its final newline is sent with one: it
  // counts the tokens of "def add(a, b):\n", not those of the signature line alone, which the
  // candidates would go on writing.
  void codePromptGetsItsFinalNewline() {
    if (model.isEmpty()) QSKIP("no model");
    const auto prompt_tokens = [&](const QString& prompt, const QStringList& more) {
      const CliRun r = run_cli(QStringList{"generate"} + model +
                               QStringList{"-p", prompt, "--max-tokens", "2", "--temp", "0", "--json"} + more);
      if (r.code != 0) return -1;
      return QJsonDocument::fromJson(r.out).object()["totals"].toObject()["prompt_tokens"].toInt();
    };
    const int line = prompt_tokens("def add(a, b):", {});
    const int with_newline = prompt_tokens("def add(a, b):\n", {});
    QVERIFY(line > 0 && with_newline > line);
    QCOMPARE(prompt_tokens("def add(a, b):", {"--code-stops"}), with_newline);
    QCOMPARE(prompt_tokens("def add(a, b):\n", {"--code-stops"}), with_newline);  // one newline, not two
  }

  void badArguments_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("message");
    QTest::newRow("layers:0") << QStringList{"--draft", "layers:0"} << "between 1 and";
    QTest::newRow("layers above the model") << QStringList{"--draft", "layers:6"} << "between 1 and";
    QTest::newRow("no candidates") << QStringList{"-n", "0"} << "candidates";
    QTest::newRow("too many candidates") << QStringList{"-n", "1000"} << "candidates";
    QTest::newRow("budget 0") << QStringList{"--budget", "0"} << "budget";
    QTest::newRow("unknown policy") << QStringList{"--draft-policy", "greedy"} << "policy";
    QTest::newRow("model without file") << QStringList{"--draft", "model"} << "-d";
  }
  void badArguments() {
    if (model.isEmpty()) QSKIP("no model");
    QFETCH(QStringList, args);
    QFETCH(QString, message);
    const CliRun r = run_cli(QStringList{"generate"} + model + QStringList{"-p", "Hi", "--max-tokens", "4"} + args);
    QCOMPARE(r.code, 2);
    QVERIFY2(QString(r.err).contains(message), r.err.constData());
    QVERIFY(r.out.isEmpty());
  }

  // A tiny random model with DeepSeek-Coder's vocabulary: the prompt is the code before the
  // hole, --suffix names the code after it; the model is given the FIM layout (its prompt
  // tokens say so) and each candidate is shown in place between the two.
  void fillInTheMiddle() {
    SPECULA_SHARED_FILE(deepseek, "tokenizers/bpe-vocab/ggml-vocab-deepseek-coder.gguf");
    QTemporaryDir dir;
    const QString gguf = dir.filePath("fim.gguf");
    const auto fim_model = write_tiny_model_with_vocabulary(deepseek, gguf.toStdString());
    const std::string prefix = "def add(a, b):\n    return ", suffix = "\n\nprint(add(1, 2))\n";
    const QString suffix_file = dir.filePath("suffix.py");
    std::ofstream(suffix_file.toStdString(), std::ios::binary) << suffix;
    const QStringList args = {"generate", "-m", gguf, "--device", "cpu", "-p", QString::fromStdString(prefix),
                              "--suffix", suffix_file, "--temp", "0", "--max-tokens", "6"};

    const CliRun json = run_cli(args + QStringList{"--json"});
    QCOMPARE(json.code, 0);
    const QJsonObject o = QJsonDocument::fromJson(json.out).object();
    QCOMPARE(o["totals"].toObject()["prompt_tokens"].toInt(),
             static_cast<int>(fim_model->tokenizer->fim_prompt(prefix, suffix).size()));
    const QString text = o["candidates"].toArray()[0].toObject()["text"].toString();

    const CliRun plain = run_cli(args);
    QCOMPARE(plain.code, 0);
    QCOMPARE(plain.out, QByteArray::fromStdString(prefix) + text.toUtf8() + QByteArray::fromStdString(suffix) + "\n");

    // stories260K has no FIM tokens; an unreadable suffix file is named
    const CliRun none = run_cli(QStringList{"generate"} + model + QStringList{"-p", "Hi", "--suffix", suffix_file});
    QCOMPARE(none.code, 2);
    QVERIFY2(QString(none.err).contains("fill-in-the-middle"), none.err.constData());
    const CliRun missing = run_cli(args.mid(0, 7) + QStringList{"--suffix", dir.filePath("nope.py")});
    QCOMPARE(missing.code, 2);
    QVERIFY2(QString(missing.err).contains("nope.py"), missing.err.constData());
  }

  // The chat prompt style on the real SmolLM2-135M-Instruct: the model reads the chat that
  // asks for the function, rendered as jinja2 renders the GGUF's template (the shared
  // render.py, the template read by the gguf package), the assistant's turn opened with a
  // fence and the code; candidates continue the code and end before the closing fence, and
  // each is shown as prompt + completion. Raw and the demo pair (no template) stay raw.
  void chatPromptStyle() {
    SPECULA_REAL_MODEL(smol, "SmolLM2-135M-Instruct.Q4_1.gguf");
    SPECULA_SHARED_FILE(render, "chat-templates/render.py");
    const std::string prompt = "def add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n";
    const char* reference =
        "import sys, os, gguf\n"
        "sys.path.insert(0, os.path.dirname(sys.argv[1])); import render\n"
        "f = gguf.GGUFReader(sys.argv[2]).fields['tokenizer.chat_template']\n"
        "template = bytes(f.parts[f.data[0]]).decode()\n"
        "ask = 'Complete the following Python function:\\n```python\\n' + sys.argv[3] + '```'\n"
        "bos, eos = render.SPECIAL['SmolLM2']\n"
        "text = render.render(template, [{'role': 'user', 'content': ask}], True, bos, eos) + '```python\\n'\n"
        "sys.stdout.buffer.write(text.encode())\n";
    QProcess python;
    python.start("python3", {"-c", reference, QString::fromStdString(render), QString::fromStdString(smol),
                             QString::fromStdString(prompt)});
    QVERIFY(python.waitForFinished(60000));
    if (python.exitCode() != 0) {
      const QByteArray why = "jinja2 or gguf not importable: " + python.readAllStandardError();
      if (runningInCi()) QFAIL(why.constData());
      QSKIP(why.constData());
    }
    const QString expected_prefix = QString::fromUtf8(python.readAllStandardOutput());
    QVERIFY(expected_prefix.contains("<|im_start|>assistant\n```python\n"));

    const QStringList base = {"generate", "-m", QString::fromStdString(smol), "--device", "cpu", "-p",
                              QString::fromStdString(prompt), "--code-stops", "--seed", "2"};
    const CliRun chat = run_cli(base + QStringList{"-n", "3", "--max-tokens", "64", "--temp", "0.3", "--json"});
    QVERIFY2(chat.code == 0, chat.err.constData());
    const QJsonObject o = QJsonDocument::fromJson(chat.out).object();
    QCOMPARE(o["prompt_style"].toString(), QString("chat"));
    QCOMPARE(o["prompt"].toString(), QString::fromStdString(prompt));
    QCOMPARE(o["chat_prefix"].toString(), expected_prefix);
    specula::LoadOptions metadata;
    metadata.metadata_only = true;
    const auto tokenizer = specula::load_model(smol, metadata)->tokenizer;
    int fenced = 0, written = 0;
    for (const QJsonValue& v : o["candidates"].toArray()) {
      const QString text = v.toObject()["text"].toString();
      qInfo("chat candidate (%s): %s", qPrintable(v.toObject()["finish"].toString()), qPrintable(text));
      QVERIFY2(!text.contains("```"), qPrintable(text));        // cut before the closing fence
      QVERIFY2(!text.startsWith("def add"), qPrintable(text));  // the body, not the code again
      fenced += v.toObject()["finish"].toString() == "stop" ? 1 : 0;
      written += text.trimmed().isEmpty() ? 0 : 1;
    }
    QVERIFY2(fenced > 0, "no candidate reached a stop (the fence or a code stop)");
    QVERIFY2(written > 0, "every candidate is empty");
    // the model read the chat and the code, as apply_chat_template's tokens (token healing
    // off: it would give the prompt's last token back to the candidates)
    const CliRun read = run_cli(base + QStringList{"--max-tokens", "1", "--json", "--no-token-healing"});
    QCOMPARE(read.code, 0);
    const std::string whole = expected_prefix.toStdString() + prompt;
    QCOMPARE(QJsonDocument::fromJson(read.out).object()["totals"].toObject()["prompt_tokens"].toInt(),
             static_cast<int>(tokenizer->encode(whole, false, true).size()));

    const QStringList greedy = {"--max-tokens", "64", "--temp", "0"};
    const CliRun shown = run_cli(base + greedy);  // one candidate, as text
    const CliRun shown_json = run_cli(base + greedy + QStringList{"--json"});
    QCOMPARE(shown.code, 0);
    const QString text = QJsonDocument::fromJson(shown_json.out).object()["candidates"].toArray()[0].toObject()["text"].toString();
    QCOMPARE(shown.out, QByteArray::fromStdString(prompt) + text.toUtf8() + "\n");

    const CliRun raw =
        run_cli(base + QStringList{"--prompt-style", "raw", "--max-tokens", "2", "--json", "--no-token-healing"});
    QCOMPARE(raw.code, 0);
    const QJsonObject r = QJsonDocument::fromJson(raw.out).object();
    QCOMPARE(r["prompt_style"].toString(), QString("raw"));
    QVERIFY(r["chat_prefix"].isNull());
    QCOMPARE(r["totals"].toObject()["prompt_tokens"].toInt(), static_cast<int>(tokenizer->encode(prompt, true).size()));

    // the demo pair has no template: auto is raw, chat is refused
    const QStringList demo = {"generate", "--device", "cpu", "-p", "def f():\n", "--code-stops", "--max-tokens", "2"};
    const CliRun demo_auto = run_cli(demo + QStringList{"--json"});
    QCOMPARE(demo_auto.code, 0);
    QCOMPARE(QJsonDocument::fromJson(demo_auto.out).object()["prompt_style"].toString(), QString("raw"));
    const CliRun demo_chat = run_cli(demo + QStringList{"--prompt-style", "chat"});
    QCOMPARE(demo_chat.code, 2);
    QVERIFY2(QString(demo_chat.err).contains("chat template"), demo_chat.err.constData());
  }

  void promptBeyondContext() {
    if (model.isEmpty()) QSKIP("no model");
    const QString prompt = QStringLiteral("hello world ").repeated(400);  // about 2400 tokens; the context is 512
    const CliRun r = run_cli(QStringList{"generate"} + model + QStringList{"-p", prompt, "--max-tokens", "4"});
    QCOMPARE(r.code, 2);
    QVERIFY2(QString(r.err).contains("context"), r.err.constData());
    QVERIFY(r.out.isEmpty());
  }
};

QTEST_GUILESS_MAIN(TestCliGenerate)
#include "test_cli_generate.moc"
