#include "serve/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace specula::serve {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 64 << 10;       // bytes taken from a socket per recv
constexpr int kReadsPerTurn = 4;              // recvs per connection per poll turn: one client cannot starve the rest
// After a refusal, what the client still sends is read and dropped for a while, at most
// this much: a client that writes its whole body before it reads (most libraries) then
// gets the answer instead of a reset. It costs the server time on the wire, not memory.
constexpr size_t kDrainBytes = 16 << 20;
constexpr auto kDrainTime = std::chrono::milliseconds(2000);
constexpr size_t kTrimAfterBody = 256 << 10;  // a request body this large: give freed memory back to the system
constexpr int kBacklog = 512;

std::string header_block(int status, const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + http_reason(status) + "\r\n";
  for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
  return out;
}

// One client connection. Owned by the I/O thread while a request is read or a quick
// response written, by a worker while it answers.
struct Connection {
  enum class Phase {
    Reading,   // waiting for (the rest of) a request
    Writing,   // a response from the I/O thread is being written
    Draining,  // answered and shut for writing: reading what the client still sends, then closing
    Working,   // a worker answers it
  };

  Connection(int socket, std::string address, const HttpLimits& limits)
      : fd(socket), peer(std::move(address)), parser(limits) {}
  ~Connection() {
    if (fd >= 0) ::close(fd);
  }

  int fd;
  std::string peer;                 // the client's address
  RequestParser parser;             // bytes received, parsed into requests
  Phase phase = Phase::Reading;     // written by the I/O thread alone; Working: the rest is the worker's
  Clock::time_point deadline;       // when this phase gives up
  bool waiting = true;              // Reading, and no byte of the next request has come
  Clock::time_point idle_since;     // when it began waiting (the oldest idle connection goes first)
  bool peer_shut = false;           // the client shut its sending side (read returned 0)
  std::string out;                  // Writing: the response
  size_t out_sent = 0;              // Writing: bytes of `out` sent
  bool close_after = false;         // Writing: close (after draining) once `out` is sent
  size_t drained = 0;               // Draining: bytes read and dropped
  bool closed = false;              // to be removed from the I/O thread's list
};

// A worker's view of a connection: writes with a deadline, and tells a client that went
// away from one that only shut its sending side.
class WorkerExchange : public HttpExchange {
 public:
  WorkerExchange(Connection& c, const HttpRequest& request, std::chrono::milliseconds write_timeout)
      : c_(c), keep_alive_(request.keep_alive() && !c.peer_shut), http10_(request.minor_version == 0),
        head_only_(request.method == "HEAD"), write_timeout_(write_timeout) {}

  bool respond(const HttpResponse& response) override {
    if (started_) return false;
    started_ = true;
    finished_ = write(serialize_response(response, keep_alive_, head_only_));
    return finished_;
  }

  bool begin_stream(int status, const std::string& content_type, std::string probe,
                    std::vector<std::pair<std::string, std::string>> extra) override {
    if (started_) return false;
    started_ = true;
    streaming_ = true;
    probe_ = std::move(probe);
    if (http10_) keep_alive_ = false;  // an HTTP/1.0 stream ends when the connection does
    std::vector<std::pair<std::string, std::string>> headers = {{"Content-Type", content_type},
                                                                {"Cache-Control", "no-cache"}};
    headers.insert(headers.end(), extra.begin(), extra.end());
    if (!http10_) headers.emplace_back("Transfer-Encoding", "chunked");
    if (!keep_alive_) headers.emplace_back("Connection", "close");
    return write(header_block(status, headers) + "\r\n");
  }

  bool send(std::string_view data) override {
    if (!streaming_ || data.empty()) return !gone_;
    if (http10_) return write(data);
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    return write(std::string(size) + std::string(data) + "\r\n");
  }

  bool end_stream() override {
    if (!streaming_) return false;
    finished_ = http10_ ? !gone_ : write("0\r\n\r\n");
    return finished_;
  }

