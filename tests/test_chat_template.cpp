// The chat-template renderer against Python's jinja2 as Hugging Face configures it: the real
// templates of the shared data (cases.json), our own conversations and single constructs
// (tests/data, made by tools/oracles/chat_template_oracle.py), the template inside the real
// SmolLM2 GGUF; and the limits that stop hostile templates.
#include <QtTest>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/chat_template.h"
#include "model/gguf.h"
#include "shared_data.h"

using namespace specula;
using Json = nlohmann::ordered_json;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

Json read_json(const std::string& path) { return Json::parse(read_file(path)); }

// What rendering gives, in the oracle's terms: the text, or "Kind: message".
struct Outcome {
  std::string text;
  std::string error;
};

Outcome render_outcome(const std::string& source, const Json& variables) {
  try {
    return {ChatTemplate(source).render(variables), ""};
  } catch (const ChatTemplateError& e) {
    return {"", e.kind() + ": " + e.what()};
  }
}

// Compares one oracle case; returns a description of the mismatch, empty when it matches.
std::string mismatch(const Outcome& got, const Json& oracle) {
  const bool expects_error = !oracle["error"].is_null();
  if (expects_error) {
    const std::string want = oracle["error"].get<std::string>();
    if (got.error == want) return "";
    return "expected error [" + want + "], got " + (got.error.empty() ? "text [" + got.text + "]" : "[" + got.error + "]");
  }
  const std::string want = oracle["expected"].get<std::string>();
  if (got.error.empty() && got.text == want) return "";
  if (!got.error.empty()) return "expected text, got error [" + got.error + "]";
  size_t at = 0;
  while (at < want.size() && at < got.text.size() && want[at] == got.text[at]) ++at;
  return "texts differ at byte " + std::to_string(at) + ": expected [" + want.substr(at, 80) + "] got [" +
         got.text.substr(at, 80) + "]";
}

// Runs the conversation cases of a cases.json-format file; the templates come from `templates`
// (name -> source). Fails listing every mismatch.
void check_conversation_cases(const Json& data, const std::function<std::string(const std::string&)>& template_source) {
  QStringList failures;
  int checked = 0;
  for (const Json& c : data["cases"]) {
    const Json variables = {{"messages", data["conversations"][c["conversation"].get<std::string>()]},
                            {"add_generation_prompt", c["add_generation_prompt"]},
                            {"bos_token", c["bos_token"]},
                            {"eos_token", c["eos_token"]}};
    const std::string why = mismatch(render_outcome(template_source(c["template"].get<std::string>()), variables), c);
    ++checked;
    if (!why.empty()) {
      failures << QString::fromStdString(c["template"].get<std::string>() + " / " + c["conversation"].get<std::string>() +
                                         (c["add_generation_prompt"].get<bool>() ? " +gen: " : ": ") + why);
    }
  }
  QVERIFY(checked > 0);
  if (!failures.isEmpty()) QFAIL(qPrintable(QString("%1 of %2 cases differ:\n").arg(failures.size()).arg(checked) + failures.join('\n')));
}

}  // namespace

class TestChatTemplate : public QObject {
  Q_OBJECT

 private slots:
  // Every case of the shared cases.json: 17 real templates x 3 conversations x with and
  // without the generation prompt, byte for byte, errors with jinja2's message.
  void sharedCasesMatchJinja() {
    SPECULA_SHARED_FILE(cases, "chat-templates/cases.json");
    const std::string folder = cases.substr(0, cases.rfind('/') + 1);
    const Json data = read_json(cases);
    QCOMPARE(data["cases"].size(), size_t{102});
    check_conversation_cases(data, [&](const std::string& name) { return read_file(folder + name + ".jinja"); });
  }

  // Our own conversations over the same templates (braces, quotes, tabs, empty contents,
  // long histories, unicode), rendered by the shared render.py.
  void extraConversationsMatchJinja() {
    SPECULA_SHARED_FILE(cases, "chat-templates/cases.json");
    const std::string folder = cases.substr(0, cases.rfind('/') + 1);
    const Json data = read_json(specula::test::testDataDir().toStdString() + "/chat_template_extra.json");
    check_conversation_cases(data, [&](const std::string& name) { return read_file(folder + name + ".jinja"); });
  }

  // One small template per construct, with jinja2's output or error.
  void constructsMatchJinja() {
    const Json data = read_json(specula::test::testDataDir().toStdString() + "/chat_template_constructs.json");
    QStringList failures;
    for (const Json& c : data["cases"]) {
      const std::string why = mismatch(render_outcome(c["template"].get<std::string>(), c["variables"]), c);
      if (!why.empty()) failures << QString::fromStdString(c["template"].get<std::string>() + "\n    " + why);
    }
    QVERIFY(data["cases"].size() > 100);
    if (!failures.isEmpty()) QFAIL(qPrintable(QString("%1 constructs differ:\n").arg(failures.size()) + failures.join('\n')));
  }

  // The template inside the real SmolLM2-135M-Instruct GGUF, read by our GGUF reader,
  // renders as jinja2 renders the one the `gguf` package reads.
  void smolLm2TemplateMatchesJinja() {
    SPECULA_REAL_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const GgufFile gguf = GgufFile::read_header(path, GgufPart::Metadata);
    const std::string source = gguf.get_string("tokenizer.chat_template", "");
    const Json data = read_json(specula::test::testDataDir().toStdString() + "/chat_template_smollm2.json");
    QCOMPARE(source, data["chat_template"].get<std::string>());
    check_conversation_cases(data, [&](const std::string&) { return source; });
  }

