// POST /v1/chat/completions of `specula-cli serve` over real HTTP on loopback, with the real
// SmolLM2-135M-Instruct file and its chat template: n choices from one batched decode, indexed
// streams with a role, deltas and a finish_reason per choice, a stream equal to the answer
// with the same seed, usage counting the rendered template's tokens, stop strings, the end of
// turn, max_completion_tokens and logprobs; then hostile input (malformed messages, content
// parts, unknown roles, a 10 MB message, templates that loop, recurse or blow up their
// output), after which the server still answers and holds no KV block.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "model/model_chat.h"
#include "serve/sse.h"
#include "serve_process.h"
#include "shared_data.h"

using namespace specula;
using namespace specula::test;
using nlohmann::json;

namespace {

const char* kJson = "application/json";
const char* kChat = "/v1/chat/completions";

json post_chat(int port, const json& body, int* status = nullptr) {
  auto client = http_client(port);
  const auto res = client.Post(kChat, body.dump(), kJson);
  if (status) *status = res ? res->status : -1;
  return res ? json::parse(res->body, nullptr, false) : json();
}

json post_raw(int port, const std::string& body, int* status) {
  auto client = http_client(port);
  const auto res = client.Post(kChat, body, kJson);
  *status = res ? res->status : -1;
  return res ? json::parse(res->body, nullptr, false) : json();
}

// The events of a streamed chat, parsed; "[DONE]" kept as a string.
std::vector<json> stream_events(int port, const json& body) {
  std::vector<json> events;
  serve::SseParser parser([&](const std::string& data) {
    events.push_back(data == "[DONE]" ? json(data) : json::parse(data, nullptr, false));
  });
  auto client = http_client(port);
  httplib::Request req;
  req.method = "POST";
  req.path = kChat;
  req.body = body.dump();
  req.set_header("Content-Type", kJson);
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    parser.feed(std::string_view(data, n));
    return true;
  };
  client.send(req);
  parser.finish();
  return events;
}

bool is_error(const json& body, const std::string& param = {}) {
  if (!body.is_object() || !body.contains("error") || !body["error"]["message"].is_string()) return false;
  return param.empty() || body["error"]["param"] == param;
}

const json kConversation = json::array({{{"role", "system"}, {"content", "You are a helpful assistant."}},
                                        {{"role", "user"}, {"content", "Write a Python function that adds two numbers."}}});

}  // namespace

class TestServeChat : public QObject {
  Q_OBJECT

  std::string model_path;
  std::unique_ptr<ServeProcess> smol;     // SmolLM2 with a 16 MiB body limit
  std::unique_ptr<ServeProcess> hostile;  // SmolLM2 with a template that loops, recurses or blows up
  QTemporaryDir dir;

  int port() const { return smol->port(); }

  // The prompt tokens of `messages` as Hugging Face counts them: the rendered template,
  // encoded with special tokens parsed and no BOS added.
  int rendered_tokens(const json& messages) {
    const std::optional<ModelChatTemplate> chat = read_model_chat_template(model_path);
    LoadOptions metadata;
    metadata.metadata_only = true;
    const auto model = load_model(model_path, metadata);
    const std::string text = render_chat(*chat, nlohmann::ordered_json(messages), true);
    return static_cast<int>(encode_chat(*model->tokenizer, text).size());
  }

  void checkHealthy(int at) {
    const json h = health(at);
    QVERIFY2(h.is_object(), "the server stopped answering /health");
    QCOMPARE(h["kv_blocks_left"].get<int>(), 0);
    QCOMPARE(h["failed"].get<int>(), 0);
  }

 private slots:
  void initTestCase() {
    SPECULA_REAL_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    model_path = path;
    const QString m = QString::fromStdString(path);
    smol = std::make_unique<ServeProcess>(QStringList{"-m", m, "--device", "cpu", "--max-body", "16777216"});
    QVERIFY2(smol->started(), qPrintable(smol->errors()));
    // the first message's content picks the misbehaviour
    const QString file = dir.filePath("hostile.jinja");
    std::ofstream(file.toStdString())
        << "{% macro down(k) %}{{ down(k + 1) }}{% endmacro %}"
           "{% set c = messages[0]['content'] %}"
           "{% if c == 'loop' %}{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"
           "{% elif c == 'recurse' %}{{ down(0) }}"
           "{% elif c == 'double' %}{% set ns = namespace(s='abcdefgh') %}"
           "{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"
           "{% elif c == 'raise' %}{{ raise_exception('only the first message may say raise') }}"
           "{% else %}<|im_start|>user\n{{ c }}<|im_end|>\n<|im_start|>assistant\n{% endif %}";
    hostile = std::make_unique<ServeProcess>(QStringList{"-m", m, "--device", "cpu", "--chat-template", file});
    QVERIFY2(hostile->started(), qPrintable(hostile->errors()));
  }