  bool connected() override {
    if (gone_) return false;
    pollfd p{c_.fd, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return true;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return !(gone_ = true);
    char byte;
    const ssize_t n = ::recv(c_.fd, &byte, 1, MSG_PEEK);
    if (n > 0) return true;  // the client's next request, pipelined
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) gone_ = true;
      return !gone_;
    }
    // The client shut its sending side: it may still read (a half-close) or be gone. Data
    // that changes nothing it reads tells them apart: a gone client's system answers it
    // with a reset, seen at the next check.
    c_.peer_shut = true;
    keep_alive_ = false;
    if (probed_) return true;
    probed_ = true;
    if (!started_ && !http10_) return write("HTTP/1.1 102 Processing\r\n\r\n");
    if (streaming_ && !probe_.empty()) return send(probe_);
    return !(gone_ = true);  // nothing can be sent harmlessly: taken as gone
  }

  // Whether the connection can carry the client's next request.
  bool reusable() const { return finished_ && !gone_ && keep_alive_ && !c_.peer_shut; }
  bool gone() const { return gone_; }
  bool started() const { return started_; }

 private:
  bool write(std::string_view bytes) {
    const auto deadline = Clock::now() + write_timeout_;
    size_t at = 0;
    while (!gone_ && at < bytes.size()) {
      const ssize_t n = ::send(c_.fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
      if (n > 0) {
        at += size_t(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        pollfd p{c_.fd, POLLOUT, 0};
        if (left > 0 && ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000))) >= 0) continue;
      }
      gone_ = true;  // an error, or no progress within the write timeout
    }
    return !gone_;
  }

  Connection& c_;
  bool keep_alive_;
  const bool http10_;
  const bool head_only_;
  const std::chrono::milliseconds write_timeout_;
  std::string probe_;
  bool started_ = false;    // a status line went out
  bool streaming_ = false;
  bool finished_ = false;   // the whole response went out
  bool probed_ = false;
  bool gone_ = false;
};

// Whether bytes have come on `fd` that this thread has not read yet: a connection whose next
// request is arriving is not idle, even before the poll loop has seen it.
bool has_unread_input(int fd) {
  int bytes = 0;
  return ::ioctl(fd, FIONREAD, &bytes) == 0 && bytes > 0;
}

struct WorkItem {
  std::unique_ptr<Connection> connection;
  HttpRequest request;
};

}  // namespace

std::string serialize_response(const HttpResponse& r, bool keep_alive, bool head_only) {
  std::vector<std::pair<std::string, std::string>> headers = {{"Content-Type", r.content_type},
                                                              {"Content-Length", std::to_string(r.body.size())}};
  if (!keep_alive) headers.emplace_back("Connection", "close");
  headers.insert(headers.end(), r.headers.begin(), r.headers.end());
  std::string out = header_block(r.status, headers) + "\r\n";
  if (!head_only) out += r.body;
  return out;
}

struct HttpServer::Impl {
  Impl(HttpServerOptions o, HttpService s) : options(std::move(o)), service(std::move(s)) {}

  const HttpServerOptions options;
  const HttpService service;
  int listen_fd = -1;
  int wake_fd = -1;                              // eventfd: returned connections, stop
  std::atomic<bool> stopping{false};
  std::atomic<int> open_count{0};

  // The I/O thread's own state.
  std::vector<std::unique_ptr<Connection>> connections;  // those not with a worker
  std::map<std::string, int> per_peer;                   // open connections per address, with workers' too

  // Shared with the workers.
  std::mutex mutex;
  std::condition_variable work_ready;
  std::deque<WorkItem> work;                             // handed over, not yet taken by a worker
  int busy_workers = 0;  // answering a request (counted from the start, not from each worker's first
                        // wait: a request that comes before the threads are scheduled is not refused)
  std::vector<std::unique_ptr<Connection>> returned;     // back from workers
  std::vector<std::thread> workers;

  void wake() const {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd, &one, sizeof one);
  }

  void io_loop();
  void accept_clients();
  void admit_connection(int fd, const std::string& peer);
  void take_returned();
  void on_readable(Connection& c);
  void advance(Connection& c);
  void on_complete(Connection& c);
  void on_timeout(Connection& c);
  void write_response(Connection& c, const HttpResponse& response, bool close);
  void flush(Connection& c);
  void linger(Connection& c);
  void drain(Connection& c);
  void close(Connection& c);
  void start_waiting(Connection& c);
  bool dispatch(std::unique_ptr<Connection>& c, HttpRequest request);
  void worker_loop();
};

HttpServer::HttpServer(HttpServerOptions options, HttpService service)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(service))) {
  impl_->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl_->wake_fd < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
}