  // apply() passes the conversation's variables and `extra` ones.
  void applyPassesConversationVariables() {
    const ChatTemplate t("{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
                         "{% if add_generation_prompt %}<gen>{% endif %}{{ eos_token }}{{ tools | length }}");
    ChatTemplateInput input{.messages = Json::parse(R"([{"role":"user","content":"hi"}])"),
                            .add_generation_prompt = true, .bos_token = "<s>", .eos_token = "</s>",
                            .extra = Json{{"tools", Json::array({1, 2})}}};
    QCOMPARE(t.apply(input), std::string("<s><user>hi<gen></s>2"));
    input.add_generation_prompt = false;
    input.extra = Json::object();
    QCOMPARE(t.apply(input), std::string("<s><user>hi</s>0"));
  }

  void syntaxErrorsNameTheLine() {
    for (const char* source : {"{% if x %}unclosed", "{{ 1 + }}", "{% endfor %}", "{% frobnicate %}", "{{ 'open", "{# open"}) {
      try {
        ChatTemplate t(source);
        QFAIL(qPrintable(QString("parsed: %1").arg(source)));
      } catch (const ChatTemplateError& e) {
        QCOMPARE(e.kind(), std::string("TemplateSyntaxError"));
        QVERIFY2(std::string(e.what()).find("line 1") != std::string::npos, e.what());
      }
    }
  }

  // ---- hostile templates: each stops with a clear error, none crashes or hangs ----

  void selfRecursiveMacroStopsAtTheDepthLimit() {
    const ChatTemplate t("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", ChatTemplateLimits{.max_call_depth = 50});
    expect_limit(t, "macro calls nest deeper than 50");
  }

  // Deep nesting within the parser's limit, recursed through a macro: the evaluation depth
  // stops it before the stack does.
  void nestedRecursionStopsAtTheRenderDepth() {
    const std::string nested = "{{ f(n + 1) if n < 1000 else '' }}";
    std::string body = nested;
    for (int i = 0; i < 60; ++i) body = "{% if true %}" + body + "{% endif %}";
    const ChatTemplate t("{% macro f(n) %}" + body + "{% endmacro %}{{ f(0) }}",
                         ChatTemplateLimits{.max_call_depth = 1000, .max_render_depth = 500});
    expect_limit(t, "evaluates deeper than 500");
  }

  void deeplyNestedSourceStopsAtTheNestingLimit() {
    const std::string deep = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
    try {
      ChatTemplate t(deep);
      QFAIL("a 100000-deep expression parsed");
    } catch (const ChatTemplateError& e) {
      QCOMPARE(e.kind(), std::string("TemplateLimitError"));
    }
    std::string blocks;
    for (int i = 0; i < 5000; ++i) blocks += "{% if true %}";
    QVERIFY_THROWS_EXCEPTION(ChatTemplateError, ChatTemplate{blocks});
    // within the limit, nesting works
    QCOMPARE(ChatTemplate("{{ " + std::string(50, '(') + "1" + std::string(50, ')') + " }}").render(Json::object()),
             std::string("1"));
  }

  void nestedHugeLoopsStopAtTheIterationLimit() {
    const ChatTemplate t("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                         ChatTemplateLimits{.max_loop_iterations = 200000});
    expect_limit(t, "loops more than 200000 times");
  }

  void hugeOutputStopsAtTheOutputLimit() {
    const ChatTemplateLimits small{.max_output_bytes = 1 << 20};
    expect_limit(ChatTemplate("{% for i in range(100000) %}{{ 'xxxxxxxxxxxxxxxxxxxxxx' }}{% endfor %}", small), "beyond");
    expect_limit(ChatTemplate("{{ 'x' * 1000000000 }}", small), "beyond");
    expect_limit(ChatTemplate("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", small), "beyond");
    expect_limit(ChatTemplate("{{ ([1] * 100000000) | length }}", small), "beyond");
  }

  void hugeRangeIsRefusedAsTheSandboxDoes() {
    try {
      ChatTemplate("{% for i in range(10 ** 9) %}{% endfor %}").render(Json::object());
      QFAIL("a range of 10^9 ran");
    } catch (const ChatTemplateError& e) {
      QCOMPARE(e.kind(), std::string("OverflowError"));
    }
  }

  void renderingIsRepeatable() {
    const ChatTemplate t("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}");
    const Json vars = {{"messages", Json::array({1, 2, 3})}};
    QCOMPARE(t.render(vars), std::string("3"));
    QCOMPARE(t.render(vars), std::string("3"));  // namespaces are per render
  }

 private:
  static void expect_limit(const ChatTemplate& t, const std::string& fragment) {
    try {
      t.render(Json::object());
      QFAIL("the template rendered");
    } catch (const ChatTemplateError& e) {
      QCOMPARE(e.kind(), std::string("TemplateLimitError"));
      QVERIFY2(std::string(e.what()).find(fragment) != std::string::npos, e.what());
    }
  }
};

QTEST_GUILESS_MAIN(TestChatTemplate)
#include "test_chat_template.moc"