  // n=4: four choices from one request, each an assistant message with content, and usage
  // counting the rendered template's tokens and every choice's tokens.
  void fourChoicesWithUsage() {
    int status = 0;
    const json body = post_chat(port(), {{"messages", kConversation}, {"n", 4}, {"max_tokens", 24},
                                         {"temperature", 0.8}, {"seed", 5}}, &status);
    QCOMPARE(status, 200);
    QCOMPARE(body["object"].get<std::string>(), std::string("chat.completion"));
    QVERIFY(body["id"].get<std::string>().rfind("chatcmpl-", 0) == 0);
    QCOMPARE(body["choices"].size(), size_t(4));
    int tokens = 0;
    std::set<std::string> texts;
    for (int i = 0; i < 4; ++i) {
      const json& c = body["choices"][i];
      QCOMPARE(c["index"].get<int>(), i);
      QCOMPARE(c["message"]["role"].get<std::string>(), std::string("assistant"));
      const std::string content = c["message"]["content"].get<std::string>();
      QVERIFY2(!content.empty(), qPrintable(QString("choice %1 is empty").arg(i)));
      QVERIFY(content.find("<|im_end|>") == std::string::npos);
      const std::string reason = c["finish_reason"].get<std::string>();
      QVERIFY(reason == "stop" || reason == "length");
      tokens += c["specula"]["tokens"].get<int>();
      texts.insert(content);
    }
    QVERIFY2(texts.size() > 1, "four sampled choices are all the same text");
    QCOMPARE(body["usage"]["prompt_tokens"].get<int>(), rendered_tokens(kConversation));
    QCOMPARE(body["usage"]["completion_tokens"].get<int>(), tokens);
    QCOMPARE(body["usage"]["total_tokens"].get<int>(), tokens + rendered_tokens(kConversation));
  }

  // A short answer ends at the template's end of turn (<|im_end|>), not at the length limit.
  void greedyAnswerEndsAtEndOfTurn() {
    int status = 0;
    const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
    const json body = post_chat(port(), {{"messages", messages}, {"max_tokens", 100}, {"temperature", 0}}, &status);
    QCOMPARE(status, 200);
    const json& c = body["choices"][0];
    qInfo("greedy answer: %s", c["message"]["content"].get<std::string>().c_str());
    QCOMPARE(c["finish_reason"].get<std::string>(), std::string("stop"));
    QCOMPARE(c["specula"]["finish"].get<std::string>(), std::string("eos"));
    QVERIFY(c["specula"]["tokens"].get<int>() < 100);
  }

