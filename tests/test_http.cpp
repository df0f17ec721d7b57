// The HTTP/1.1 request parser and the access policy of `serve`, without sockets: framing as
// RFC 9112 says (bytes split anywhere, chunked bodies, pipelining), and every refusal a
// hostile or broken client earns (smuggling's ambiguous framing, oversized heads and bodies
// counted after decoding, control characters, compressed bodies), then the Host and Origin
// checks against DNS rebinding and web pages.
#include <QtTest>

#include <string>

#include "gzip.h"
#include "serve/access_policy.h"
#include "serve/http_request.h"

using namespace specula::serve;
using specula::test::gzip;

namespace {

using State = RequestParser::State;

// Feeds `bytes` in pieces of `step` bytes, admitting the head when it is read; returns the
// final state.
State feed_all(RequestParser& p, const std::string& bytes, size_t step) {
  State s = p.state();
  for (size_t at = 0; at < bytes.size() && s != State::Failed && s != State::Complete; at += step) {
    s = p.feed(std::string_view(bytes).substr(at, step));
    if (s == State::HeadRead) s = p.continue_body();
  }
  return s;
}

int failure_of(const std::string& bytes, HttpLimits limits = {}) {
  RequestParser p(limits);
  return feed_all(p, bytes, bytes.size()) == State::Failed ? p.error().status : 0;
}

std::string gzip_request(const std::string& compressed) {
  return "POST / HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: " + std::to_string(compressed.size()) +
         "\r\n\r\n" + compressed;
}

}  // namespace

class TestHttp : public QObject {
  Q_OBJECT

 private slots:
  void requestsSplitAnywhereParseTheSame() {
    const std::string request =
        "POST /v1/completions?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\n"
        "Content-Length: 15\r\nX-Empty:\r\n\r\n{\"prompt\":\"hi\"}";
    for (size_t step : {size_t(1), size_t(2), size_t(7), request.size()}) {
      RequestParser p(HttpLimits{});
      QCOMPARE(feed_all(p, request, step), State::Complete);
      const HttpRequest r = p.take();
      QCOMPARE(r.method, std::string("POST"));
      QCOMPARE(r.target, std::string("/v1/completions?x=1"));
      QCOMPARE(r.path, std::string("/v1/completions"));
      QCOMPARE(r.body, std::string("{\"prompt\":\"hi\"}"));
      QCOMPARE(*r.header("content-type"), std::string("application/json"));
      QCOMPARE(*r.header("x-empty"), std::string());
      QVERIFY(r.keep_alive());
      QVERIFY(!p.has_buffered());
    }
  }

  void chunkedBodiesAreDecoded() {
    const std::string request =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n";
    for (size_t step : {size_t(1), size_t(3), request.size()}) {
      RequestParser p(HttpLimits{});
      QCOMPARE(feed_all(p, request, step), State::Complete);
      QCOMPARE(p.take().body, std::string("hello, world"));
    }
  }

  void pipelinedRequestsComeOneByOne() {
    RequestParser p(HttpLimits{});
    QCOMPARE(p.feed("GET /health HTTP/1.1\r\nHost: a\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: b\r\n\r\nGET /x"),
             State::HeadRead);
    QCOMPARE(p.continue_body(), State::Complete);
    QCOMPARE(p.take().path, std::string("/health"));
    QCOMPARE(p.parse(), State::HeadRead);
    QCOMPARE(p.continue_body(), State::Complete);
    QCOMPARE(p.take().path, std::string("/v1/models"));
    QCOMPARE(p.parse(), State::NeedHead);
    QVERIFY(p.has_buffered());
    QCOMPARE(p.feed(" HTTP/1.1\r\nHost: c\r\n\r\n"), State::HeadRead);
    QCOMPARE(p.continue_body(), State::Complete);
    QCOMPARE(p.take().path, std::string("/x"));
  }

