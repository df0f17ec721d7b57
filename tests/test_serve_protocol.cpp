// OpenAI's wire format and server-sent events without a network: the SSE parser gives the
// same events however the bytes are split (comments, keep-alive lines, CRLF, CR, multi-line
// data), requests are checked field by field with OpenAI's 400 error object, a request
// survives its own serialization, and the responses of Specula, vLLM and llama.cpp read
// into the same updates.
#include <QtTest>

#include <string>
#include <vector>

#include "serve/openai_api.h"
#include "serve/sse.h"

using namespace specula;
using namespace specula::serve;
using nlohmann::json;

namespace {

std::vector<std::string> events_of(const std::vector<std::string_view>& pieces) {
  std::vector<std::string> events;
  SseParser parser([&](const std::string& data) { events.push_back(data); });
  for (std::string_view p : pieces) parser.feed(p);
  parser.finish();
  return events;
}

// What a real stream mixes: comments, keep-alive, CRLF and bare CR line ends, an event:
// field, data with and without the space after the colon, and a two-line data field.
const std::string kStream =
    ": ping\n\n"
    "data: {\"a\":1}\r\n\r\n"
    "event: completion\n"
    "id: 7\n"
    "data:{\"b\":2}\n\n"
    ":\n\n"
    "data: first line\r"
    "data: second line\r\r"
    "retry: 100\n\n"
    "data: [DONE]\n\n";
const std::vector<std::string> kEvents = {"{\"a\":1}", "{\"b\":2}", "first line\nsecond line", "[DONE]"};

int status_of(const std::string& body, std::string* param = nullptr) {
  try {
    parse_completion_request(body, RequestLimits{});
  } catch (const ApiError& e) {
    if (param) *param = e.param;
    return e.status;
  }
  return 200;
}

}  // namespace

class TestServeProtocol : public QObject {
  Q_OBJECT

 private slots:
  void sseEventsWhateverTheSplit() {
    QCOMPARE(events_of({kStream}), kEvents);
    for (size_t cut = 0; cut <= kStream.size(); ++cut) {  // every split into two pieces
      const std::string_view s(kStream);
      QCOMPARE(events_of({s.substr(0, cut), s.substr(cut)}), kEvents);
    }
    std::vector<std::string_view> bytes;  // one byte at a time
    for (size_t i = 0; i < kStream.size(); ++i) bytes.push_back(std::string_view(kStream).substr(i, 1));
    QCOMPARE(events_of(bytes), kEvents);
  }

  void sseUnterminatedLastEventStillArrives() {
    QCOMPARE(events_of({"data: a\n\ndata: b"}), (std::vector<std::string>{"a", "b"}));
    QCOMPARE(events_of({": only a comment\n"}), std::vector<std::string>{});
    QCOMPARE(sse_event("{\"x\":1}"), std::string("data: {\"x\":1}\n\n"));
  }