HttpServer::~HttpServer() {
  stop();
  for (std::thread& t : impl_->workers) {
    if (t.joinable()) t.join();
  }
  if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
  ::close(impl_->wake_fd);
}

int HttpServer::listen() {
  const HttpServerOptions& o = impl_->options;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(o.port);
  const std::string where = o.host + ":" + port;
  if (::getaddrinfo(o.host.c_str(), port.c_str(), &hints, &found) != 0 || !found) {
    throw std::runtime_error("cannot listen on " + where + ": not an address of this machine");
  }
  int fd = -1;
  std::string why = "no address";
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, kBacklog) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) throw std::runtime_error("cannot listen on " + where + ": " + why);
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  impl_->listen_fd = fd;
  return ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

void HttpServer::serve() {
  if (impl_->listen_fd < 0) throw std::logic_error("HttpServer::serve before listen");
  for (int i = 0; i < impl_->options.workers; ++i) impl_->workers.emplace_back([this] { impl_->worker_loop(); });
  impl_->io_loop();
  {
    std::lock_guard lock(impl_->mutex);
    impl_->work.clear();  // requests no worker took: their connections close
  }
  impl_->work_ready.notify_all();
  for (std::thread& t : impl_->workers) t.join();
  impl_->workers.clear();
  impl_->returned.clear();
  impl_->connections.clear();
}

void HttpServer::stop() {
  {
    std::lock_guard lock(impl_->mutex);  // a worker between its check and its wait still sees it
    impl_->stopping = true;
  }
  impl_->work_ready.notify_all();
  impl_->wake();
}

int HttpServer::connections() const { return impl_->open_count.load(); }

void HttpServer::Impl::io_loop() {
  std::vector<pollfd> polled;
  while (!stopping) {
    polled.clear();
    polled.push_back({listen_fd, POLLIN, 0});
    polled.push_back({wake_fd, POLLIN, 0});
    auto next_deadline = Clock::now() + std::chrono::seconds(1);
    for (const auto& c : connections) {  // none is null here: erased at the end of each turn
      const short events = c->phase == Connection::Phase::Writing ? POLLOUT : POLLIN;
      polled.push_back({c->fd, events, 0});
      next_deadline = std::min(next_deadline, c->deadline);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_deadline - Clock::now()).count();
    const int ready = ::poll(polled.data(), polled.size(), static_cast<int>(std::clamp<long long>(wait + 1, 0, 1000)));
    if (ready < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    if (stopping) break;

    // Connections in the list now are those polled, in order; ones added below come after.
    const size_t polled_connections = polled.size() - 2;
    for (size_t i = 0; i < polled_connections; ++i) {
      if (!connections[i]) continue;  // handed to a worker during this turn
      Connection& c = *connections[i];
      const short revents = polled[i + 2].revents;
      if (revents == 0 || c.closed) continue;
      if (c.phase == Connection::Phase::Writing) {
        if (revents & (POLLERR | POLLHUP | POLLNVAL)) {
          close(c);
        } else {
          flush(c);
          advance(c);  // a pipelined request may wait behind the response
        }
      } else if (c.phase == Connection::Phase::Draining) {
        drain(c);
      } else {
        on_readable(c);
      }
    }
    const auto now = Clock::now();
    for (size_t i = 0; i < polled_connections; ++i) {
      if (!connections[i]) continue;
      Connection& c = *connections[i];
      if (!c.closed && c.phase != Connection::Phase::Working && now >= c.deadline) on_timeout(c);
    }
    if (polled[1].revents) {
      uint64_t count;
      [[maybe_unused]] const ssize_t n = ::read(wake_fd, &count, sizeof count);
      take_returned();
    }
    if (polled[0].revents) accept_clients();
    std::erase_if(connections, [](const std::unique_ptr<Connection>& c) { return c == nullptr || c->closed; });
  }
  for (auto& c : connections) {
    if (c) close(*c);
  }
  connections.clear();
}

void HttpServer::Impl::accept_clients() {
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&address), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // none left (EAGAIN), or out of descriptors: the backlog holds them
    char text[INET6_ADDRSTRLEN] = "?";
    if (address.ss_family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&address)->sin_addr, text, sizeof text);
    } else if (address.ss_family == AF_INET6) {
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&address)->sin6_addr, text, sizeof text);
    }
    admit_connection(fd, text);
  }
}

