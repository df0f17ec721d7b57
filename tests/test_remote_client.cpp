// The remote generator against a small controlled HTTP server (cpp-httplib, loopback,
// ephemeral ports) that does what real servers do badly: refuses or ignores n, splits
// events anywhere and mixes in comments and keep-alive lines, answers 401, 404, 429 with
// Retry-After, 500 and 503, stops a stream without [DONE], never answers at all, or shows a
// certificate that does not verify; or has no /v1/completions and speaks chat only,
// continuing the assistant's prefill or starting its answer over. Every case ends in the
// right candidates or in a RemoteError whose message says what happened, and the budget and
// Stop always hold.
#include <QTemporaryDir>
#include <QtTest>

#include <httplib.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#include "serve/openai_api.h"
#include "serve/remote_generator.h"

using namespace specula;
using namespace specula::serve;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// A chat stream's chunk: a delta of content for choice `index`.
std::string chat_chunk(int index, const std::string& content, const char* finish = nullptr) {
  const json choice = {{"index", index}, {"delta", {{"content", content}}},
                       {"finish_reason", finish ? json(finish) : json(nullptr)}};
  return "data: " + json{{"object", "chat.completion.chunk"}, {"choices", json::array({choice})}}.dump() + "\n\n";
}

void not_found(httplib::Response& res) {
  res.status = 404;
  res.set_content(R"({"error":{"code":404,"message":"File Not Found","type":"not_found_error"}})", "application/json");
}

std::string chunk(int index, const std::string& text, const char* finish = nullptr, std::vector<float> logprobs = {}) {
  json choice = {{"index", index}, {"text", text}, {"finish_reason", finish ? json(finish) : json(nullptr)}};
  if (!logprobs.empty()) choice["logprobs"] = {{"token_logprobs", logprobs}};
  return "data: " + json{{"object", "text_completion"}, {"choices", json::array({choice})}}.dump() + "\n\n";
}

// The text candidate i streams twice: "c0 ", "c1 ", ...
std::string piece(int i) { return std::string(1, 'c').append(std::to_string(i)).append(1, ' '); }

// A server run by the test: GET /v1/models lists "fake"; POST /v1/completions is the test's,
// and so is POST /v1/chat/completions when the test gives a handler for it (else 404).
class FakeServer {
 public:
  using Handler = std::function<void(const json& body, httplib::Response& res)>;

  explicit FakeServer(Handler handler, std::unique_ptr<httplib::Server> server = std::make_unique<httplib::Server>(),
                      Handler chat = nullptr)
      : server_(std::move(server)), handler_(std::move(handler)), chat_(std::move(chat)) {
    server_->Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"fake","object":"model"}]})", "application/json");
    });
    server_->Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      handler_(record(req), res);
    });
    if (chat_) {
      server_->Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
        chat_(record(req), res);
      });
    }
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
  }
  ~FakeServer() {
    server_->stop();
    thread_.join();
  }
  std::string url(const char* scheme = "http") const { return std::string(scheme) + "://127.0.0.1:" + std::to_string(port_); }
  std::vector<json> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  std::vector<std::string> paths() const {  // of requests(), in the same order
    std::lock_guard lock(mutex_);
    return paths_;
  }

 private:
  json record(const httplib::Request& req) {
    json body = json::parse(req.body);
    std::lock_guard lock(mutex_);
    requests_.push_back(body);
    paths_.push_back(req.path);
    return body;
  }

  std::unique_ptr<httplib::Server> server_;
  Handler handler_;
  Handler chat_;
  std::vector<std::string> paths_;
  int port_ = -1;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<json> requests_;
};

// Streams `bytes` in pieces of `piece` bytes, then ends the chunked body cleanly (`finish`)
// or drops the connection.
void stream_bytes(httplib::Response& res, std::string bytes, size_t piece = 0, bool finish = true) {
  res.set_chunked_content_provider("text/event-stream", [bytes, piece, finish](size_t, httplib::DataSink& sink) {
    const size_t step = piece ? piece : bytes.size();
    for (size_t at = 0; at < bytes.size(); at += step) {
      if (!sink.write(bytes.data() + at, std::min(step, bytes.size() - at))) return false;
      if (piece) std::this_thread::sleep_for(1ms);
    }
    if (!finish) return false;
    sink.done();
    return true;
  });
}

