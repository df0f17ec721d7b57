// A client that speaks HTTP by hand over a loopback socket: for the requests a well-behaved
// library will not send (trickled heads, conflicting framing, pipelining, half-closes,
// huge bodies), and for reading exactly what the server answers.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace specula::test {

class RawClient {
 public:
  explicit RawClient(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  }
  ~RawClient() { ::close(fd_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  // Sends all of `bytes`; false when the server closed or reset the connection first.
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(size_t(n));
    }
    return true;
  }
  // Shuts the sending side: the server sees the end of the request stream.
  void shut_write() { ::shutdown(fd_, SHUT_WR); }
  // Whatever has come within `ms` milliseconds of waiting for the first byte (and what
  // follows at once); empty when nothing came.
  std::string read_some(int ms) {
    std::string got;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return got;
    char buffer[65536];
    for (;;) {
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n <= 0) return got;
      got.append(buffer, size_t(n));
    }
  }
  // Everything the server sends until it closes the connection; nullopt if it is still
  // open after `seconds` (or reset it before anything came).
  std::optional<std::string> read_to_close(int seconds = 60) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    std::string got;
    char buffer[65536];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) <= 0) return std::nullopt;
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n == 0) return got;
      if (n < 0) return got.empty() ? std::nullopt : std::optional<std::string>(got);
      got.append(buffer, size_t(n));
    }
  }
  // Whether the server has closed the connection (checked without waiting).
  bool closed_by_server() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    char byte;
    return ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0 || (p.revents & (POLLERR | POLLHUP));
  }

 private:
  int fd_;
  bool connected_ = false;
};

// The status code of the last final response in `bytes` (1xx interim responses skipped);
// -1 when there is none.
inline int final_status(const std::string& bytes) {
  size_t at = 0;
  int status = -1;
  while ((at = bytes.find("HTTP/1.", at)) != std::string::npos) {
    if (at + 12 > bytes.size()) break;
    const int s = std::atoi(bytes.substr(at + 9, 3).c_str());
    if (s >= 200) return s;
    status = s;
    at += 12;
  }
  return status >= 200 ? status : -1;
}

// The body after the head of the first final response in `bytes`.
inline std::string body_of(const std::string& bytes) {
  size_t at = 0;
  for (;;) {
    const size_t head_end = bytes.find("\r\n\r\n", at);
    if (head_end == std::string::npos) return {};
    if (bytes.compare(at, 10, "HTTP/1.1 1") != 0) return bytes.substr(head_end + 4);
    at = head_end + 4;  // an interim response
  }
}

}  // namespace specula::test
