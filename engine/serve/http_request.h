// HTTP/1.1 requests as RFC 9112 frames them, read incrementally from a connection's bytes.
//
// The parser is strict where leniency lets one client harm the server or smuggle a request
// past it: the head (request line and headers) is bounded in bytes and in header count; a
// body's size is counted after transfer decoding, so a chunked body meets the same limit
// as one with a Content-Length, and is refused the moment it passes the limit; a request
// that gives both Content-Length and Transfer-Encoding, or two different lengths, is refused
// (request smuggling); header values holding NUL, CR or LF are refused; compressed bodies
// (Content-Encoding) are refused, or where allowed inflated within both the body limit and
// a ratio to their compressed size (a 48 KB gzip of 50 MB stops at the limit). Pipelined
// requests stay buffered for the next parse, so a connection's requests are answered in order.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specula::serve {

struct HttpLimits {
  size_t max_head_bytes = 16 << 10;  // request line and headers (and a chunked body's trailers)
  int max_headers = 100;             // header fields in one request
  size_t max_body_bytes = 1 << 20;   // after transfer (and content) decoding
  bool allow_compressed = false;     // gzip and deflate bodies inflated; else refused with 415
  size_t max_inflate_ratio = 100;    // an inflated body may be this many times its compressed size
};

struct HttpRequest {
  std::string method;                                        // "GET", "POST", ...
  std::string target;                                        // as sent: "/v1/completions?x=1"
  std::string path;                                          // the target without its query
  int minor_version = 1;                                     // HTTP/1.<minor_version>: 0 or 1
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed, in order
  std::string body;                                          // after transfer decoding
  std::string peer;                                          // the client's address, filled by the server

  // The first value of a header (name lower-case); nullptr: absent.
  const std::string* header(std::string_view name) const;
  // Whether the client keeps the connection open after this request (HTTP/1.1 unless
  // "Connection: close"; HTTP/1.0 keep-alive is not offered).
  bool keep_alive() const;
  // "Expect: 100-continue": the client waits for a 100 before it sends the body.
  bool expects_continue() const;
};

// Why a request cannot be read: the status to answer (after which the connection closes)
// and a message for the client.
struct HttpError {
  int status = 400;  // 400, 413, 414, 415, 431, 501, 505
  std::string message;
};

class RequestParser {
 public:
  enum class State {
    NeedHead,  // the head has not all come
    HeadRead,  // the head is complete (request() has method, path, headers): admit or refuse
    NeedBody,  // reading the body after continue_body()
    Complete,  // request() is whole; take() it, then the next request may be parsed
    Failed,    // error() says why; the connection must close
  };

  explicit RequestParser(HttpLimits limits) : limits_(limits) {}

  // Appends bytes received and parses as far as they go. Returns the state after them.
  State feed(std::string_view bytes);
  // Parses what is already buffered (after take(), for a pipelined request).
  State parse();
  // After HeadRead: go on to read the body.
  State continue_body();
  // After Complete: the request; the parser starts over on the bytes that followed it.
  HttpRequest take();

  State state() const { return state_; }
  const HttpRequest& request() const { return request_; }
  const HttpError& error() const { return error_; }
  // Bytes buffered and not yet parsed into a request: none means the connection is idle
  // between requests.
  bool has_buffered() const { return !buffer_.empty(); }

 private:
  State fail(int status, std::string message);
  State parse_head();
  State read_framing();
  State parse_body();
  State parse_chunked();
  State body_complete();

  HttpLimits limits_;
  State state_ = State::NeedHead;
  std::string buffer_;         // received and not yet consumed
  size_t scanned_ = 0;         // head bytes of buffer_ already searched for the blank line
  int lines_ = 0;              // head lines found so far
  HttpRequest request_;
  HttpError error_;
  bool chunked_ = false;       // the body is chunked; else it is content_length_ bytes
  std::string coding_;         // "gzip" or "deflate" when allowed and sent; empty: none
  size_t content_length_ = 0;
  enum class Chunk { Size, Data, DataEnd, Trailers } chunk_ = Chunk::Size;
  size_t chunk_left_ = 0;      // bytes of the current chunk still to come
  size_t trailer_bytes_ = 0;   // trailer bytes read, counted against the head limit
};

// ASCII lower case, as HTTP compares header names, list tokens and host names.
std::string ascii_lower(std::string_view s);

// "HTTP/1.1 STATUS REASON" text for a status code ("OK", "Bad Request", ...).
const char* http_reason(int status);

}  // namespace specula::serve