// Streams `answer` as the n choices of a chat, in pieces of 7 bytes, after each choice's role.
void stream_chat(httplib::Response& res, int n, const std::string& answer) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    const json role = {{"index", i}, {"delta", {{"role", "assistant"}}}, {"finish_reason", nullptr}};
    s += "data: " + json{{"object", "chat.completion.chunk"}, {"choices", json::array({role})}}.dump() + "\n\n";
  }
  for (size_t at = 0; at < answer.size(); at += 7)
    for (int i = 0; i < n; ++i) s += chat_chunk(i, answer.substr(at, 7));
  for (int i = 0; i < n; ++i) s += chat_chunk(i, "", "stop");
  stream_bytes(res, s + "data: [DONE]\n\n");
}

// Streams "x" every 20 ms until the client goes away, which `gone` then says.
void stream_forever(httplib::Response& res, std::atomic<bool>& gone) {
  res.set_chunked_content_provider("text/event-stream", [&gone](size_t, httplib::DataSink& sink) {
    for (;;) {
      const std::string event = chunk(0, "x");
      if (!sink.write(event.data(), event.size()) || !sink.is_writable()) break;
      std::this_thread::sleep_for(20ms);
    }
    gone = true;
    return false;
  });
}

void answer(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

RemoteOptions options(const std::string& url) {
  RemoteOptions o;
  o.url = url;
  o.connect_timeout_seconds = 5;
  return o;
}

GenerationRequest request(int n, double budget = 0.0) {
  GenerationRequest r;
  r.prompt = "def f():\n";
  r.n_candidates = n;
  r.max_new_tokens = 16;
  r.sampling.temperature = 0.8f;
  r.sampling.seed = 40;
  r.budget_seconds = budget;
  return r;
}

QString remote_error(RemoteGenerator& g, const GenerationRequest& r) {
  try {
    g.generate(r);
  } catch (const RemoteError& e) {
    return QString::fromStdString(e.what());
  }
  return QStringLiteral("(no RemoteError)");
}

// A self-signed certificate for 127.0.0.1, written as PEM files into `dir`.
bool write_self_signed(const QString& dir, std::string& cert_path, std::string& key_path) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  if (!key || !cert) return false;
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  const bool signed_ok = X509_sign(cert, key, EVP_sha256()) > 0;
  cert_path = (dir + "/cert.pem").toStdString();
  key_path = (dir + "/key.pem").toStdString();
  FILE* c = std::fopen(cert_path.c_str(), "w");
  FILE* k = std::fopen(key_path.c_str(), "w");
  const bool written = c && k && PEM_write_X509(c, cert) && PEM_write_PrivateKey(k, key, nullptr, nullptr, 0, nullptr, nullptr);
  if (c) std::fclose(c);
  if (k) std::fclose(k);
  X509_free(cert);
  EVP_PKEY_free(key);
  return signed_ok && written;
}

}  // namespace

class TestRemoteClient : public QObject {
  Q_OBJECT

 private slots:
  void oneRequestCarriesTheNCandidates() {
    FakeServer server([](const json& body, httplib::Response& res) {
      const int n = body.value("n", 1);
      std::string s;
      for (int step = 0; step < 2; ++step)
        for (int i = 0; i < n; ++i) s += chunk(i, piece(i));
      for (int i = 0; i < n; ++i) s += chunk(i, "", "length", {-1.0f, -0.5f - float(i)});
      stream_bytes(res, s + "data: [DONE]\n\n");
    });
    RemoteGenerator g(options(server.url()));
    std::vector<std::string> streamed(3);
    int finished = 0;
    SessionCallbacks cb;
    cb.on_delta = [&](const CandidateDelta& d) { streamed.at(size_t(d.index)) += d.text; };
    cb.on_finished = [&](const Candidate&) { ++finished; };
    const SessionResult r = g.generate(request(3), cb);
    QCOMPARE(int(server.requests().size()), 1);
    const json sent = server.requests()[0];
    QCOMPARE(sent["n"].get<int>(), 3);
    QCOMPARE(sent["model"].get<std::string>(), std::string("fake"));  // the first model it lists
    QVERIFY(sent["stream"].get<bool>());
    QCOMPARE(sent["seed"].get<int>(), 40);
    QCOMPARE(finished, 3);
    for (int i = 0; i < 3; ++i) {
      const Candidate& c = r.candidates[size_t(i)];
      const std::string expected = piece(i) + piece(i);
      QCOMPARE(c.text, expected);
      QCOMPARE(streamed[size_t(i)], expected);
      QVERIFY(c.finish == FinishReason::Length);
      QCOMPARE(c.mean_logprob(), (-1.0 + (-0.5 - i)) / 2);  // ranking uses the server's log-probabilities
      QCOMPARE(int(c.tokens.size()), 2);
    }
  }