  void theBodyLimitCountsDecodedBytes() {
    HttpLimits limits;
    limits.max_body_bytes = 1000;
    // a chunked body meets the same limit as a declared length, refused as it passes it
    std::string chunked = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 20; ++i) chunked += "64\r\n" + std::string(100, 'a') + "\r\n";
    RequestParser p(limits);
    QCOMPARE(feed_all(p, chunked, 50), State::Failed);
    QCOMPARE(p.error().status, 413);
    // a chunk that declares more than the limit is refused before its data comes
    QCOMPARE(failure_of("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10000\r\n", limits), 413);
    QCOMPARE(failure_of("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n", limits), 413);
    RequestParser at_limit(limits);
    QCOMPARE(feed_all(at_limit, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + std::string(1000, 'b'), 64),
             State::Complete);
  }

  void ambiguousFramingIsRefused() {
    QCOMPARE(failure_of("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
    QCOMPARE(failure_of("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"), 400);
    QCOMPARE(failure_of("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 6\r\n\r\n"), 400);
    QCOMPARE(failure_of("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"), 400);
    QCOMPARE(failure_of("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x10\r\n\r\n"), 400);
    QCOMPARE(failure_of("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 501);
    QCOMPARE(failure_of("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
    QCOMPARE(failure_of("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), 400);
    QCOMPARE(failure_of("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n"), 400);
    // the same length twice is one length
    RequestParser same(HttpLimits{});
    QCOMPARE(same.feed("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"), State::HeadRead);
    QCOMPARE(same.continue_body(), State::Complete);
  }

  void malformedHeadsAreRefused() {
    QCOMPARE(failure_of("GET /health HTTP/1.1\r\n\r\n"), 400);                        // no Host
    QCOMPARE(failure_of("GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);  // two
    QCOMPARE(failure_of(std::string("GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a") + '\0' + "b\r\n\r\n"), 400);
    QCOMPARE(failure_of("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n"), 400);       // bare CR
    QCOMPARE(failure_of("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n"), 400);    // folded
    QCOMPARE(failure_of("GET / HTTP/1.1\r\nHost : x\r\n\r\n"), 400);                   // space before ':'
    QCOMPARE(failure_of("GET  / HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
    QCOMPARE(failure_of("GET / HTTP/2.0\r\nHost: x\r\n\r\n"), 505);
    QCOMPARE(failure_of("GET / FTP/1.1\r\nHost: x\r\n\r\n"), 400);
    QCOMPARE(failure_of("POST / HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: 1\r\n\r\n"), 415);
  }

  void headsAreBoundedAsTheyCome() {
    HttpLimits limits;
    // 100,000 header fields: refused after the first hundred or so, not buffered whole
    std::string many = "GET / HTTP/1.1\r\nHost: x\r\n";
    RequestParser p(limits);
    State s = p.feed(many);
    int fed = 0;
    for (; fed < 100000 && s == State::NeedHead; ++fed) s = p.feed("X-A: b\r\n");
    QCOMPARE(s, State::Failed);
    QCOMPARE(p.error().status, 431);
    QVERIFY2(fed <= limits.max_headers + 2, qPrintable(QString::number(fed)));
    // one huge header, and a request line that never ends
    QCOMPARE(failure_of("GET / HTTP/1.1\r\nHost: x\r\nX-A: " + std::string(20000, 'a') + "\r\n\r\n"), 431);
    QCOMPARE(failure_of("GET /" + std::string(20000, 'a')), 414);
  }

  void compressedBodiesOnlyWhereAllowedAndBounded() {
    const std::string json = "{\"prompt\":\"" + std::string(5000, 'a') + "\"}";
    HttpLimits allowed;
    allowed.allow_compressed = true;
    QCOMPARE(failure_of(gzip_request(gzip(json))), 415);  // not allowed by default
    RequestParser p(allowed);
    QCOMPARE(feed_all(p, gzip_request(gzip(json)), 100), State::Complete);
    QCOMPARE(p.take().body, json);
    // a bomb: 48 KB of gzip holding 50 MB stops at the body limit
    QCOMPARE(failure_of(gzip_request(gzip(std::string(50 << 20, 'a'))), allowed), 413);
    // within the body limit but past the ratio: 2 KB that inflate to 1,000 KB
    HttpLimits ratio = allowed;
    ratio.max_inflate_ratio = 100;
    ratio.max_body_bytes = 4 << 20;
    QCOMPARE(failure_of(gzip_request(gzip(std::string(1000 << 10, 'a'))), ratio), 413);
    // cut short, or not gzip at all
    const std::string whole = gzip(json);
    QCOMPARE(failure_of(gzip_request(whole.substr(0, whole.size() / 2)), allowed), 400);
    QCOMPARE(failure_of(gzip_request("not gzip at all"), allowed), 400);
    QCOMPARE(failure_of("POST / HTTP/1.1\r\nHost: x\r\nContent-Encoding: br\r\nContent-Length: 1\r\n\r\nx", allowed), 415);
  }

  void keepAliveFollowsTheVersion() {
    RequestParser p(HttpLimits{});
    QCOMPARE(p.feed("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"), State::HeadRead);
    QCOMPARE(p.continue_body(), State::Complete);
    QVERIFY(!p.take().keep_alive());  // HTTP/1.0 keep-alive is not offered
    QCOMPARE(p.feed("GET / HTTP/1.1\r\nHost: x\r\nConnection: Keep-Alive, Close\r\n\r\n"), State::HeadRead);
    QCOMPARE(p.continue_body(), State::Complete);
    QVERIFY(!p.take().keep_alive());
  }

  void hostNames() {
    QCOMPARE(host_name("Example.COM:8080"), std::string("example.com"));
    QCOMPARE(host_name("[::1]:80"), std::string("::1"));
    QCOMPARE(host_name("localhost."), std::string("localhost"));
    QCOMPARE(host_name("a:b"), std::string());
    QCOMPARE(host_name("[::1"), std::string());
  }

  void hostsAgainstRebinding() {
    AccessPolicy policy{.bound_host = "127.0.0.1", .allowed_hosts = {"devbox.lan"}, .allowed_origins = {}};
    const auto verdict = [&](const std::string& host) {
      HttpRequest r;
      r.headers = {{"host", host}};
      const auto refusal = check_host(r, policy);
      return refusal ? refusal->status : 0;
    };
    QCOMPARE(verdict("127.0.0.1:8080"), 0);
    QCOMPARE(verdict("[::1]:8080"), 0);
    QCOMPARE(verdict("192.168.1.20"), 0);  // an address cannot be rebound
    QCOMPARE(verdict("localhost:8080"), 0);
    QCOMPARE(verdict("DevBox.lan:8080"), 0);
    QCOMPARE(verdict("attacker.example"), 403);
    QCOMPARE(verdict("localhost.attacker.example"), 403);
    QCOMPARE(verdict("bad host"), 400);
    policy.allowed_hosts = {"*"};
    QCOMPARE(verdict("attacker.example"), 0);
  }

  void originsOfWebPages() {
    AccessPolicy policy{.bound_host = "127.0.0.1", .allowed_hosts = {}, .allowed_origins = {"https://app.example"}};
    HttpRequest r;
    QVERIFY(!check_origin(r, policy));  // not a browser
    r.headers = {{"origin", "https://evil.example"}};
    QCOMPARE(check_origin(r, policy)->status, 403);
    QVERIFY(allowed_origin(r, policy).empty());
    r.headers = {{"origin", "https://APP.example"}};
    QVERIFY(!check_origin(r, policy));
    QCOMPARE(allowed_origin(r, policy), std::string("https://APP.example"));
    r.headers = {{"content-type", "text/plain"}};
    QVERIFY(!is_json_body(r));
    r.headers = {{"content-type", "Application/JSON; charset=utf-8"}};
    QVERIFY(is_json_body(r));
  }
};

QTEST_GUILESS_MAIN(TestHttp)
#include "test_http.moc"
