// `specula-cli serve` over real HTTP on loopback, on stories260K and on the demo pair: the
// endpoints and their errors, candidates equal to a local session token for token (greedy
// and seeded sampling, through the remote generator; and, with a chat template, through
// chat and through --prompt-style chat), eight indexed streams from one
// request, and hostile input: malformed JSON, huge n and max_tokens, negative temperature, a
// 10 MB body, 64 concurrent clients against --max-queue 4, clients that hang up mid-stream
// or before a whole response, clients too slow to finish sending a request, and a remote
// Stop, after which /health shows the generation cancelled, nothing failed and no KV block
// left held.
#include <QTemporaryDir>
#include <QtTest>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "decode/generator.h"
#include "decode/prompt_style.h"
#include "model/demo_models.h"
#include "serve/openai_api.h"
#include "serve/remote_generator.h"
#include "serve/sse.h"
#include "serve_process.h"
#include "shared_data.h"
#include "story_request.h"

using namespace specula;
using namespace specula::test;
using nlohmann::json;

namespace {

const char* kJson = "application/json";

json post(int port, const json& body, int* status = nullptr, httplib::Headers headers = {}) {
  auto client = http_client(port);
  const auto res = client.Post("/v1/completions", headers, body.dump(), kJson);
  if (status) *status = res ? res->status : -1;
  return res ? json::parse(res->body, nullptr, false) : json();
}

// The events of a streamed completion, parsed; "[DONE]" kept as a string.
std::vector<json> stream_events(int port, const json& body) {
  std::vector<json> events;
  serve::SseParser parser([&](const std::string& data) {
    events.push_back(data == "[DONE]" ? json(data) : json::parse(data, nullptr, false));
  });
  auto client = http_client(port);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
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

std::unique_ptr<LocalGenerator> local_stories(const std::string& bin, const std::string& tok) {
  LoadOptions o;
  o.tokenizer_path = tok;
  return std::make_unique<LocalGenerator>(create_cpu_backend(), load_model(bin, o));
}

// Both sides have the same, non-empty candidates token for token (two empty sessions are
// not equal for this purpose: they would show nothing).
void compare_sessions(const SessionResult& remote, const SessionResult& local, size_t expected) {
  QCOMPARE(local.candidates.size(), expected);
  QCOMPARE(remote.candidates.size(), local.candidates.size());
  for (size_t i = 0; i < local.candidates.size(); ++i) {
    const Candidate& r = remote.candidates[i];
    const Candidate& l = local.candidates[i];
    QVERIFY2(!l.tokens.empty(), qPrintable(QString("candidate %1 has no tokens").arg(i)));
    QCOMPARE(r.tokens, l.tokens);  // token for token
    QCOMPARE(r.text, l.text);
    QCOMPARE(r.logprobs, l.logprobs);
    QCOMPARE(finish_reason_name(r.finish), finish_reason_name(l.finish));
  }
}

// A client that connects and sends `start` of a request, then nothing more; reads what the
// server answers, if anything, until it closes the connection.
class StalledClient {
 public:
  StalledClient(int port, const std::string& start) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                 ::send(fd_, start.data(), start.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(start.size());
  }
  ~StalledClient() { ::close(fd_); }
  bool connected() const { return connected_; }
  // Everything the server sends until it closes; nullopt if it is still open after a minute.
  std::optional<std::string> answer() {
    timeval timeout{60, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    std::string got;
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n == 0) return got;
      if (n < 0) return std::nullopt;
      got.append(buffer, size_t(n));
    }
  }

 private:
  int fd_;
  bool connected_ = false;
};

bool is_error_object(const json& body) {
  return body.is_object() && body.contains("error") && body["error"]["message"].is_string() &&
         !body["error"]["message"].get<std::string>().empty();
}

}  // namespace

class TestServe : public QObject {
  Q_OBJECT