  // n=2 streamed: each index gets its role first, content deltas, one finish_reason; the
  // stream ends with [DONE]; each index's text is the answer a plain request gives with the
  // same seed.
  void streamedTwoChoicesMatchTheAnswer() {
    const json request = {{"messages", kConversation}, {"n", 2}, {"max_tokens", 20}, {"temperature", 0.7},
                          {"seed", 3}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
    const std::vector<json> events = stream_events(port(), request);
    QVERIFY(events.size() > 4);
    QCOMPARE(events.back(), json("[DONE]"));
    std::map<int, std::string> text;
    std::map<int, int> roles, finishes, deltas;
    bool usage = false;
    for (size_t e = 0; e + 1 < events.size(); ++e) {
      const json& chunk = events[e];
      QCOMPARE(chunk["object"].get<std::string>(), std::string("chat.completion.chunk"));
      if (chunk.contains("usage")) {
        usage = true;
        QCOMPARE(chunk["usage"]["prompt_tokens"].get<int>(), rendered_tokens(kConversation));
        continue;
      }
      for (const json& c : chunk["choices"]) {
        const int i = c["index"].get<int>();
        QVERIFY(i == 0 || i == 1);
        if (c["delta"].contains("role")) {
          QCOMPARE(c["delta"]["role"].get<std::string>(), std::string("assistant"));
          QVERIFY2(deltas[i] == 0 && finishes[i] == 0, "the role comes first");
          ++roles[i];
        }
        if (c["delta"].contains("content") && !c["delta"]["content"].get<std::string>().empty()) {
          QVERIFY2(finishes[i] == 0, "content after the finish_reason");
          text[i] += c["delta"]["content"].get<std::string>();
          ++deltas[i];
        }
        if (!c["finish_reason"].is_null()) ++finishes[i];
      }
    }
    QVERIFY(usage);
    int status = 0;
    json plain = request;
    plain.erase("stream");
    plain.erase("stream_options");
    const json answer = post_chat(port(), plain, &status);
    QCOMPARE(status, 200);
    for (int i = 0; i < 2; ++i) {
      QCOMPARE(roles[i], 1);
      QVERIFY2(deltas[i] > 0, qPrintable(QString("no content delta for index %1").arg(i)));
      QCOMPARE(finishes[i], 1);
      QCOMPARE(text[i], answer["choices"][i]["message"]["content"].get<std::string>());
    }
  }

  void stopStringsAndMaxCompletionTokens() {
    int status = 0;
    json body = post_chat(port(), {{"messages", kConversation}, {"n", 2}, {"max_tokens", 64}, {"temperature", 0},
                                   {"stop", json::array({"e"})}}, &status);
    QCOMPARE(status, 200);
    for (const json& c : body["choices"]) {
      QVERIFY(c["message"]["content"].get<std::string>().find('e') == std::string::npos);
      QCOMPARE(c["specula"]["finish"].get<std::string>(), std::string("stop"));
    }
    body = post_chat(port(), {{"messages", kConversation}, {"n", 3}, {"max_completion_tokens", 3}}, &status);
    QCOMPARE(status, 200);
    for (const json& c : body["choices"]) QVERIFY(c["specula"]["tokens"].get<int>() <= 3);
    QVERIFY(body["usage"]["completion_tokens"].get<int>() <= 9);
  }

  void logprobsOfTheSampledTokens() {
    int status = 0;
    const json body = post_chat(port(), {{"messages", kConversation}, {"max_tokens", 8}, {"logprobs", true},
                                         {"top_logprobs", 0}}, &status);
    QCOMPARE(status, 200);
    const json& c = body["choices"][0];
    const json& content = c["logprobs"]["content"];
    QCOMPARE(static_cast<int>(content.size()), c["specula"]["tokens"].get<int>());
    std::string joined;
    for (const json& t : content) {
      QVERIFY(t["logprob"].get<double>() <= 0.0);
      joined += t["token"].get<std::string>();
    }
    QCOMPARE(joined, c["message"]["content"].get<std::string>());
    // top_logprobs: greedy, the most likely token at each position is the one chosen
    const json top = post_chat(port(), {{"messages", kConversation}, {"max_tokens", 8}, {"temperature", 0},
                                        {"logprobs", true}, {"top_logprobs", 3}}, &status);
    QCOMPARE(status, 200);
    const json& with_top = top["choices"][0]["logprobs"]["content"];
    QCOMPARE(static_cast<int>(with_top.size()), top["choices"][0]["specula"]["tokens"].get<int>());
    for (const json& t : with_top) {
      QCOMPARE(t["top_logprobs"].size(), size_t(3));
      QCOMPARE(t["top_logprobs"][0]["token"].get<std::string>(), t["token"].get<std::string>());
      QVERIFY(std::abs(t["top_logprobs"][0]["logprob"].get<double>() - t["logprob"].get<double>()) < 1e-3);
      QVERIFY(t["top_logprobs"][1]["logprob"].get<double>() <= t["top_logprobs"][0]["logprob"].get<double>());
    }
    post_chat(port(), {{"messages", kConversation}, {"logprobs", true}, {"top_logprobs", 3}, {"stream", true}}, &status);
    QCOMPARE(status, 400);  // the alternatives come after the whole sequence: not streamed
  }

  // A final assistant message is continued (a prefill): greedy, the answer is what a chat
  // without it answers, less the prefill's text.
  void finalAssistantMessageIsContinued() {
    int status = 0;
    json request = {{"messages", kConversation}, {"max_tokens", 16}, {"temperature", 0}};
    const json whole = post_chat(port(), request, &status);
    QCOMPARE(status, 200);
    const std::string answer = whole["choices"][0]["message"]["content"].get<std::string>();
    QVERIFY(answer.size() > 8);
    const size_t cut = answer.find(' ', 3) == std::string::npos ? 4 : answer.find(' ', 3);
    json messages = kConversation;
    messages.push_back({{"role", "assistant"}, {"content", answer.substr(0, cut)}});
    request["messages"] = messages;
    request["max_tokens"] = 8;
    const json continued = post_chat(port(), request, &status);
    QCOMPARE(status, 200);
    const std::string rest = continued["choices"][0]["message"]["content"].get<std::string>();
    QVERIFY(!rest.empty());
    QVERIFY2(answer.substr(cut).rfind(rest.substr(0, 4), 0) == 0, qPrintable(QString::fromStdString(answer + " | " + rest)));
    // asked for a new turn after it instead: not a continuation of the same text
    request["add_generation_prompt"] = true;
    post_chat(port(), request, &status);
    QCOMPARE(status, 200);
  }

  void malformedMessagesAreClearErrors() {
    int status = 0;
    const std::vector<std::pair<json, std::string>> cases = {
        {{{"messages", "hello"}}, "array"},
        {json::object(), "messages is required"},
        {{{"messages", json::array()}}, "empty"},
        {{{"messages", json::array({42})}}, "messages[0] must be an object"},
        {{{"messages", json::array({{{"content", "hi"}}})}}, "messages[0].role"},
        {{{"messages", json::array({{{"role", 7}, {"content", "hi"}}})}}, "messages[0].role"},
        {{{"messages", json::array({{{"role", "user"}}})}}, "messages[0].content is required"},
        {{{"messages", json::array({{{"role", "user"}, {"content", 3.5}}})}}, "messages[0].content"},
        {{{"messages", json::array({{{"role", "user"}, {"content", {{"text", "hi"}}}}})}}, "messages[0].content"},
        {{{"messages", json::array({{{"role", "user"}, {"content", json::array({{{"type", "image_url"}}})}}})}},
         "content[0]"},
        {{{"messages", kConversation}, {"model", "gpt-4o"}}, "does not exist"},
    };
    for (const auto& [request, says] : cases) {
      const json body = post_chat(port(), request, &status);
      QVERIFY2(status == 400 || status == 404, qPrintable(QString::fromStdString(request.dump())));
      QVERIFY2(is_error(body), qPrintable(QString::fromStdString(body.dump())));
      QVERIFY2(body["error"]["message"].get<std::string>().find(says) != std::string::npos,
               qPrintable(QString::fromStdString(body["error"]["message"].get<std::string>() + " / " + says)));
    }
    const json body = post_raw(port(), R"({"messages": [{"role": "user", "content": "hi"})", &status);
    QCOMPARE(status, 400);
    QVERIFY(is_error(body));
    checkHealthy(port());
  }

  // Content parts join as text; a role the template does not know is the template's to
  // render (SmolLM2's writes any role), counted like any other.
  void contentPartsAndUnknownRoles() {
    int status = 0;
    const json parts = json::array({{{"type", "text"}, {"text", "Say"}}, {{"type", "text"}, {"text", "hello."}}});
    json body = post_chat(port(), {{"messages", json::array({{{"role", "user"}, {"content", parts}}})}, {"max_tokens", 4}},
                          &status);
    QCOMPARE(status, 200);
    const json joined = json::array({{{"role", "user"}, {"content", "Say\nhello."}}});
    QCOMPARE(body["usage"]["prompt_tokens"].get<int>(), rendered_tokens(joined));
    const json odd = json::array({{{"role", "narrator"}, {"content", "Once."}}, {{"role", "user"}, {"content", "Hi"}}});
    body = post_chat(port(), {{"messages", odd}, {"max_tokens", 4}}, &status);
    QCOMPARE(status, 200);
    QCOMPARE(body["usage"]["prompt_tokens"].get<int>(), rendered_tokens(odd));
  }

  // 10 MB in one message: refused from its size before any rendering; the server stays up.
  void tenMegabyteMessage() {
    int status = 0;
    const json huge = json::array({{{"role", "user"}, {"content", std::string(10 << 20, 'a')}}});
    const json body = post_chat(port(), {{"messages", huge}}, &status);
    QCOMPARE(status, 400);
    QVERIFY(is_error(body, "messages"));
    QVERIFY(body["error"]["message"].get<std::string>().find("bytes") != std::string::npos);
    post_chat(hostile->port(), {{"messages", huge}}, &status);  // the default 1 MiB body limit
    QCOMPARE(status, 413);
    checkHealthy(port());
  }

  // A template that loops, recurses or doubles a string past the output limit is stopped by
  // the renderer's limits: a 400 naming the limit, and the server goes on answering.
  void hostileTemplatesAreStopped() {
    int status = 0;
    for (const std::string what : {"loop", "recurse", "double", "raise"}) {
      const json body = post_chat(hostile->port(), {{"messages", json::array({{{"role", "user"}, {"content", what}}})}},
                                  &status);
      QCOMPARE(status, 400);
      QVERIFY2(is_error(body, "messages"), qPrintable(QString::fromStdString(body.dump())));
      const std::string message = body["error"]["message"].get<std::string>();
      qInfo("%s: %s", what.c_str(), message.c_str());
      QVERIFY(message.find(what == "raise" ? "TemplateError" : "TemplateLimitError") != std::string::npos);
    }
    const json fine = post_chat(hostile->port(),
                                {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"max_tokens", 4}},
                                &status);
    QCOMPARE(status, 200);
    QCOMPARE(fine["choices"].size(), size_t(1));
    checkHealthy(hostile->port());
  }

  void cleanupTestCase() {
    if (smol) {
      checkHealthy(port());
      QVERIFY(smol->stopsCleanly());
    }
    if (hostile) QVERIFY(hostile->stopsCleanly());
  }
};

QTEST_GUILESS_MAIN(TestServeChat)
#include "test_serve_chat.moc"