  // A chat-only server (404 on /v1/completions) that starts its answer over, restating the
  // function in a ```python block after a sentence: auto falls back to chat, asks it to
  // continue the assistant's message opened with the code, sends no stop string that would
  // cut the restated answer, and each candidate is the body taken from the block.
  void chatOnlyServerRestatingTheFunction() {
    const std::string prompt = "def add(a, b):\n    \"\"\"Return a + b.\"\"\"\n";
    const std::string answer = "Here is the completed function:\n\n```python\n" + prompt +
                               "    return a + b\n```\n\nIt returns the sum.";
    FakeServer server([](const json&, httplib::Response& res) { not_found(res); }, std::make_unique<httplib::Server>(),
                      [&](const json& body, httplib::Response& res) { stream_chat(res, body.value("n", 1), answer); });
    RemoteGenerator g(options(server.url()));
    GenerationRequest r = request(2);
    r.prompt = prompt;
    r.code_stops = true;
    std::vector<std::string> streamed(2);
    SessionCallbacks cb;
    cb.on_delta = [&](const CandidateDelta& d) { streamed.at(size_t(d.index)) += d.text; };
    const SessionResult result = g.generate(r, cb);
    for (int i = 0; i < 2; ++i) {
      QCOMPARE(result.candidates[size_t(i)].text, std::string("    return a + b\n"));
      QCOMPARE(streamed[size_t(i)], result.candidates[size_t(i)].text);  // no sentence, no fence reached the caller
      QVERIFY(result.candidates[size_t(i)].finish == FinishReason::Stop);
    }
    const std::vector<std::string> paths = server.paths();
    QCOMPARE(paths, (std::vector<std::string>{"/v1/completions", "/v1/chat/completions"}));
    const json chat = server.requests()[1];
    QCOMPARE(chat["n"].get<int>(), 2);
    QCOMPARE(chat["messages"].size(), size_t(2));
    QCOMPARE(chat["messages"][0]["role"].get<std::string>(), std::string("user"));
    QVERIFY(chat["messages"][0]["content"].get<std::string>().find(prompt) != std::string::npos);
    QCOMPARE(chat["messages"][1]["role"].get<std::string>(), std::string("assistant"));
    QCOMPARE(chat["messages"][1]["content"].get<std::string>(), "```python\n" + prompt);
    QVERIFY(chat["continue_final_message"].get<bool>());
    QVERIFY(!chat["add_generation_prompt"].get<bool>());
    QVERIFY(!chat.contains("stop"));  // "\ndef" or the fence would end the restated answer early
    QVERIFY(!chat.contains("prompt") && chat["logprobs"].is_boolean());
    QVERIFY2(QString::fromStdString(g.describe()).contains("through chat"), g.describe().c_str());

    g.generate(r);  // learned: straight to chat, still without stops (the server starts over)
    QCOMPARE(server.paths().back(), std::string("/v1/chat/completions"));
    QCOMPARE(int(server.paths().size()), 3);
    QVERIFY(!server.requests().back().contains("stop"));

    r.suffix = "\n";  // a chat cannot fill in the middle
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, g.generate(r));
  }

  // A chat server that continues the prefill: the answer streams as it comes, ends at the
  // closing fence (the server was not told to stop there yet), and once the server has shown
  // that it continues, the stops go with the request.
  void chatServerContinuingThePrefill() {
    FakeServer server([](const json&, httplib::Response& res) { res.status = 405; }, std::make_unique<httplib::Server>(),
                      [&](const json& body, httplib::Response& res) {
                        stream_chat(res, body.value("n", 1), "    return a + b\n```\n\nDone: the sum.");
                      });
    RemoteOptions o = options(server.url());
    o.api = RemoteApi::Chat;  // asked for chat: /v1/completions is never tried
    RemoteGenerator g(o);
    GenerationRequest r = request(3);
    r.prompt = "def add(a, b):\n";
    r.code_stops = true;
    std::vector<std::string> streamed(3);
    SessionCallbacks cb;
    cb.on_delta = [&](const CandidateDelta& d) { streamed.at(size_t(d.index)) += d.text; };
    SessionResult result = g.generate(r, cb);
    for (int i = 0; i < 3; ++i) {
      QCOMPARE(result.candidates[size_t(i)].text, std::string("    return a + b\n"));
      QCOMPARE(streamed[size_t(i)], std::string("    return a + b\n"));
      QVERIFY(result.candidates[size_t(i)].finish == FinishReason::Stop);
    }
    QCOMPARE(server.paths(), std::vector<std::string>{"/v1/chat/completions"});
    QVERIFY(!server.requests()[0].contains("stop"));
    result = g.generate(r);
    const json second = server.requests().back();
    QVERIFY(second.contains("stop"));
    const auto stops = second["stop"].get<std::vector<std::string>>();
    QVERIFY(std::find(stops.begin(), stops.end(), std::string("```")) != stops.end());
    QCOMPARE(result.candidates[2].text, std::string("    return a + b\n"));
  }

  // A server answering neither endpoint is a message that says so; asked for chat, a server
  // without it says that it does not speak chat.
  void neitherEndpointIsAMessage() {
    FakeServer neither([](const json&, httplib::Response& res) { not_found(res); });  // no chat handler: 404
    RemoteGenerator g(options(neither.url()));
    const QString message = remote_error(g, request(2));
    QVERIFY2(message.contains("neither /v1/completions nor /v1/chat/completions"), qPrintable(message));
    QVERIFY2(message.contains("404"), qPrintable(message));

    RemoteOptions o = options(neither.url());
    o.api = RemoteApi::Chat;
    RemoteGenerator chat_only(o);
    const QString chat_message = remote_error(chat_only, request(1));
    QVERIFY2(chat_message.contains("/v1/chat/completions does not exist") && chat_message.contains("chat"),
             qPrintable(chat_message));

    // a 404 for an unknown model is not a missing endpoint: no fallback, the model is named
    FakeServer no_model([](const json&, httplib::Response& res) {
      answer(res, 404, R"({"error":{"message":"The model `fake` does not exist.","code":"model_not_found"}})");
    });
    RemoteGenerator g2(options(no_model.url()));
    const QString model_message = remote_error(g2, request(1));
    QVERIFY2(model_message.contains("does not know the model"), qPrintable(model_message));
    QCOMPARE(no_model.paths(), std::vector<std::string>{"/v1/completions"});
  }

  void nRefusedFallsBackToConcurrentRequests_data() {
    QTest::addColumn<int>("status");
    QTest::newRow("400") << 400;
    QTest::newRow("500, as llama.cpp's server answers") << 500;
  }
  void nRefusedFallsBackToConcurrentRequests() {
    QFETCH(int, status);
    FakeServer server([status](const json& body, httplib::Response& res) {
      if (body.value("n", 1) > 1) {
        return answer(res, status,
                      R"({"error":{"code":500,"message":"Only one completion choice is allowed","type":"server_error"}})");
      }
      stream_bytes(res, chunk(0, "seed " + std::to_string(body["seed"].get<uint64_t>())) + chunk(0, "", "stop") +
                            "data: [DONE]\n\n");
    });
    RemoteGenerator g(options(server.url()));
    SessionResult r = g.generate(request(3));
    std::vector<json> sent = server.requests();
    QCOMPARE(int(sent.size()), 4);
    for (int i = 0; i < 3; ++i) {
      QCOMPARE(r.candidates[size_t(i)].text, "seed " + std::to_string(40 + i));  // candidate i: seed + i
      QVERIFY(r.candidates[size_t(i)].finish == FinishReason::Stop);
    }
    for (size_t i = 1; i < sent.size(); ++i) QVERIFY(!sent[i].contains("n"));
    r = g.generate(request(2));  // learned: no n any more
    sent = server.requests();
    QCOMPARE(int(sent.size()), 6);
    QVERIFY(!sent[4].contains("n") && !sent[5].contains("n"));
    QCOMPARE(r.candidates[1].text, std::string("seed 41"));
  }

  void nIgnoredFallsBackForTheMissingChoices() {
    FakeServer server([](const json& body, httplib::Response& res) {  // one choice, whatever n says
      stream_bytes(res, chunk(0, "seed " + std::to_string(body["seed"].get<uint64_t>())) + chunk(0, "", "stop") +
                            "data: [DONE]\n\n");
    });
    RemoteGenerator g(options(server.url()));
    const SessionResult r = g.generate(request(3));
    QCOMPARE(int(server.requests().size()), 3);
    for (int i = 0; i < 3; ++i) QCOMPARE(r.candidates[size_t(i)].text, "seed " + std::to_string(40 + i));
  }

  void eventsSplitAnywhereWithCommentsAndKeepAlive() {
    const std::string s = ": keep-alive\r\n\r\n" + chunk(0, "héllo") + ":\n\n" + chunk(1, " wörld") + ": ping\r\n\r\n" +
                          chunk(0, "", "stop") + chunk(1, "", "length") + "data: [DONE]\r\n\r\n";
    for (size_t piece : {1, 3, 7}) {
      FakeServer server([&](const json&, httplib::Response& res) { stream_bytes(res, s, piece); });
      RemoteGenerator g(options(server.url()));
      const SessionResult r = g.generate(request(2));
      QCOMPARE(r.candidates[0].text, std::string("héllo"));
      QCOMPARE(r.candidates[1].text, std::string(" wörld"));
      QVERIFY(r.candidates[1].finish == FinishReason::Length);
    }
  }

  void failuresAreClearMessages_data() {
    QTest::addColumn<int>("status");
    QTest::addColumn<QString>("body");
    QTest::addColumn<QString>("message");
    QTest::newRow("401") << 401 << R"({"error":{"message":"Incorrect API key provided"}})" << "refused the API key";
    QTest::newRow("404 model") << 404 << R"({"error":{"message":"The model `fake` does not exist."}})"
                               << "does not know the model 'fake'";
    // no completions: chat is tried, and this server has none either
    QTest::newRow("404 path") << 404 << R"({"detail":"Not Found"})" << "has neither /v1/completions nor /v1/chat/completions (404";
    QTest::newRow("500") << 500 << "Internal Server Error" << "the server failed (500): Internal Server Error";
    QTest::newRow("400 twice") << 400 << R"({"error":{"message":"max_tokens is too large"}})" << "(none)";
    QTest::newRow("malformed event") << 200 << "data: {\"choices\": [\n\n" << "malformed event";
    QTest::newRow("no [DONE]") << 200 << QString::fromStdString(chunk(0, "half")) << "ended before the completion did (no [DONE])";
    QTest::newRow("connection dropped") << -200 << QString::fromStdString(chunk(0, "half")) << "connection to";
    QTest::newRow("not a completion") << 200 << "data: {\"object\":\"list\"}\n\n" << "cannot read";
  }
  void failuresAreClearMessages() {
    QFETCH(int, status);
    QFETCH(QString, body);
    QFETCH(QString, message);
    FakeServer server([&](const json&, httplib::Response& res) {
      if (std::abs(status) == 200) return stream_bytes(res, body.toStdString(), 0, status > 0);
      answer(res, status, body.toStdString());
    });
    RemoteGenerator g(options(server.url()));
    if (status == 400) {  // refused even as one plain request: the request itself is wrong
      QVERIFY_THROWS_EXCEPTION(std::invalid_argument, g.generate(request(1)));
      return;
    }
    const QString error = remote_error(g, request(1));
    QVERIFY2(error.contains(message), qPrintable(error));
  }

  void retriesAfterWhat429Says() {
    std::atomic<int> calls{0};
    FakeServer server([&](const json&, httplib::Response& res) {
      if (calls++ == 0) {
        res.set_header("Retry-After", "1");
        return answer(res, 429, R"({"error":{"message":"rate limited"}})");
      }
      stream_bytes(res, chunk(0, "ok") + chunk(0, "", "stop") + "data: [DONE]\n\n");
    });
    RemoteGenerator g(options(server.url()));
    const SessionResult r = g.generate(request(1, 30.0));
    QCOMPARE(calls.load(), 2);
    QCOMPARE(r.candidates[0].text, std::string("ok"));
  }

  void busyServerPastTheBudgetIsAMessage() {
    FakeServer server([](const json&, httplib::Response& res) {
      res.set_header("Retry-After", "5");
      answer(res, 503, R"({"error":{"message":"the server is busy"}})");
    });
    RemoteGenerator g(options(server.url()));
    const QString error = remote_error(g, request(2, 2.0));
    QVERIFY2(error.contains("busy") && error.contains("budget"), qPrintable(error));
  }

  void silentServerStillEndsWithTheBudget() {
    // a socket that listens and never accepts: the connection opens, no answer ever comes
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    QCOMPARE(bind(s, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    QCOMPARE(listen(s, 16), 0);
    socklen_t length = sizeof address;
    getsockname(s, reinterpret_cast<sockaddr*>(&address), &length);
    RemoteOptions o = options("http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)));
    o.model = "fake";  // no model list to ask for either
    RemoteGenerator g(o);
    const SessionResult r = g.generate(request(2, 1.0));
    close(s);
    for (const Candidate& c : r.candidates) {
      QVERIFY(c.finish == FinishReason::Budget);
      QVERIFY(c.text.empty());
    }
  }

  void connectionRefusedIsAMessage() {
    const int s = socket(AF_INET, SOCK_STREAM, 0);  // a free port, then nobody on it
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(s, reinterpret_cast<sockaddr*>(&address), sizeof address);
    socklen_t length = sizeof address;
    getsockname(s, reinterpret_cast<sockaddr*>(&address), &length);
    close(s);
    RemoteGenerator g(options("http://127.0.0.1:" + std::to_string(ntohs(address.sin_port))));
    const QString error = remote_error(g, request(1));
    QVERIFY2(error.contains("cannot connect"), qPrintable(error));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, RemoteGenerator(options("ftp://host")));
  }

  void invalidCertificateRefusedUnlessAllowed() {
    QTemporaryDir dir;
    std::string cert, key;
    QVERIFY(write_self_signed(dir.path(), cert, key));
    FakeServer server([](const json&, httplib::Response& res) {
                        stream_bytes(res, chunk(0, "secret") + chunk(0, "", "stop") + "data: [DONE]\n\n");
                      },
                      std::make_unique<httplib::SSLServer>(cert.c_str(), key.c_str()));
    RemoteGenerator strict(options(server.url("https")));
    const QString error = remote_error(strict, request(1));
    QVERIFY2(error.contains("certificate") && error.contains("not trusted"), qPrintable(error));
    QCOMPARE(int(server.requests().size()), 0);  // nothing was sent to it
    RemoteOptions allowed = options(server.url("https"));
    allowed.insecure = true;
    RemoteGenerator trusting(allowed);
    QCOMPARE(trusting.generate(request(1)).candidates[0].text, std::string("secret"));
  }

  void stopClosesTheStream() {
    std::atomic<bool> gone{false};
    FakeServer server([&](const json&, httplib::Response& res) { stream_forever(res, gone); });
    RemoteGenerator g(options(server.url()));
    std::atomic<bool> stop{false};
    SessionCallbacks cb;
    cb.on_delta = [&](const CandidateDelta& d) {
      if (d.tokens >= 3) stop = true;
    };
    const SessionResult r = g.generate(request(1), cb, &stop);
    QVERIFY(r.candidates[0].finish == FinishReason::Cancelled);
    QVERIFY(r.candidates[0].text.size() >= 3);  // the text so far is kept
    QTRY_VERIFY_WITH_TIMEOUT(gone.load(), 10000);  // the server saw the connection close
  }

  void budgetCutsAStreamKeepingItsText() {
    std::atomic<bool> gone{false};
    FakeServer server([&](const json&, httplib::Response& res) { stream_forever(res, gone); });
    RemoteGenerator g(options(server.url()));
    const SessionResult r = g.generate(request(1, 0.5));
    QVERIFY(r.candidates[0].finish == FinishReason::Budget);
    QVERIFY(!r.candidates[0].text.empty());
    QTRY_VERIFY_WITH_TIMEOUT(gone.load(), 10000);
  }

  void probeChecksTheModel() {
    FakeServer server([](const json&, httplib::Response& res) { answer(res, 500, "{}"); });
    const ServerInfo info = RemoteGenerator(options(server.url() + "/v1/")).probe();
    QCOMPARE(info.model, std::string("fake"));
    QCOMPARE(info.url, server.url());  // "/v1/" is not part of the base
    RemoteOptions other = options(server.url());
    other.model = "gpt-9";
    try {
      RemoteGenerator(other).probe();
      QFAIL("an unknown model was accepted");
    } catch (const RemoteError& e) {
      QVERIFY2(QString(e.what()).contains("'gpt-9'") && QString(e.what()).contains("fake"), e.what());
    }
  }
};

QTEST_GUILESS_MAIN(TestRemoteClient)
#include "test_remote_client.moc"