// A new connection: refused with 503 beyond the limits, after the oldest idle keep-alive
// connection has been closed to make room where one can be.
void HttpServer::Impl::admit_connection(int fd, const std::string& peer) {
  const int yes = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
  if (open_count >= options.max_connections) {
    Connection* oldest = nullptr;
    for (auto& c : connections) {
      if (c && !c->closed && c->phase == Connection::Phase::Reading && c->waiting && !c->parser.has_buffered() &&
          !has_unread_input(c->fd) && (!oldest || c->idle_since < oldest->idle_since)) {
        oldest = c.get();
      }
    }
    if (oldest) close(*oldest);
  }
  std::string refusal;
  if (open_count >= options.max_connections) {
    refusal = "the server has " + std::to_string(open_count.load()) + " connections open, its limit; retry later";
  } else if (per_peer[peer] >= options.max_connections_per_peer) {
    refusal = "this address has " + std::to_string(per_peer[peer]) + " connections open, the limit for one client; retry later";
  }
  if (!refusal.empty()) {
    const std::string bytes = serialize_response(service.error(503, refusal), false);
    [[maybe_unused]] const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(fd);
    return;
  }
  ++open_count;
  ++per_peer[peer];
  auto c = std::make_unique<Connection>(fd, peer, options.limits);
  start_waiting(*c);
  connections.push_back(std::move(c));
}

// Ready for the connection's next request: idle, or with a pipelined one already buffered.
void HttpServer::Impl::start_waiting(Connection& c) {
  c.phase = Connection::Phase::Reading;
  c.idle_since = Clock::now();
  c.waiting = !c.parser.has_buffered();
  c.deadline = c.idle_since + (c.waiting ? options.idle_timeout : options.head_timeout);
}

void HttpServer::Impl::take_returned() {
  std::vector<std::unique_ptr<Connection>> back;
  {
    std::lock_guard lock(mutex);
    back.swap(returned);
  }
  for (auto& c : back) {
    if (c->closed) {  // the client is gone
      close(*c);
      continue;
    }
    Connection& ref = *c;
    connections.push_back(std::move(c));
    if (ref.close_after) {
      linger(ref);
      continue;
    }
    start_waiting(ref);
    advance(ref);  // a pipelined request may have come with the last one
  }
}

void HttpServer::Impl::on_readable(Connection& c) {
  static thread_local std::string chunk(kReadChunk, '\0');
  // phase first: once a worker holds the connection (Working), only the worker touches the
  // rest of it; phase itself is written by this thread alone.
  for (int i = 0; i < kReadsPerTurn && c.phase == Connection::Phase::Reading && !c.closed; ++i) {
    const ssize_t n = ::recv(c.fd, chunk.data(), chunk.size(), 0);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) close(c);
      return;
    }
    if (n == 0) {  // the client shut its side: an unfinished request will never be whole
      c.peer_shut = true;
      close(c);
      return;
    }
    if (c.waiting) {
      c.waiting = false;
      c.deadline = Clock::now() + options.head_timeout;  // the whole head from its first byte, not per byte
    }
    c.parser.feed(std::string_view(chunk.data(), size_t(n)));
    advance(c);
  }
}

