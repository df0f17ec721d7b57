// An HTTP/1.1 server that no client can hold: Specula's own, in place of cpp-httplib, whose
// thread-per-connection design let a client that sends one byte a second keep a thread for
// as long as it liked, and whose body limit did not count chunked bodies (docs/scale-out.md).
//
// One I/O thread owns every connection while its request is being read: it polls them all,
// so a slow or idle client costs a socket and a buffer, never a thread. Each request has a
// whole-head deadline and a whole-body deadline (not per byte); a keep-alive connection idle
// for longer than its timeout is closed, and the oldest idle ones are closed first when the
// connection limit is reached. Connections beyond the limits (in all, and from one address)
// get 503 at once. The head is shown to the service before the body is read, so a request
// the service refuses (no such route, no key) never has its body read.
//
// A whole request goes to the service: answered on the I/O thread when quick (it must not
// block), or on one of a fixed set of worker threads, which may stream the response and
// watch whether the client is still there. The connection then returns to the I/O thread
// for its next request, pipelined or not, in order.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "serve/http_request.h"

namespace specula::serve {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                                  // 0: any free port
  HttpLimits limits;
  std::chrono::milliseconds head_timeout{10000};   // a request's head, from its first byte
  std::chrono::milliseconds body_timeout{30000};   // its body, from the end of its head
  std::chrono::milliseconds idle_timeout{5000};    // a keep-alive connection between requests
  std::chrono::milliseconds write_timeout{30000};  // a response that makes no progress this long: the client is gone
  int max_connections = 512;                     // open at once, in all
  int max_connections_per_peer = 128;            // open at once from one address
  int workers = 8;                               // threads for requests the service answers slowly
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra fields, e.g. Retry-After
};

// A request answered on a worker thread: one whole response, or a chunked stream.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  // Sends a whole response. False: the client is gone.
  virtual bool respond(const HttpResponse& response) = 0;
  // Starts a streamed response (chunked; to an HTTP/1.0 client, ended by closing). `probe`
  // is data the stream's format lets the server send at any time without changing what the
  // client reads (an SSE comment): it is sent to tell a client that shut its side down
  // from one that is gone.
  virtual bool begin_stream(int status, const std::string& content_type, std::string probe,
                            std::vector<std::pair<std::string, std::string>> headers = {}) = 0;
  // Sends the next piece of the stream. False: the client is gone.
  virtual bool send(std::string_view data) = 0;
  // Ends the stream.
  virtual bool end_stream() = 0;
  // Whether the client is still there to read the answer (checked without waiting).
  virtual bool connected() = 0;
};

struct HttpService {
  // On the I/O thread, once the head is read and before the body is: a response refuses
  // the request (the body is never read and the connection closes); nullopt admits it.
  std::function<std::optional<HttpResponse>(const HttpRequest& head)> admit;
  // On the I/O thread, with the whole request: a response answers it now (it must not
  // block); nullopt hands it to a worker.
  std::function<std::optional<HttpResponse>(const HttpRequest& request)> quick;
  // On a worker thread.
  std::function<void(const HttpRequest& request, HttpExchange& exchange)> work;
  // The body of the server's own refusals (a malformed request, a limit, a timeout, no
  // worker free): the service's error format.
  std::function<HttpResponse(int status, const std::string& message)> error;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpService service);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the address; returns the port. Throws std::runtime_error when it cannot.
  int listen();
  // Serves until stop(). Call after listen().
  void serve();
  // Thread-safe, also before serve(): makes serve() return once the workers have finished.
  void stop();

  // Connections open now (for /health and tests).
  int connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The bytes of a whole response as the server writes them.
std::string serialize_response(const HttpResponse& response, bool keep_alive, bool head_only = false);

}  // namespace specula::serve
