// `specula-cli serve` against hostile and broken clients, over real sockets on loopback:
// bodies bounded after decoding (a 20 MB chunked body, a compressed one), bodies of refused
// requests never read, trickling clients that cannot hold the server, 100,000 headers, web
// pages (a cross-origin text/plain POST, a rebinding Host), values that vanish in single
// precision, ambiguous framing, pipelining, HTTP/1.0, half-closed clients and NUL bytes.
// The server's memory is read from /proc around the suite, and /health must show no KV
// block left held. Every hostile loop is bounded in count and time.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "gzip.h"
#include "raw_http.h"
#include "serve_process.h"
#include "shared_data.h"

using namespace specula::test;
using nlohmann::json;

namespace {

// Resident memory of a process, in MiB, from /proc.
double resident_mib(qint64 pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1.0;
}

std::string completion_head(const std::string& extra) {
  return "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra + "\r\n";
}

bool is_error_object(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  return j.is_object() && j.contains("error") && j["error"]["message"].is_string();
}

}  // namespace

class TestServeHostile : public QObject {
  Q_OBJECT

  std::unique_ptr<ServeProcess> server;  // stories260K
  std::unique_ptr<ServeProcess> keyed;   // the same with --api-key
  double idle_mib = 0;

  int port() const { return server->port(); }

  // One request on a fresh connection; everything the server answers until it closes.
  std::string exchange(int to_port, const std::string& request, bool shut_write = false) {
    RawClient client(to_port);
    if (!client.connected()) return {};
    client.send(request);
    if (shut_write) client.shut_write();
    return client.read_to_close(60).value_or("");
  }

  void checkNoBlockLeft() {
    const json h = health(port());
    QVERIFY2(h.is_object(), "the server stopped answering /health");
    QCOMPARE(h["kv_blocks_left"].get<int>(), 0);
    QCOMPARE(h["failed"].get<int>(), 0);
  }