// Acts on what the parser has: refuses, admits the head, or answers a whole request, and
// goes on to the next pipelined request while the connection stays with the I/O thread.
void HttpServer::Impl::advance(Connection& c) {
  while (c.phase == Connection::Phase::Reading && !c.closed) {  // phase first: see on_readable
    switch (c.parser.parse()) {
      case RequestParser::State::NeedHead:
      case RequestParser::State::NeedBody: return;
      case RequestParser::State::Failed:
        write_response(c, service.error(c.parser.error().status, c.parser.error().message), true);
        return;
      case RequestParser::State::HeadRead: {
        HttpRequest head = c.parser.request();
        head.peer = c.peer;
        if (std::optional<HttpResponse> refusal = service.admit(head)) {
          write_response(c, *refusal, true);
          return;
        }
        c.deadline = Clock::now() + options.body_timeout;
        if (c.parser.continue_body() == RequestParser::State::NeedBody && head.expects_continue()) {
          const char* go_on = "HTTP/1.1 100 Continue\r\n\r\n";
          [[maybe_unused]] const ssize_t n = ::send(c.fd, go_on, std::strlen(go_on), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        continue;
      }
      case RequestParser::State::Complete: on_complete(c); continue;
    }
  }
}

void HttpServer::Impl::on_complete(Connection& c) {
  HttpRequest request = c.parser.take();
  request.peer = c.peer;
  const bool keep_alive = request.keep_alive();
  if (std::optional<HttpResponse> answer = service.quick(request)) {
    write_response(c, *answer, !keep_alive);
    return;
  }
  for (auto& owned : connections) {
    if (owned.get() != &c) continue;
    if (!dispatch(owned, std::move(request))) {
      write_response(c, service.error(503, "the server is busy: every worker is answering a request; retry later"),
                     !keep_alive);
    }
    return;
  }
}

// Hands a connection and its request to a free worker; false when none is free.
bool HttpServer::Impl::dispatch(std::unique_ptr<Connection>& c, HttpRequest request) {
  {
    std::lock_guard lock(mutex);
    if (busy_workers + static_cast<int>(work.size()) >= options.workers) return false;
    c->phase = Connection::Phase::Working;
    work.push_back(WorkItem{std::move(c), std::move(request)});
  }
  work_ready.notify_one();
  return true;
}

void HttpServer::Impl::worker_loop() {
  for (;;) {
    WorkItem item;
    {
      std::unique_lock lock(mutex);
      work_ready.wait(lock, [&] { return stopping || !work.empty(); });
      if (work.empty()) return;  // stopping
      item = std::move(work.front());
      work.pop_front();
      ++busy_workers;
    }
    Connection& c = *item.connection;
    WorkerExchange exchange(c, item.request, options.write_timeout);
    try {
      service.work(item.request, exchange);
    } catch (const std::exception& e) {
      if (!exchange.started()) exchange.respond(service.error(500, std::string("internal error: ") + e.what()));
    }
    if (!exchange.started()) exchange.respond(service.error(500, "internal error: the request got no answer"));
    c.closed = exchange.gone();
    c.close_after = !exchange.reusable();
    const bool large = item.request.body.size() >= kTrimAfterBody;
    item.request = HttpRequest();
    if (large) ::malloc_trim(0);
    {
      std::lock_guard lock(mutex);
      returned.push_back(std::move(item.connection));
      --busy_workers;
    }
    wake();
  }
}

void HttpServer::Impl::on_timeout(Connection& c) {
  if (c.phase == Connection::Phase::Reading && !c.waiting) {
    write_response(c, service.error(408, "the request did not arrive in time"), true);
  } else {
    close(c);  // idle past its keep-alive, a response the client does not read, or a drain done
  }
}

void HttpServer::Impl::write_response(Connection& c, const HttpResponse& response, bool close_after) {
  c.out = serialize_response(response, !close_after);
  c.out_sent = 0;
  c.close_after = close_after;
  c.phase = Connection::Phase::Writing;
  c.deadline = Clock::now() + options.write_timeout;
  flush(c);
}

void HttpServer::Impl::flush(Connection& c) {
  while (c.out_sent < c.out.size()) {
    const ssize_t n = ::send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_sent += size_t(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      return;  // the rest when the socket can take it
    } else {
      close(c);
      return;
    }
  }
  std::string().swap(c.out);
  if (c.close_after || c.peer_shut) {
    linger(c);
  } else {
    start_waiting(c);
  }
}

// Closing at once would let the system reset the connection over the unread rest of the
// request, and the client could lose the answer: shut our side, read and drop what still
// comes (kDrainBytes, kDrainTime), then close.
void HttpServer::Impl::linger(Connection& c) {
  ::shutdown(c.fd, SHUT_WR);
  c.phase = Connection::Phase::Draining;
  c.deadline = Clock::now() + kDrainTime;
  drain(c);
}

void HttpServer::Impl::drain(Connection& c) {
  static thread_local std::string sink(kReadChunk, '\0');
  for (int i = 0; i < kReadsPerTurn; ++i) {
    const ssize_t n = ::recv(c.fd, sink.data(), sink.size(), 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0 || (c.drained += size_t(n)) > kDrainBytes) {
      close(c);
      return;
    }
  }
}

void HttpServer::Impl::close(Connection& c) {
  if (c.closed && c.fd < 0) return;
  c.closed = true;
  if (c.fd >= 0) {
    ::close(c.fd);
    c.fd = -1;
    --open_count;
    if (--per_peer[c.peer] <= 0) per_peer.erase(c.peer);
  }
}

}  // namespace specula::serve
