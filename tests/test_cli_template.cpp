// specula-cli template, run as a user would: the exact text of real chat templates (jinja2's
// renders in the shared cases.json and tests/data), the model's own template, BOS and EOS
// from a GGUF, exit 2 with the template's message when it raises, and clean failures.
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_run.h"
#include "shared_data.h"

using namespace specula::test;
using Json = nlohmann::ordered_json;

namespace {

Json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return Json::parse(bytes.str());
}

// The oracle case of `data` for a template, conversation and generation prompt.
Json find_case(const Json& data, const std::string& name, const std::string& conversation, bool generation_prompt) {
  for (const Json& c : data["cases"]) {
    if (c["template"] == name && c["conversation"] == conversation && c["add_generation_prompt"] == generation_prompt) return c;
  }
  return Json();
}

}  // namespace

class TestCliTemplate : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;

  QString write(const QString& name, const std::string& content) {
    const QString path = tmp_.filePath(name);
    std::ofstream(path.toStdString(), std::ios::binary) << content;
    return path;
  }

  QString messages_file(const Json& messages) { return write("messages.json", messages.dump()); }

 private slots:
  // --template with the case's BOS and EOS: stdout is jinja2's text, byte for byte.
  void printsExactlyWhatJinjaRenders() {
    SPECULA_SHARED_FILE(cases, "chat-templates/cases.json");
    const QString folder = QFileInfo(QString::fromStdString(cases)).absolutePath();
    const Json data = read_json(cases);
    for (const auto& [name, conversation, generation] :
         {std::tuple{"Qwen-Qwen2.5-7B-Instruct", "system_user", true},
          std::tuple{"microsoft-Phi-3.5-mini-instruct", "multi_turn", false},
          std::tuple{"meta-llama-Llama-3.1-8B-Instruct", "multi_turn", true}}) {
      const Json c = find_case(data, name, conversation, generation);
      QVERIFY(!c.is_null());
      QStringList args = {"template", "--template", folder + "/" + name + ".jinja", "--messages",
                          messages_file(data["conversations"][conversation]), "--bos-token",
                          QString::fromStdString(c["bos_token"].get<std::string>()), "--eos-token",
                          QString::fromStdString(c["eos_token"].get<std::string>())};
      if (!generation) args << "--no-generation-prompt";
      const CliRun run = run_cli(args);
      QVERIFY2(run.code == 0, run.err.constData());
      QCOMPARE(run.out.toStdString(), c["expected"].get<std::string>());
    }
  }

  // A template's raise_exception: exit 2, its message on stderr, nothing on stdout.
  void raisingTemplateExitsTwoWithItsMessage() {
    SPECULA_SHARED_FILE(gemma, "chat-templates/google-gemma-2-2b-it.jinja");
    const Json messages = Json::parse(R"([{"role":"system","content":"s"},{"role":"user","content":"u"}])");
    const CliRun run = run_cli({"template", "--template", QString::fromStdString(gemma), "--messages", messages_file(messages)});
    QCOMPARE(run.code, 2);
    QVERIFY2(run.err.contains("TemplateError: System role not supported"), run.err.constData());
    QVERIFY(run.out.isEmpty());
    // an undefined name used where jinja2 fails, too
    const CliRun undefined = run_cli({"template", "--template", write("u.jinja", "{{ functions + 'x' }}"), "--messages",
                                      messages_file(Json::array())});
    QCOMPARE(undefined.code, 2);
    QVERIFY2(undefined.err.contains("UndefinedError: 'functions' is undefined"), undefined.err.constData());
  }

  // -m: the GGUF's own template with its BOS and EOS texts; --bos-token overrides.
  void modelTemplateFromGguf() {
    SPECULA_REAL_MODEL(smol, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const Json data = read_json(testDataDir().toStdString() + "/chat_template_smollm2.json");
    const Json c = find_case(data, "SmolLM2-135M-Instruct.Q4_1.gguf", "multi_turn", true);
    QVERIFY(!c.is_null());
    const QString messages = messages_file(data["conversations"]["multi_turn"]);
    const CliRun run = run_cli({"template", "-m", QString::fromStdString(smol), "--messages", messages});
    QVERIFY2(run.code == 0, run.err.constData());
    QCOMPARE(run.out.toStdString(), c["expected"].get<std::string>());
    const QString uses_bos = write("bos.jinja", "[{{ bos_token }}|{{ eos_token }}]");
    const CliRun tokens = run_cli({"template", "--template", uses_bos, "--messages", messages, "--eos-token", "E"});
    QCOMPARE(tokens.out, QByteArray("[|E]"));
  }

  void modelWithoutTemplateFailsClearly() {
    SPECULA_SHARED_FILE(vocab, "tokenizers/llama-spm-vocab/ggml-vocab-llama-spm.gguf");
    const CliRun run = run_cli({"template", "-m", QString::fromStdString(vocab), "--messages", messages_file(Json::array())});
    QCOMPARE(run.code, 2);
    QVERIFY2(run.err.contains("no chat template"), run.err.constData());
  }

  void badInputFailsWithExitTwo() {
    const QString t = write("t.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}");
    QCOMPARE(run_cli({"template", "--template", t, "--messages", write("bad.json", "{not json")}).code, 2);
    QCOMPARE(run_cli({"template", "--template", t, "--messages", write("obj.json", R"({"role":"user"})")}).code, 2);
    QCOMPARE(run_cli({"template", "--template", t, "--messages", write("norole.json", R"([{"content":"x"}])")}).code, 2);
    QCOMPARE(run_cli({"template", "--messages", write("ok.json", "[]")}).code, 2);                  // no template
    QCOMPARE(run_cli({"template", "--template", write("syntax.jinja", "{% if %}"), "--messages", tmp_.filePath("ok.json")}).code, 2);
    const CliRun ok = run_cli({"template", "--template", t, "--messages", write("two.json", R"([{"role":"user","content":"a\tb"},{"role":"assistant","content":"{{c}}"}])")});
    QCOMPARE(ok.code, 0);
    QCOMPARE(ok.out, QByteArray("a\tb{{c}}"));
  }
};

QTEST_GUILESS_MAIN(TestCliTemplate)
#include "test_cli_template.moc"