  void requestFieldsAreRead() {
    const CompletionRequest r = parse_completion_request(
        R"({"model":"m","prompt":["def f():"],"n":3,"max_tokens":40,"temperature":0.5,"top_p":0.9,"top_k":-1,
            "min_p":0.05,"seed":12,"stop":"\n\n","stream":true,"stream_options":{"include_usage":true},
            "logprobs":1,"user":"ignored","best_of":3,"presence_penalty":0})",
        RequestLimits{});
    QCOMPARE(r.model, std::string("m"));
    QCOMPARE(r.prompt, std::string("def f():"));
    QCOMPARE(r.n, 3);
    QCOMPARE(r.max_tokens, 40);
    QCOMPARE(r.temperature, 0.5f);
    QCOMPARE(r.top_p, 0.9f);
    QCOMPARE(r.top_k, 0);  // vLLM's -1: off
    QCOMPARE(r.min_p, 0.05f);
    QCOMPARE(*r.seed, uint64_t(12));
    QCOMPARE(r.stop, std::vector<std::string>{"\n\n"});
    QVERIFY(r.stream && r.include_usage);
    QCOMPARE(*r.logprobs, 1);
    const CompletionRequest defaults = parse_completion_request(R"({"prompt":"x"})", RequestLimits{});
    QCOMPARE(defaults.n, 1);
    QCOMPARE(defaults.max_tokens, 16);
    QCOMPARE(defaults.temperature, 1.0f);
    QVERIFY(!defaults.seed && !defaults.logprobs && !defaults.stream);
  }

  // A prompt of token ids (a list, or a list holding one list), and echo, which lets
  // max_tokens be 0 (scoring a prompt) where a completion needs at least 1.
  void tokenPromptsAndEchoAreRead() {
    CompletionRequest r = parse_completion_request(R"({"prompt": [1, 2, 3], "echo": true, "max_tokens": 0, "logprobs": 1})",
                                                   RequestLimits{});
    QCOMPARE(r.prompt_ids, (std::vector<int>{1, 2, 3}));
    QVERIFY(r.prompt.empty());
    QVERIFY(r.echo);
    QCOMPARE(r.max_tokens, 0);
    QCOMPARE(*r.logprobs, 1);
    r = parse_completion_request(R"({"prompt": [[7, 8]]})", RequestLimits{});
    QCOMPARE(r.prompt_ids, (std::vector<int>{7, 8}));
    QVERIFY(!r.echo);
    QCOMPARE(r.max_tokens, 16);
  }

  void badRequestsAre400NamingTheField_data() {
    QTest::addColumn<QString>("body");
    QTest::addColumn<QString>("param");
    QTest::newRow("malformed JSON") << R"({"prompt": "x",)" << "";
    QTest::newRow("not an object") << R"(["prompt"])" << "";
    QTest::newRow("no prompt") << R"({"n": 2})" << "prompt";
    QTest::newRow("two prompts") << R"({"prompt": ["a", "b"]})" << "prompt";
    QTest::newRow("two token prompts") << R"({"prompt": [[1, 2], [3]]})" << "prompt";
    QTest::newRow("negative token id") << R"({"prompt": [1, -2]})" << "prompt";
    QTest::newRow("token ids and text") << R"({"prompt": [1, "a"]})" << "prompt";
    QTest::newRow("token ids and a suffix") << R"({"prompt": [1, 2], "suffix": "x"})" << "suffix";
    QTest::newRow("n zero") << R"({"prompt": "x", "n": 0})" << "n";
    QTest::newRow("huge n") << R"({"prompt": "x", "n": 1000000000})" << "n";
    QTest::newRow("n past 2^64") << R"({"prompt": "x", "n": 99999999999999999999})" << "n";
    QTest::newRow("n a string") << R"({"prompt": "x", "n": "8"})" << "n";
    QTest::newRow("n fractional") << R"({"prompt": "x", "n": 1.5})" << "n";
    QTest::newRow("max_tokens zero") << R"({"prompt": "x", "max_tokens": 0})" << "max_tokens";
    QTest::newRow("huge max_tokens") << R"({"prompt": "x", "max_tokens": 4000000000})" << "max_tokens";
    QTest::newRow("negative temperature") << R"({"prompt": "x", "temperature": -0.5})" << "temperature";
    QTest::newRow("temperature 3") << R"({"prompt": "x", "temperature": 3})" << "temperature";
    QTest::newRow("top_p zero") << R"({"prompt": "x", "top_p": 0})" << "top_p";
    QTest::newRow("empty stop") << R"({"prompt": "x", "stop": ["a", ""]})" << "stop";
    QTest::newRow("stop a number") << R"({"prompt": "x", "stop": 5})" << "stop";
    QTest::newRow("too many stops")
        << R"({"prompt": "x", "stop": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]})"
        << "stop";
    QTest::newRow("stream a string") << R"({"prompt": "x", "stream": "yes"})" << "stream";
    QTest::newRow("logprobs 6") << R"({"prompt": "x", "logprobs": 6})" << "logprobs";
    QTest::newRow("echo streamed") << R"({"prompt": "x", "echo": true, "stream": true})" << "echo";
    QTest::newRow("echo a string") << R"({"prompt": "x", "echo": "yes"})" << "echo";
    QTest::newRow("echo, max_tokens -1") << R"({"prompt": "x", "echo": true, "max_tokens": -1})" << "max_tokens";
    QTest::newRow("best_of > n") << R"({"prompt": "x", "best_of": 4})" << "best_of";
    QTest::newRow("penalty") << R"({"prompt": "x", "frequency_penalty": 0.5})" << "frequency_penalty";
    QTest::newRow("logit_bias") << R"({"prompt": "x", "logit_bias": {"50256": -100}})" << "logit_bias";
  }
  void badRequestsAre400NamingTheField() {
    QFETCH(QString, body);
    QFETCH(QString, param);
    std::string got;
    QCOMPARE(status_of(body.toStdString(), &got), 400);
    QCOMPARE(QString::fromStdString(got), param);
  }

  // Chat requests: messages kept in order with their other keys, content parts joined, the
  // shared fields read as for completions, max_completion_tokens, logprobs as a boolean.
  void chatRequestFieldsAreRead() {
    const ChatRequest c = parse_chat_request(
        R"({"model":"m","messages":[{"role":"system","content":"Be brief."},
            {"role":"user","name":"ann","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
            "n":2,"max_completion_tokens":30,"temperature":0,"seed":4,"stop":["```"],"stream":true,
            "logprobs":true,"top_logprobs":0})",
        RequestLimits{});
    QCOMPARE(c.messages.size(), size_t(2));
    QCOMPARE(c.messages[0]["role"].get<std::string>(), std::string("system"));
    QCOMPARE(c.messages[1]["content"].get<std::string>(), std::string("a\nb"));
    QCOMPARE(c.messages[1]["name"].get<std::string>(), std::string("ann"));
    QCOMPARE(c.messages[1].begin().key(), std::string("role"));
    QCOMPARE(c.completion.model, std::string("m"));
    QCOMPARE(c.completion.n, 2);
    QCOMPARE(c.completion.max_tokens, 30);
    QCOMPARE(c.completion.temperature, 0.0f);
    QCOMPARE(*c.completion.seed, uint64_t(4));
    QCOMPARE(c.completion.stop, std::vector<std::string>{"```"});
    QVERIFY(c.completion.stream);
    QCOMPARE(*c.completion.logprobs, 0);
    const ChatRequest defaults = parse_chat_request(R"({"messages":[{"role":"x","content":""}]})", RequestLimits{});
    QCOMPARE(defaults.completion.max_tokens, 0);  // the server gives what the context leaves
    QVERIFY(!defaults.completion.logprobs);
    QCOMPARE(parse_chat_request(R"({"messages":[{"role":"u","content":"x"}],"max_tokens":7})", RequestLimits{})
                 .completion.max_tokens,
             7);
  }

  void badChatRequestsAre400NamingTheField_data() {
    QTest::addColumn<QString>("body");
    QTest::addColumn<QString>("param");
    QTest::newRow("malformed JSON") << R"({"messages": [)" << "";
    QTest::newRow("no messages") << R"({"prompt": "x"})" << "messages";
    QTest::newRow("messages an object") << R"({"messages": {"role": "user", "content": "x"}})" << "messages";
    QTest::newRow("no message") << R"({"messages": []})" << "messages";
    QTest::newRow("message a string") << R"({"messages": ["hi"]})" << "messages";
    QTest::newRow("no role") << R"({"messages": [{"content": "hi"}]})" << "messages";
    QTest::newRow("role null") << R"({"messages": [{"role": null, "content": "hi"}]})" << "messages";
    QTest::newRow("no content") << R"({"messages": [{"role": "user"}]})" << "messages";
    QTest::newRow("content a number") << R"({"messages": [{"role": "user", "content": 1}]})" << "messages";
    QTest::newRow("image part") << R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})" << "messages";
    QTest::newRow("text part without text") << R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})"
                                            << "messages";
    QTest::newRow("n zero") << R"({"messages": [{"role": "user", "content": "x"}], "n": 0})" << "n";
    QTest::newRow("max_completion_tokens zero") << R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0})"
                                                << "max_completion_tokens";
    QTest::newRow("logprobs a number") << R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 2})" << "logprobs";
    QTest::newRow("top_logprobs streamed")
        << R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 2, "stream": true})"
        << "top_logprobs";
    QTest::newRow("top_logprobs over 20")
        << R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21})" << "top_logprobs";
    QTest::newRow("top_logprobs without logprobs") << R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})"
                                                   << "top_logprobs";
    QTest::newRow("continue_final_message after a user message")
        << R"({"messages": [{"role": "user", "content": "x"}], "continue_final_message": true})" << "continue_final_message";
    QTest::newRow("continue_final_message with add_generation_prompt")
        << R"({"messages": [{"role": "assistant", "content": "x"}], "continue_final_message": true,
              "add_generation_prompt": true})" << "continue_final_message";
    QTest::newRow("tools") << R"({"messages": [{"role": "user", "content": "x"}], "tools": []})" << "tools";
  }
  void badChatRequestsAre400NamingTheField() {
    QFETCH(QString, body);
    QFETCH(QString, param);
    try {
      parse_chat_request(body.toStdString(), RequestLimits{});
      QFAIL("accepted");
    } catch (const ApiError& e) {
      QCOMPARE(e.status, 400);
      QCOMPARE(QString::fromStdString(e.param), param);
      QVERIFY(std::string(e.what()).size() > 10);
    }
  }

  void errorObjectIsOpenAIs() {
    const json e = error_json(ApiError(401, "the API key is not valid", {}, "invalid_api_key"))["error"];
    QCOMPARE(e["message"].get<std::string>(), std::string("the API key is not valid"));
    QCOMPARE(e["type"].get<std::string>(), std::string("authentication_error"));
    QVERIFY(e["param"].is_null());
    QCOMPARE(e["code"].get<std::string>(), std::string("invalid_api_key"));
    QCOMPARE(error_json(ApiError(400, "n must be...", "n"))["error"]["param"].get<std::string>(), std::string("n"));
  }

  void requestSurvivesItsSerialization() {
    CompletionRequest r;
    r.model = "demo";
    r.prompt = "def add(a, b):\n";
    r.n = 8;
    r.max_tokens = 100;
    r.temperature = 0.8f;
    r.top_p = 0.95f;
    r.top_k = 40;
    r.min_p = 0.1f;
    r.seed = 0xfedcba9876543210ull;  // above 2^63: stays unsigned
    r.stop = {"\ndef ", "\nclass "};
    r.stream = true;
    r.include_usage = true;
    r.logprobs = 1;
    const CompletionRequest back = parse_completion_request(dump(completion_request_json(r)), RequestLimits{});
    QCOMPARE(back.model, r.model);
    QCOMPARE(back.prompt, r.prompt);
    QCOMPARE(back.n, r.n);
    QCOMPARE(back.max_tokens, r.max_tokens);
    QCOMPARE(back.temperature, r.temperature);
    QCOMPARE(back.top_p, r.top_p);
    QCOMPARE(back.top_k, r.top_k);
    QCOMPARE(back.min_p, r.min_p);
    QCOMPARE(*back.seed, *r.seed);
    QCOMPARE(back.stop, r.stop);
    QVERIFY(back.stream && back.include_usage);
    QCOMPARE(*back.logprobs, 1);
    QVERIFY(!completion_request_json(r, false).contains("n"));  // for servers that refuse n
  }

  void updatesOfEveryDialect() {
    // Specula: exact finish, ids and counts in the extension; totals in the last chunk
    const CompletionUpdate specula = parse_completion_update(json::parse(R"({"choices":[
        {"index":1,"text":"","finish_reason":"stop","logprobs":{"tokens":["a","b"],"token_logprobs":[-0.5,-1.5]},
         "specula":{"finish":"eos","tokens":2,"token_ids":[7,9],"accepted":1,"proposed":3}}],
        "usage":{"prompt_tokens":5},"specula":{"totals":{"wall_s":0.5,"steps":4,"accepted":1,"proposed":3}}})"));
    QCOMPARE(int(specula.choices.size()), 1);
    const ChoiceUpdate& c = specula.choices[0];
    QCOMPARE(c.index, 1);
    QVERIFY(c.finish == FinishReason::Eos);
    QCOMPARE(c.token_ids, (std::vector<int>{7, 9}));
    QCOMPARE(c.logprobs, (std::vector<float>{-0.5f, -1.5f}));
    QCOMPARE(c.tokens, 2);
    QCOMPARE(c.accepted, 1);
    QCOMPARE(specula.prompt_tokens, 5);
    QVERIFY(specula.totals);
    QCOMPARE(specula.totals->steps, 4);
    QCOMPARE(specula.totals->acceptance_rate(), 1.0 / 3.0);

    // vLLM: stop_reason null is the end-of-sequence token, a string is a stop string
    const auto vllm = [](const char* reason) {
      return parse_completion_update(json::parse(std::string(R"({"choices":[{"index":0,"text":"x","finish_reason":"stop","stop_reason":)") +
                                                 reason + "}]}"))
          .choices[0]
          .finish;
    };
    QVERIFY(vllm("null") == FinishReason::Eos);
    QVERIFY(vllm("2") == FinishReason::Eos);  // a stop token's id
    QVERIFY(vllm("\"\\n\"") == FinishReason::Stop);
    const ChoiceUpdate sglang = parse_completion_update(json::parse(
        R"({"choices":[{"index":0,"text":"x","finish_reason":"stop","matched_stop":"\n"}]})")).choices[0];
    QVERIFY(sglang.finish == FinishReason::Stop);
    // llama.cpp: no extension, chat-style logprobs; "length"
    const ChoiceUpdate l = parse_completion_update(json::parse(R"({"choices":[{"index":0,"text":"hi",
        "finish_reason":"length","logprobs":{"content":[{"token":"hi","logprob":-0.25}]}}]})"))
                               .choices[0];
    QVERIFY(l.finish == FinishReason::Length);
    QCOMPARE(l.logprobs, std::vector<float>{-0.25f});
    QCOMPARE(l.tokens, -1);
    QVERIFY(!parse_completion_update(json::parse(R"({"choices":[{"index":0,"text":"a","finish_reason":null}]})"))
                 .choices[0]
                 .finish);

    QVERIFY_THROWS_EXCEPTION(std::runtime_error, parse_completion_update(json::parse(R"({"object":"list"})")));
    QVERIFY_THROWS_EXCEPTION(std::runtime_error,
                             parse_completion_update(json::parse(R"({"error":{"message":"model is loading"}})")));
  }

  void errorMessagesOfEveryDialect() {
    QCOMPARE(error_message(R"({"error":{"message":"bad key","type":"x"}})", "?"), std::string("bad key"));
    QCOMPARE(error_message(R"({"error":"Only one completion choice is allowed"})", "?"),
             std::string("Only one completion choice is allowed"));
    QCOMPARE(error_message(R"({"detail":"Not Found"})", "?"), std::string("Not Found"));
    QCOMPARE(error_message("Service Unavailable\r\n", "?"), std::string("Service Unavailable"));
    QCOMPARE(error_message("", "no message"), std::string("no message"));
  }

  void totalsRoundTrip() {
    SessionTotals t;
    t.wall_seconds = 1.25;
    t.generated_tokens = 40;
    t.steps = 12;
    t.target_forwards = 13;
    t.target_tokens = 90;
    t.draft_forwards = 30;
    t.prompt_tokens = 6;
    t.peak_blocks = 9;
    t.accepted = 20;
    t.proposed = 28;
    const json j = totals_json(t, 4);
    QCOMPARE(j["ms_per_token_per_seq"].get<double>(), t.ms_per_token_per_sequence(4));
    const SessionTotals back = totals_from_json(j);
    QCOMPARE(back.wall_seconds, t.wall_seconds);
    QCOMPARE(back.generated_tokens, t.generated_tokens);
    QCOMPARE(back.steps, t.steps);
    QCOMPARE(back.target_forwards, t.target_forwards);
    QCOMPARE(back.target_tokens, t.target_tokens);
    QCOMPARE(back.draft_forwards, t.draft_forwards);
    QCOMPARE(back.prompt_tokens, t.prompt_tokens);
    QCOMPARE(back.peak_blocks, t.peak_blocks);
    QCOMPARE(back.acceptance_rate(), t.acceptance_rate());
    QCOMPARE(finish_reason_from_name("budget").value(), FinishReason::Budget);
    QVERIFY(!finish_reason_from_name("content_filter"));
    QCOMPARE(std::string(openai_finish_reason(FinishReason::Eos)), std::string("stop"));
    QCOMPARE(std::string(openai_finish_reason(FinishReason::Length)), std::string("length"));
  }

  void invalidUtf8NeverThrows() {
    const std::string lone_byte = "\xe2\x82";  // half of the euro sign: one token can be this
    QVERIFY(!dump(json{{"text", lone_byte}}).empty());
  }
};

QTEST_GUILESS_MAIN(TestServeProtocol)
#include "test_serve_protocol.moc"