  std::string bin, tok;
  std::unique_ptr<ServeProcess> stories;  // --draft ngram --draft-policy adaptive --max-queue 4
                                          // (story_request's: sampled tokens depend on the drafts)
  std::unique_ptr<LocalGenerator> local;

 private slots:
  void initTestCase() {
    SPECULA_SHARED_FILE(b, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(t, "models/stories260K/tok512.bin");
    bin = b;
    tok = t;
    stories = std::make_unique<ServeProcess>(QStringList{"-m", QString::fromStdString(bin), "--tokenizer",
                                                         QString::fromStdString(tok), "--device", "cpu", "--draft",
                                                         "ngram", "--draft-policy", "adaptive", "--max-queue", "4",
                                                         "--request-timeout", "5"});
    QVERIFY2(stories->started(), qPrintable(stories->errors()));
    local = local_stories(bin, tok);
  }

  void endpointsAndTheirErrors() {
    auto client = http_client(stories->port());
    auto res = client.Get("/v1/models");
    QVERIFY(res && res->status == 200);
    const json models = json::parse(res->body);
    QCOMPARE(models["data"][0]["id"].get<std::string>(), std::string("stories260K"));
    QCOMPARE(models["data"][0]["max_model_len"].get<int>(), 512);
    QCOMPARE(health(stories->port())["status"].get<std::string>(), std::string("ok"));

    // a model without a chat template cannot take messages (test_serve_chat: one with a template)
    res = client.Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"Hi"}]})", kJson);
    QVERIFY(res && res->status == 400);
    QCOMPARE(json::parse(res->body)["error"]["code"].get<std::string>(), std::string("chat_template_missing"));
    QVERIFY(json::parse(res->body)["error"]["message"].get<std::string>().find("chat template") != std::string::npos);
    res = client.Get("/v1/nothing");
    QVERIFY(res && res->status == 404 && is_error_object(json::parse(res->body)));

    int status = 0;
    json body = post(stories->port(), {{"model", "gpt-4"}, {"prompt", "x"}}, &status);
    QCOMPARE(status, 404);
    QCOMPARE(body["error"]["code"].get<std::string>(), std::string("model_not_found"));
    body = post(stories->port(), {{"prompt", "def f("}, {"suffix", "    return 1\n"}}, &status);
    QCOMPARE(status, 400);
    QVERIFY(body["error"]["message"].get<std::string>().find("fill-in-the-middle") != std::string::npos);
  }

  void remoteCandidatesEqualLocalTokenForToken() {
    serve::RemoteGenerator remote(serve::RemoteOptions{stories->url().toStdString()});
    for (const auto& [n, temperature, seed] : {std::tuple{4, 0.0f, uint64_t(0)}, std::tuple{3, 0.8f, uint64_t(11)}}) {
      const GenerationRequest r = story_request(n, temperature, seed);
      compare_sessions(remote.generate(r), local->generate(r), size_t(n));
    }
  }

  void eightIndexedStreams() {
    const json body = {{"prompt", "Once upon a time"}, {"n", 8}, {"max_tokens", 24}, {"temperature", 0.8},
                       {"seed", 3}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
    const std::vector<json> events = stream_events(stories->port(), body);
    QVERIFY(events.size() >= 10);
    QCOMPARE(events.back(), json("[DONE]"));
    std::map<int, std::string> texts;
    std::map<int, int> finishes;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
      const json& e = events[i];
      QVERIFY2(e.is_object() && e["object"] == "text_completion", e.dump().c_str());
      for (const json& c : e["choices"]) {
        texts[c["index"].get<int>()] += c["text"].get<std::string>();
        if (!c["finish_reason"].is_null()) ++finishes[c["index"].get<int>()];
      }
    }
    QCOMPARE(int(texts.size()), 8);
    for (int i = 0; i < 8; ++i) QCOMPARE(finishes[i], 1);
    const json& last = events[events.size() - 2];  // include_usage: usage and the session's totals
    QVERIFY(last["choices"].empty());
    QVERIFY(last["usage"]["completion_tokens"].get<int>() > 0);
    QVERIFY(last["specula"]["totals"].contains("ms_per_token_per_seq"));
    QCOMPARE(last["specula"]["drafter"].get<std::string>(), std::string("ngram"));

    // the same request not streamed gives the same eight texts
    json whole = body;
    whole["stream"] = false;
    int status = 0;
    const json response = post(stories->port(), whole, &status);
    QCOMPARE(status, 200);
    for (const json& c : response["choices"]) QCOMPARE(c["text"].get<std::string>(), texts[c["index"].get<int>()]);
  }

  void wholeResponseShape() {
    int status = 0;
    const json r = post(stories->port(), {{"prompt", "Lily"}, {"n", 2}, {"max_tokens", 20}, {"temperature", 0},
                                          {"logprobs", 0}}, &status);
    QCOMPARE(status, 200);
    QCOMPARE(r["object"].get<std::string>(), std::string("text_completion"));
    QVERIFY(r["id"].get<std::string>().rfind("cmpl-", 0) == 0);
    int completion_tokens = 0;
    for (int i = 0; i < 2; ++i) {
      const json& c = r["choices"][size_t(i)];
      QCOMPARE(c["index"].get<int>(), i);
      const int tokens = c["specula"]["tokens"].get<int>();
      completion_tokens += tokens;
      QCOMPARE(int(c["logprobs"]["token_logprobs"].size()), tokens);
      std::string joined;  // each token's text, in order, makes the completion
      for (const json& t : c["logprobs"]["tokens"]) joined += t.get<std::string>();
      if (c["finish_reason"] == "length") QCOMPARE(joined, c["text"].get<std::string>());
    }
    QCOMPARE(r["usage"]["completion_tokens"].get<int>(), completion_tokens);
    QCOMPARE(r["usage"]["total_tokens"].get<int>(), completion_tokens + r["usage"]["prompt_tokens"].get<int>());
    QVERIFY(r["specula"]["totals"]["acceptance_rate"].is_number());
  }

  // /tokenize gives the model's ids; echo with max_tokens 0 scores a prompt of those ids:
  // the same log-probabilities as a pass of the same model here, the first position
  // unscored, the likeliest token at each position no less likely than the one there; with
  // max_tokens > 0 the completion follows the prompt in the text and the logprobs.
  void echoScoresThePrompt() {
    auto client = http_client(stories->port());
    const std::string text = "Once upon a time, there was a little girl named Lily.";
    auto res = client.Post("/tokenize", json{{"content", text}, {"add_special", true}}.dump(), kJson);
    QVERIFY(res && res->status == 200);
    const std::vector<int> ids = json::parse(res->body)["tokens"].get<std::vector<int>>();
    QCOMPARE(ids, local->target().tokenizer->encode(text, true));
    res = client.Post("/tokenize", json{{"content", text}}.dump(), kJson);  // add_special false by default
    QVERIFY(res && res->status == 200);
    QCOMPARE(json::parse(res->body)["tokens"].get<std::vector<int>>(), local->target().tokenizer->encode(text, false));
    res = client.Post("/tokenize", json{{"content", 5}}.dump(), kJson);
    QVERIFY(res && res->status == 400);

    int status = 0;
    const json r = post(stories->port(), {{"prompt", ids}, {"echo", true}, {"max_tokens", 0}, {"logprobs", 1}}, &status);
    QCOMPARE(status, 200);
    const json& c = r["choices"][0];
    QCOMPARE(c["text"].get<std::string>(), text);
    const json& logprobs = c["logprobs"];
    QCOMPARE(logprobs["token_logprobs"].size(), ids.size());
    QVERIFY(logprobs["token_logprobs"][0].is_null());
    const TokenScores want = local->score_tokens(ids, 1);
    for (size_t i = 1; i < ids.size(); ++i) {
      const double got = logprobs["token_logprobs"][i].get<double>();
      QVERIFY2(std::abs(got + want.nll[i - 1]) <= 1e-12 * want.nll[i - 1], logprobs.dump().c_str());
      QCOMPARE(logprobs["top_logprobs"][i].size(), size_t(1));
      QVERIFY(logprobs["top_logprobs"][i].begin().value().get<double>() >= got - 1e-6);
    }
    QCOMPARE(r["usage"]["prompt_tokens"].get<int>(), int(ids.size()));
    QCOMPARE(r["usage"]["completion_tokens"].get<int>(), 0);

    // a prompt of text, echoed before a greedy completion: the same completion as without echo
    const json plain = post(stories->port(), {{"prompt", "Lily"}, {"max_tokens", 8}, {"temperature", 0}}, &status);
    QCOMPARE(status, 200);
    const json echoed = post(stories->port(), {{"prompt", "Lily"}, {"max_tokens", 8}, {"temperature", 0}, {"echo", true},
                                               {"logprobs", 0}}, &status);
    QCOMPARE(status, 200);
    QCOMPARE(echoed["choices"][0]["text"].get<std::string>(), "Lily" + plain["choices"][0]["text"].get<std::string>());
    const size_t prompt_tokens = local->target().tokenizer->encode("Lily", true).size();
    QCOMPARE(echoed["choices"][0]["logprobs"]["token_logprobs"].size(),
             prompt_tokens + size_t(plain["choices"][0]["specula"]["tokens"].get<int>()));
    QVERIFY(echoed["choices"][0]["logprobs"]["top_logprobs"].is_null());  // logprobs 0: the tokens' own alone

    const json outside = post(stories->port(), {{"prompt", {1, 100000}}, {"echo", true}, {"max_tokens", 0}}, &status);
    QCOMPARE(status, 400);
    QVERIFY2(outside["error"]["message"].get<std::string>().find("vocabulary") != std::string::npos, outside.dump().c_str());
  }

  void hostileRequestsGetErrorObjects_data() {
    QTest::addColumn<QByteArray>("body");
    QTest::addColumn<int>("status");
    QTest::newRow("malformed JSON") << QByteArray(R"({"prompt": "x", "n": )") << 400;
    QTest::newRow("huge n") << QByteArray(R"({"prompt": "x", "n": 100000})") << 400;
    QTest::newRow("n = 64, long") << QByteArray(R"({"prompt": "x", "n": 64, "max_tokens": 200})") << 200;
    QTest::newRow("huge max_tokens") << QByteArray(R"({"prompt": "x", "max_tokens": 1000000000})") << 400;
    QTest::newRow("negative temperature") << QByteArray(R"({"prompt": "x", "temperature": -1})") << 400;
    QTest::newRow("binary garbage") << QByteArray("\x00\xff\xfe{{{", 6) << 400;
    QTest::newRow("10 MB body") << QByteArray(10 << 20, 'x') << 413;
  }
  void hostileRequestsGetErrorObjects() {
    QFETCH(QByteArray, body);
    QFETCH(int, status);
    auto client = http_client(stories->port());
    const auto res = client.Post("/v1/completions", body.toStdString(), kJson);
    QVERIFY(res);
    const json answer = json::parse(res->body, nullptr, false);
    QCOMPARE(res->status, status);
    if (status == 200) {  // the most candidates a request may have, within --max-kv-tokens: served
      QCOMPARE(int(answer["choices"].size()), 64);
      return;
    }
    QVERIFY2(is_error_object(answer), res->body.c_str());
  }

  void sixtyFourClientsAgainstAQueueOfFour() {
    const json before = health(stories->port());
    constexpr int kClients = 64;
    std::vector<int> statuses(kClients);
    std::vector<char> valid(kClients);  // not vector<bool>: its bits share words, and 64 threads write them
    std::vector<std::thread> clients;
    for (int i = 0; i < kClients; ++i) {
      clients.emplace_back([&, i] {
        auto client = http_client(stories->port());
        const json body = {{"prompt", "Tom"}, {"n", 2}, {"max_tokens", 48}, {"temperature", 0.8}, {"seed", i}};
        const auto res = client.Post("/v1/completions", body.dump(), kJson);
        statuses[size_t(i)] = res ? res->status : -int(res.error());
        if (!res) return;
        const json answer = json::parse(res->body, nullptr, false);
        valid[size_t(i)] = res->status == 200 ? answer["choices"].size() == 2
                                              : res->status == 503 && is_error_object(answer) &&
                                                    res->get_header_value("Retry-After") == "1";
      });
    }
    for (auto& t : clients) t.join();
    int served = 0, rejected = 0;
    for (int i = 0; i < kClients; ++i) {
      QVERIFY2(valid[size_t(i)], qPrintable(QString("client %1 got %2").arg(i).arg(statuses[size_t(i)])));
      served += statuses[size_t(i)] == 200;
      rejected += statuses[size_t(i)] == 503;
    }
    qInfo("%d served, %d answered 503", served, rejected);
    const json after = health(stories->port());
    QCOMPARE(after["completed"].get<int>() - before["completed"].get<int>(), served);
    QCOMPARE(after["rejected"].get<int>() - before["rejected"].get<int>(), rejected);
  }

  void clientsThatHangUpMidStream() {
    const json before = health(stories->port());
    constexpr int kClients = 5;  // one generating, four waiting: none turned away
    std::vector<std::thread> clients;
    std::atomic<int> hung_up{0};
    for (int i = 0; i < kClients; ++i) {
      clients.emplace_back([&, i] {
        auto client = http_client(stories->port());
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.body = json{{"prompt", "Once"}, {"n", 64}, {"max_tokens", 500}, {"seed", i}, {"stream", true}}.dump();
        req.set_header("Content-Type", kJson);
        req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
          ++hung_up;
          return false;  // the first bytes, then the client closes the connection
        };
        client.send(req);
      });
    }
    for (auto& t : clients) t.join();
    QCOMPARE(hung_up.load(), kClients);
    // every one of them ends, one way or the other, and nothing is left waiting or running
    QTRY_VERIFY_WITH_TIMEOUT(health(stories->port())["completed"].get<int>() + health(stories->port())["cancelled"].get<int>() -
                                     before["completed"].get<int>() - before["cancelled"].get<int>() ==
                                 kClients,
                             60000);
    QTRY_VERIFY_WITH_TIMEOUT(!health(stories->port())["generating"].get<bool>(), 60000);
    QCOMPARE(health(stories->port())["waiting"].get<int>(), 0);
  }

  void clientsThatHangUpBeforeAWholeResponse() {
    const json before = health(stories->port());
    httplib::Client client("127.0.0.1", stories->port());
    client.set_read_timeout(0, 300000);  // gives up long before 64 candidates of 500 tokens are done
    const json body = {{"prompt", "Once"}, {"n", 64}, {"max_tokens", 500}, {"seed", 2}};
    QVERIFY(!client.Post("/v1/completions", body.dump(), kJson));
    // the server notices the closed connection and stops generating: counted cancelled, not completed
    QTRY_VERIFY_WITH_TIMEOUT(health(stories->port())["cancelled"].get<int>() == before["cancelled"].get<int>() + 1, 60000);
    QTRY_VERIFY_WITH_TIMEOUT(!health(stories->port())["generating"].get<bool>(), 60000);
    QCOMPARE(health(stories->port())["completed"].get<int>(), before["completed"].get<int>());
  }

  void clientsTooSlowToSendARequest() {
    // More stalled connections than the server has HTTP workers (--max-queue 4: 9): half a
    // request line, headers without their end, a body shorter than its Content-Length
    const std::string starts[] = {"GET /hea", "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-",
                                  "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                  "Content-Length: 100\r\n\r\n{\"prompt\":"};
    std::vector<std::unique_ptr<StalledClient>> stalled;
    for (int i = 0; i < 18; ++i) {
      stalled.push_back(std::make_unique<StalledClient>(stories->port(), starts[i % 3]));
      QVERIFY(stalled.back()->connected());
    }
    // a client that sends its request whole is still served
    int status = 0;
    const json served = post(stories->port(), {{"prompt", "Tim"}, {"n", 2}, {"max_tokens", 8}}, &status);
    QCOMPARE(status, 200);
    QCOMPARE(int(served["choices"].size()), 2);
    // and each stalled one is answered 408 at its request's deadline (--request-timeout 5), then closed
    for (size_t i = 0; i < stalled.size(); ++i) {
      const std::optional<std::string> answer = stalled[i]->answer();
      QVERIFY2(answer, "the server kept a stalled connection open");
      QVERIFY2(answer->rfind("HTTP/1.1 408", 0) == 0, answer->c_str());
      QVERIFY2(is_error_object(json::parse(answer->substr(answer->find("\r\n\r\n") + 4), nullptr, false)),
               answer->c_str());
    }
    QCOMPARE(health(stories->port())["waiting"].get<int>(), 0);
  }

  void remoteStopCancelsTheServersGeneration() {
    const int cancelled = health(stories->port())["cancelled"].get<int>();
    serve::RemoteGenerator remote(serve::RemoteOptions{stories->url().toStdString()});
    GenerationRequest r = story_request(64, 1.0f, 5);
    r.max_new_tokens = 500;
    std::atomic<bool> stop{false};
    SessionCallbacks cb;
    cb.on_delta = [&](const CandidateDelta&) { stop = true; };  // Stop at the first text
    const SessionResult result = remote.generate(r, cb, &stop);
    for (const Candidate& c : result.candidates) QVERIFY(c.finish == FinishReason::Cancelled || c.finish == FinishReason::Eos);
    QTRY_VERIFY_WITH_TIMEOUT(health(stories->port())["cancelled"].get<int>() == cancelled + 1, 30000);
    QTRY_VERIFY_WITH_TIMEOUT(!health(stories->port())["generating"].get<bool>(), 30000);
  }

  void keysAreChecked() {
    ServeProcess keyed({"-m", QString::fromStdString(bin), "--tokenizer", QString::fromStdString(tok), "--device",
                        "cpu", "--api-key", "s3cret"});
    QVERIFY2(keyed.started(), qPrintable(keyed.errors()));
    const json body = {{"prompt", "x"}, {"max_tokens", 2}};
    int status = 0;
    QVERIFY(is_error_object(post(keyed.port(), body, &status)));
    QCOMPARE(status, 401);
    QCOMPARE(post(keyed.port(), body, &status, {{"Authorization", "Bearer s3cre"}})["error"]["code"].get<std::string>(),
             std::string("invalid_api_key"));
    QCOMPARE(status, 401);
    post(keyed.port(), body, &status, {{"Authorization", "Bearer s3cret"}});
    QCOMPARE(status, 200);
    QCOMPARE(health(keyed.port())["status"].get<std::string>(), std::string("ok"));  // for load balancers

    serve::RemoteOptions wrong{keyed.url().toStdString(), "guess"};
    try {
      serve::RemoteGenerator(wrong).generate(story_request(1, 0.0f, 0));
      QFAIL("a wrong key was accepted");
    } catch (const serve::RemoteError& e) {
      QVERIFY2(QString(e.what()).contains("API key"), e.what());
    }
    serve::RemoteOptions right{keyed.url().toStdString(), "s3cret"};
    QVERIFY(!serve::RemoteGenerator(right).generate(story_request(1, 0.0f, 0)).candidates[0].tokens.empty());
    QVERIFY(keyed.stopsCleanly());  // SIGTERM ends it with status 0
  }

  void demoPairEqualsLocal() {
    ServeProcess demo({"--device", "cpu", "--draft-policy", "adaptive"});  // the local side's policy
    QVERIFY2(demo.started(), qPrintable(demo.errors()));
    serve::RemoteGenerator remote(serve::RemoteOptions{demo.url().toStdString()});
    QCOMPARE(remote.probe().model, std::string("specula-demo"));
    LocalGenerator local_demo = [] {
      const auto pair = find_demo_models(SPECULA_SOURCE_DIR);
      return LocalGenerator(create_cpu_backend(), load_model(pair->target), load_model(pair->draft));
    }();
    GenerationRequest r;
    r.prompt = "def add(a, b):\n    \"\"\"Return a + b.\"\"\"\n";
    r.n_candidates = 3;
    r.max_new_tokens = 48;
    r.code_stops = true;
    r.draft.kind = "model";  // the demo pair's drafter, on both sides
    r.draft.policy = "adaptive";
    compare_sessions(remote.generate(r), local_demo.generate(r), 3);
    r.sampling = SamplingParams{0.8f, 0, 0.95f, 0.0f, 9};
    compare_sessions(remote.generate(r), local_demo.generate(r), 3);
  }

  // The demo pair served with a chat template and --prompt-style chat: the remote generator
  // asking through chat (the code request, then the assistant's message opened with the code,
  // continued as a prefill) and asking /v1/completions (which this server puts in the chat
  // style) both give the candidates of a local chat-style session with the same template.
  void demoPairChatEqualsLocal() {
    QTemporaryDir dir;
    const std::string source =
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    const QString file = dir.filePath("chatml.jinja");
    std::ofstream(file.toStdString()) << source;
    ServeProcess demo({"--device", "cpu", "--draft-policy", "adaptive", "--chat-template", file, "--prompt-style", "chat"});
    QVERIFY2(demo.started(), qPrintable(demo.errors()));
    LocalGenerator local_demo = [] {
      const auto pair = find_demo_models(SPECULA_SOURCE_DIR);
      return LocalGenerator(create_cpu_backend(), load_model(pair->target), load_model(pair->draft));
    }();
    GenerationRequest r;
    r.prompt = "def add(a, b):\n    \"\"\"Return a + b.\"\"\"\n";
    r.n_candidates = 3;
    r.max_new_tokens = 48;
    r.code_stops = true;
    r.draft.kind = "model";
    r.draft.policy = "adaptive";
    GenerationRequest chat_style = r;
    use_chat_prompt(chat_style, ModelChatTemplate{.source = source});
    const SessionResult local_greedy = local_demo.generate(chat_style);

    serve::RemoteOptions through_chat{demo.url().toStdString()};
    through_chat.api = serve::RemoteApi::Chat;
    serve::RemoteGenerator chat(through_chat);
    // the first answer: stop strings applied by the client (the server was not yet known to
    // continue), so the same text and ends, not the same token counts
    const SessionResult first = chat.generate(r);
    QCOMPARE(first.candidates.size(), local_greedy.candidates.size());
    for (size_t i = 0; i < first.candidates.size(); ++i) {
      QVERIFY(!local_greedy.candidates[i].text.empty());
      QCOMPARE(first.candidates[i].text, local_greedy.candidates[i].text);
      QCOMPARE(finish_reason_name(first.candidates[i].finish), finish_reason_name(local_greedy.candidates[i].finish));
    }
    // then the server stops at the stop strings itself: token for token
    compare_sessions(chat.generate(r), local_greedy, 3);
    r.sampling = chat_style.sampling = SamplingParams{0.8f, 0, 0.95f, 0.0f, 9};
    compare_sessions(chat.generate(r), local_demo.generate(chat_style), 3);

    r.sampling = chat_style.sampling = SamplingParams{};
    serve::RemoteOptions through_completions{demo.url().toStdString()};
    through_completions.api = serve::RemoteApi::Completions;
    compare_sessions(serve::RemoteGenerator(through_completions).generate(r), local_greedy, 3);
    const json h = health(demo.port());
    QCOMPARE(h["failed"].get<int>(), 0);
    QCOMPARE(h["kv_blocks_left"].get<int>(), 0);
  }

  // top_logprobs on /v1/chat/completions, in OpenAI's shape: with each token its k most
  // likely tokens, most likely first; greedy, the first of them is the token chosen, with
  // its log-probability. With stream, or without logprobs, it is a clear 400.
  void chatTopLogprobs() {
    QTemporaryDir dir;
    const QString file = dir.filePath("chatml.jinja");
    std::ofstream(file.toStdString()) << "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                                         "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    ServeProcess demo({"--device", "cpu", "--chat-template", file});
    QVERIFY2(demo.started(), qPrintable(demo.errors()));
    auto client = http_client(demo.port());
    const json messages = json::array({{{"role", "user"}, {"content", "Add two numbers."}},
                                       {{"role", "assistant"}, {"content", "```python\ndef add(a, b):\n"}}});
    json request = {{"messages", messages}, {"max_tokens", 12}, {"temperature", 0}, {"logprobs", true},
                    {"top_logprobs", 3}, {"n", 2}};
    auto res = client.Post("/v1/chat/completions", request.dump(), kJson);
    QVERIFY(res && res->status == 200);
    const json body = json::parse(res->body);
    QCOMPARE(body["choices"].size(), size_t(2));
    for (const json& choice : body["choices"]) {
      const json& content = choice["logprobs"]["content"];
      QVERIFY(!content.empty());
      QCOMPARE(content.size(), choice["specula"]["token_ids"].size());
      std::string joined;
      for (const json& entry : content) {
        joined += entry["token"].get<std::string>();
        const json& top = entry["top_logprobs"];
        QCOMPARE(top.size(), size_t(3));
        for (size_t j = 0; j < top.size(); ++j) {
          QVERIFY(top[j]["token"].is_string() && top[j]["bytes"].is_array());
          QVERIFY(top[j]["logprob"].get<double>() <= 0.0);
          if (j > 0) QVERIFY(top[j]["logprob"].get<double>() <= top[j - 1]["logprob"].get<double>());
        }
        // greedy: the token chosen is the most likely one, as the decoder scored it
        QCOMPARE(top[0]["token"].get<std::string>(), entry["token"].get<std::string>());
        QVERIFY2(std::abs(top[0]["logprob"].get<double>() - entry["logprob"].get<double>()) < 1e-3,
                 qPrintable(QString::fromStdString(entry.dump())));
      }
      QCOMPARE(joined, choice["message"]["content"].get<std::string>());
    }
    for (const json& bad : {json{{"stream", true}}, json{{"logprobs", false}}, json{{"top_logprobs", 21}}}) {
      json wrong = request;
      wrong.update(bad);
      res = client.Post("/v1/chat/completions", wrong.dump(), kJson);
      QVERIFY(res && res->status == 400);
      QCOMPARE(json::parse(res->body)["error"]["param"].get<std::string>(), std::string("top_logprobs"));
    }
    QCOMPARE(health(demo.port())["kv_blocks_left"].get<int>(), 0);
  }

  void cleanupTestCase() {
    if (!stories) return;
    const json h = health(stories->port());  // after everything above, the server still answers
    QCOMPARE(h["status"].get<std::string>(), std::string("ok"));
    QCOMPARE(h["failed"].get<int>(), 0);
    QCOMPARE(h["kv_blocks_left"].get<int>(), 0);  // every session released its cache blocks
    int status = 0;
    post(stories->port(), {{"prompt", "The end"}, {"max_tokens", 8}}, &status);
    QCOMPARE(status, 200);
    QVERIFY(stories->stopsCleanly());
  }
};

QTEST_GUILESS_MAIN(TestServe)
#include "test_serve.moc"