 private slots:
  void initTestCase() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    const QStringList model{"-m", QString::fromStdString(bin), "--tokenizer", QString::fromStdString(tok), "--device", "cpu"};
    server = std::make_unique<ServeProcess>(model + QStringList{"--max-queue", "4"});
    QVERIFY2(server->started(), qPrintable(server->errors()));
    keyed = std::make_unique<ServeProcess>(model + QStringList{"--api-key", "s3cret"});
    QVERIFY2(keyed->started(), qPrintable(keyed->errors()));
    // warm: one completion, so that the idle figure includes what serving always holds
    const std::string ok = exchange(port(), completion_head("Content-Length: 32\r\nConnection: close\r\n") +
                                                R"({"prompt":"Once","max_tokens":8})");
    QCOMPARE(final_status(ok), 200);
    idle_mib = resident_mib(server->pid());
    QVERIFY(idle_mib > 0);
  }

  void chunkedBodiesMeetTheBodyLimit() {
    // 20 MB and then 64 MB sent in 64 KiB chunks against the default 1 MiB limit: answered
    // 413 as the body passes the limit, while the client is still sending; the server then
    // drops at most 16 MiB more (so that a client that reads only after writing gets the
    // answer) and closes.
    for (const int chunks : {320, 1024}) {
      RawClient client(port());
      QVERIFY(client.connected());
      std::atomic<int> sent{0};
      std::atomic<int> sent_when_answered{-1};
      std::thread sender([&] {
        client.send(completion_head("Transfer-Encoding: chunked\r\n"));
        const std::string chunk = "10000\r\n" + std::string(0x10000, 'a') + "\r\n";
        while (sent < chunks && client.send(chunk)) ++sent;
      });
      const auto start = std::chrono::steady_clock::now();
      const std::string first = client.read_some(30000);
      sent_when_answered = sent.load();
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      sender.join();
      QCOMPARE(final_status(first), 413);
      QVERIFY2(is_error_object(body_of(first)), first.c_str());
      QVERIFY2(sent_when_answered < chunks, "the answer came only after the whole body was sent");
      if (chunks == 1024) QVERIFY2(sent < chunks, "the server read all 64 MB");
      qInfo("%d chunks: answered 413 after %d chunks of 64 KiB, %.3f s; %d sent in all", chunks, sent_when_answered.load(),
            seconds, sent.load());
    }
    QVERIFY2(resident_mib(server->pid()) - idle_mib < 64, "the server's memory grew by 64 MiB or more");
  }

  void compressedBodiesAreRefused() {
    // 48 KB of gzip that inflates to 50 MB of prompt
    const std::string body = gzip(R"({"prompt":")" + std::string(50 << 20, 'a') + R"("})");
    QVERIFY(body.size() < 100000);
    const std::string answer =
        exchange(port(), completion_head("Content-Encoding: gzip\r\nContent-Length: " + std::to_string(body.size()) + "\r\n") + body);
    QCOMPARE(final_status(answer), 415);
    QVERIFY2(is_error_object(body_of(answer)), answer.c_str());
    QVERIFY2(resident_mib(server->pid()) - idle_mib < 64, "the server's memory grew by 64 MiB or more");
  }

  void refusedRequestsHaveTheirBodiesUnread() {
    // With a key: a body sent to /health (GET only) and to /v1/ without the key is refused
    // from the head, and the server does not read the 300 MB behind it.
    for (const std::string target : {"/health", "/v1/completions"}) {
      RawClient client(keyed->port());
      QVERIFY(client.connected());
      client.send("POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n");
      const std::string head = client.read_some(10000);  // answered before any byte of the body is sent
      QCOMPARE(final_status(head), target == "/health" ? 405 : 401);
      int sent = 0;
      const std::string chunk = "100000\r\n" + std::string(0x100000, 'a') + "\r\n";
      for (; sent < 300 && client.send(chunk); ++sent) {
      }
      QVERIFY2(sent < 300, "the server read 300 MB of a refused request");
    }
    QVERIFY(resident_mib(keyed->pid()) > 0);
    QVERIFY2(resident_mib(keyed->pid()) < 200, "the keyed server holds 200 MiB or more");
  }

  void tricklingClientsCannotHoldTheServer() {
    // 40 clients that each send a header byte every 100 ms for 3 s: more than the server
    // has workers (--max-queue 4: 9). A normal request is served meanwhile, and they are
    // still connected (not yet at the head deadline) when it is.
    constexpr int kTricklers = 40;
    std::vector<std::unique_ptr<RawClient>> tricklers;
    for (int i = 0; i < kTricklers; ++i) {
      tricklers.push_back(std::make_unique<RawClient>(port()));
      QVERIFY(tricklers.back()->connected());
    }
    std::atomic<bool> done{false};
    std::thread trickle([&] {
      const std::string head = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + std::string(100, 'a');
      for (size_t i = 0; i < 30 && !done; ++i) {
        for (auto& t : tricklers) t->send(head.substr(i, 1));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
    const auto start = std::chrono::steady_clock::now();
    QCOMPARE(health(port())["status"].get<std::string>(), std::string("ok"));
    const std::string answer = exchange(port(), completion_head("Content-Length: 32\r\nConnection: close\r\n") +
                                                     R"({"prompt":"Once","max_tokens":8})");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int open = 0;
    for (auto& t : tricklers) open += !t->closed_by_server();
    done = true;
    trickle.join();
    QCOMPARE(final_status(answer), 200);
    QCOMPARE(open, kTricklers);
    qInfo("a completion among %d trickling clients answered in %.3f s", kTricklers, seconds);
  }

  void slowHeadsEndWithATimeout() {
    // a head that never ends is answered 408 at the whole-head deadline, not kept open
    RawClient client(port());
    client.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    const std::optional<std::string> answer = client.read_to_close(60);
    QVERIFY2(answer, "the server kept a stalled head open");
    QCOMPARE(final_status(*answer), 408);
    QVERIFY(is_error_object(body_of(*answer)));
  }

  void hundredThousandHeadersAreRefused() {
    RawClient client(port());
    std::atomic<int> sent{0};
    std::thread sender([&] {
      client.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n");
      const std::string block = [] {
        std::string b;
        for (int i = 0; i < 1000; ++i) b += "X-A: b\r\n";
        return b;
      }();
      for (int i = 0; i < 100 && client.send(block); ++i) sent += 1000;
    });
    const std::optional<std::string> answer = client.read_to_close(30);
    sender.join();
    QVERIFY(answer);
    QCOMPARE(final_status(*answer), 431);
    QVERIFY(is_error_object(body_of(*answer)));
  }

  void webPagesAreRefused() {
    // a page's "simple" cross-origin POST, which a browser sends without asking first
    const std::string body = R"({"prompt":"Once","max_tokens":4})";
    std::string answer = exchange(port(), "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://evil.example\r\n"
                                          "Content-Type: text/plain\r\nContent-Length: " +
                                              std::to_string(body.size()) + "\r\n\r\n" + body);
    QCOMPARE(final_status(answer), 403);
    QVERIFY(is_error_object(body_of(answer)));
    // text/plain without an Origin: still not JSON
    answer = exchange(port(), "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    QCOMPARE(final_status(answer), 415);
    // DNS rebinding: the page's own name in Host
    answer = exchange(port(), "GET /v1/models HTTP/1.1\r\nHost: rebind.attacker.example:8080\r\n\r\n");
    QCOMPARE(final_status(answer), 403);
    QVERIFY(is_error_object(body_of(answer)));
    answer = exchange(port(), "GET /v1/models HTTP/1.1\r\nHost: localhost:8080\r\nConnection: close\r\n\r\n");
    QCOMPARE(final_status(answer), 200);
  }

  void valuesAreCheckedInSinglePrecision() {
    for (const char* body : {R"({"prompt":"hi","top_p":1e-300})", R"({"prompt":"hi","top_p":1e-300,"stream":true})",
                             R"({"prompt":"hi","temperature":1e39})"}) {
      const std::string b(body);
      const std::string answer = exchange(port(), completion_head("Content-Length: " + std::to_string(b.size()) + "\r\n"
                                                                  "Connection: close\r\n") + b);
      QCOMPARE(final_status(answer), 400);
      QVERIFY2(is_error_object(body_of(answer)), answer.c_str());
    }
  }

  void ambiguousFramingIsRefused() {
    const std::string both = exchange(port(), completion_head("Content-Length: 4\r\nTransfer-Encoding: chunked\r\n") +
                                                  "0\r\n\r\n");
    QCOMPARE(final_status(both), 400);
    const std::string two = exchange(port(), completion_head("Content-Length: 2\r\nContent-Length: 30\r\n") + "{}");
    QCOMPARE(final_status(two), 400);
    std::string nul = "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer s3cret";
    nul += '\0';
    nul += "junk\r\n\r\n";
    QCOMPARE(final_status(exchange(keyed->port(), nul)), 400);
  }

  void pipelinedRequestsAreAnsweredInOrder() {
    RawClient client(port());
    const std::string body = R"({"prompt":"Once","max_tokens":4,"temperature":0})";
    client.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + completion_head("Content-Length: " + std::to_string(body.size()) + "\r\n") +
                body + "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    const std::optional<std::string> all = client.read_to_close(60);
    QVERIFY(all);
    const size_t first = all->find("\"status\":\"ok\""), second = all->find("\"text_completion\""),
                 third = all->find("\"object\":\"list\"");
    QVERIFY2(first != std::string::npos && second != std::string::npos && third != std::string::npos, all->c_str());
    QVERIFY(first < second && second < third);
  }

  void http10IsAnsweredAndClosed() {
    RawClient client(port());
    client.send("GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    const std::optional<std::string> answer = client.read_to_close(10);  // closed, not kept alive
    QVERIFY2(answer, "an HTTP/1.0 connection was kept open");
    QCOMPARE(final_status(*answer), 200);
    QVERIFY(answer->find("Connection: close\r\n") != std::string::npos);
    QVERIFY(answer->find("eep-Alive") == std::string::npos);
  }

  void halfClosedClientsAreAnswered() {
    const std::string body = R"({"prompt":"Once","max_tokens":16,"temperature":0})";
    const std::string answer =
        exchange(port(), completion_head("Content-Length: " + std::to_string(body.size()) + "\r\n") + body, true);
    QCOMPARE(final_status(answer), 200);
    const json j = json::parse(body_of(answer), nullptr, false);
    QVERIFY2(j.is_object() && j["choices"].size() == 1, answer.c_str());
    QVERIFY(!j["choices"][0]["text"].get<std::string>().empty());
  }

  // --max-connections 4: four idle keep-alive connections make room for a fifth (the
  // oldest is closed), four connections in the middle of their requests do not (503);
  // --max-connections-per-client bounds one address alone.
  void connectionLimits() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    const QStringList model{"-m", QString::fromStdString(bin), "--tokenizer", QString::fromStdString(tok), "--device", "cpu"};
    ServeProcess limited(model + QStringList{"--max-connections", "4"});
    QVERIFY2(limited.started(), qPrintable(limited.errors()));
    const std::string health_request = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    std::vector<std::unique_ptr<RawClient>> idle;
    for (int i = 0; i < 4; ++i) {
      idle.push_back(std::make_unique<RawClient>(limited.port()));
      idle.back()->send(health_request);
      QCOMPARE(final_status(idle.back()->read_some(10000)), 200);  // answered, kept alive
    }
    RawClient fifth(limited.port());
    fifth.send(health_request);
    QCOMPARE(final_status(fifth.read_some(10000)), 200);
    QTRY_VERIFY_WITH_TIMEOUT(idle.front()->closed_by_server(), 5000);  // the oldest idle one made room
    for (size_t i = 1; i < idle.size(); ++i) QVERIFY(!idle[i]->closed_by_server());

    std::vector<std::unique_ptr<RawClient>> busy;  // four requests whose heads have not all come
    idle.clear();
    for (int i = 0; i < 4; ++i) {
      busy.push_back(std::make_unique<RawClient>(limited.port()));
      busy.back()->send("GET /health HTTP/1.1\r\n");
    }
    QTRY_COMPARE_WITH_TIMEOUT(health(limited.port()).is_null(), true, 5000);  // no room, not even for /health
    RawClient refused(limited.port());
    refused.send(health_request);
    const std::optional<std::string> answer = refused.read_to_close(10);
    QVERIFY(answer);
    QCOMPARE(final_status(*answer), 503);
    QVERIFY(is_error_object(body_of(*answer)));
    busy.clear();

    ServeProcess per_client(model + QStringList{"--max-connections-per-client", "2"});
    QVERIFY2(per_client.started(), qPrintable(per_client.errors()));
    RawClient a(per_client.port()), b(per_client.port());
    a.send("GET /health HTTP/1.1\r\n");
    b.send("GET /health HTTP/1.1\r\n");
    RawClient c(per_client.port());
    c.send(health_request);
    const std::optional<std::string> third = c.read_to_close(10);
    QVERIFY(third);
    QCOMPARE(final_status(*third), 503);
  }

  void cleanupTestCase() {
    if (!server) return;
    checkNoBlockLeft();
    const double after = resident_mib(server->pid());
    qInfo("server memory: %.1f MiB idle, %.1f MiB after the suite", idle_mib, after);
    QVERIFY2(after - idle_mib < 64, "the server's memory did not come back within 64 MiB of idle");
    QVERIFY(server->stopsCleanly());
    QVERIFY(keyed->stopsCleanly());
  }
};

QTEST_GUILESS_MAIN(TestServeHostile)
#include "test_serve_hostile.moc"
