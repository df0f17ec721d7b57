#include "serve/http_request.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>

namespace specula::serve {

namespace {

bool is_token_char(unsigned char c) {
  return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(char(c)) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_token_char(static_cast<unsigned char>(c)); });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A field value may hold visible characters, spaces and tabs, and bytes >= 0x80; never NUL,
// CR, LF or another control character (RFC 9110 5.5).
bool is_field_value(std::string_view s) {
  return std::none_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c < 0x20 && c != '\t') || c == 0x7f;
  });
}

// The end of the line that starts at `from`: the index of its LF, or npos when it has not
// all come. A CR is allowed only just before the LF.
size_t line_end(const std::string& buffer, size_t from) { return buffer.find('\n', from); }

std::string_view line_at(const std::string& buffer, size_t from, size_t lf) {
  std::string_view line(buffer.data() + from, lf - from);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// The value of a list header, split at commas, each element trimmed and lower-cased.
std::vector<std::string> list_elements(std::string_view value) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = value.find(',', start);
    const std::string_view element = trim(value.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (!element.empty()) out.push_back(ascii_lower(element));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

bool parse_decimal(std::string_view s, size_t& out) {
  if (s.empty() || s.size() > 18) return false;
  size_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + size_t(c - '0');
  }
  out = v;
  return true;
}

}  // namespace

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (n == name) return &v;
  }
  return nullptr;
}

bool HttpRequest::keep_alive() const {
  if (minor_version == 0) return false;
  for (const auto& [n, v] : headers) {
    if (n != "connection") continue;
    for (const std::string& option : list_elements(v)) {
      if (option == "close") return false;
    }
  }
  return true;
}

bool HttpRequest::expects_continue() const {
  const std::string* expect = header("expect");
  return minor_version == 1 && expect && ascii_lower(*expect) == "100-continue";
}

RequestParser::State RequestParser::fail(int status, std::string message) {
  error_ = HttpError{status, std::move(message)};
  return state_ = State::Failed;
}

RequestParser::State RequestParser::feed(std::string_view bytes) {
  if (state_ == State::Failed) return state_;
  buffer_.append(bytes);
  return parse();
}

RequestParser::State RequestParser::parse() {
  switch (state_) {
    case State::NeedHead: return parse_head();
    case State::NeedBody: return parse_body();
    default: return state_;
  }
}

RequestParser::State RequestParser::continue_body() {
  if (state_ != State::HeadRead) return state_;
  state_ = State::NeedBody;
  return parse_body();
}

HttpRequest RequestParser::take() {
  HttpRequest out = std::move(request_);
  request_ = HttpRequest();
  chunked_ = false;
  coding_.clear();
  content_length_ = 0;
  chunk_ = Chunk::Size;
  chunk_left_ = trailer_bytes_ = 0;
  state_ = State::NeedHead;
  return out;
}

RequestParser::State RequestParser::parse_head() {
  // Empty lines before a request line are ignored (RFC 9112 2.2).
  if (scanned_ == 0) {
    size_t skip = 0;
    while (skip < buffer_.size() && (buffer_[skip] == '\r' || buffer_[skip] == '\n')) ++skip;
    buffer_.erase(0, skip);
  }

  // The search for the blank line resumes where the last one stopped: a head trickled in
  // byte by byte is scanned once, not once per byte.
  const size_t end_of_head = [&] {
    for (;;) {
      const size_t lf = line_end(buffer_, scanned_);
      if (lf == std::string::npos) return std::string::npos;
      if (line_at(buffer_, scanned_, lf).empty()) return lf + 1;
      scanned_ = lf + 1;
      ++lines_;
    }
  }();
  if (end_of_head == std::string::npos) {
    const size_t first_lf = buffer_.find('\n');
    if (first_lf == std::string::npos && buffer_.size() > limits_.max_head_bytes) {
      return fail(414, "the request line is longer than " + std::to_string(limits_.max_head_bytes) + " bytes");
    }
    if (buffer_.size() > limits_.max_head_bytes) {
      return fail(431, "the request's headers are larger than " + std::to_string(limits_.max_head_bytes) + " bytes");
    }
    // Counting lines as they come refuses 100,000 headers before they are all buffered.
    if (lines_ > limits_.max_headers + 1) {
      return fail(431, "the request has more than " + std::to_string(limits_.max_headers) + " header fields");
    }
    return state_;
  }
  if (end_of_head > limits_.max_head_bytes) {
    return fail(431, "the request's headers are larger than " + std::to_string(limits_.max_head_bytes) + " bytes");
  }

  // The request line: method SP target SP version.
  size_t lf = line_end(buffer_, 0);
  const std::string_view line = line_at(buffer_, 0, lf);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return fail(400, "malformed request line");
  }
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = line.substr(sp2 + 1);
  if (!is_token(method) || target.empty() || !is_field_value(target) || target.find(' ') != std::string_view::npos ||
      target.find('\t') != std::string_view::npos) {
    return fail(400, "malformed request line");
  }
  if (version == "HTTP/1.1") {
    request_.minor_version = 1;
  } else if (version == "HTTP/1.0") {
    request_.minor_version = 0;
  } else if (version.substr(0, 5) == "HTTP/") {
    return fail(505, "HTTP version " + std::string(version.substr(5)) + " is not supported: send HTTP/1.1");
  } else {
    return fail(400, "malformed request line");
  }
  request_.method = method;
  request_.target = target;
  request_.path = target.substr(0, target.find('?'));

  // Header fields: name ":" OWS value OWS.
  for (size_t from = lf + 1;; from = lf + 1) {
    lf = line_end(buffer_, from);
    const std::string_view field = line_at(buffer_, from, lf);
    if (field.empty()) break;
    if (field.front() == ' ' || field.front() == '\t') return fail(400, "folded header lines are not accepted");
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos || !is_token(field.substr(0, colon))) {
      return fail(400, "malformed header field");
    }
    const std::string_view value = trim(field.substr(colon + 1));
    if (!is_field_value(value)) {
      return fail(400, "the header " + std::string(field.substr(0, colon)) + " holds a control character (NUL, CR or LF)");
    }
    if (static_cast<int>(request_.headers.size()) >= limits_.max_headers) {
      return fail(431, "the request has more than " + std::to_string(limits_.max_headers) + " header fields");
    }
    request_.headers.emplace_back(ascii_lower(field.substr(0, colon)), std::string(value));
  }
  buffer_.erase(0, end_of_head);
  scanned_ = lines_ = 0;
  return read_framing();
}

// How the body is framed (RFC 9112 6): chunked, a length, or none.
RequestParser::State RequestParser::read_framing() {
  int hosts = 0;
  std::vector<std::string> codings;
  std::vector<std::string> lengths;
  for (const auto& [name, value] : request_.headers) {
    if (name == "host") ++hosts;
    if (name == "transfer-encoding") {
      for (std::string& c : list_elements(value)) codings.push_back(std::move(c));
    }
    if (name == "content-length") {
      for (std::string& l : list_elements(value)) lengths.push_back(std::move(l));
      if (lengths.empty()) lengths.push_back("");
    }
    if (name == "content-encoding") {
      for (const std::string& coding : list_elements(value)) {
        if (coding == "identity") continue;
        if (!limits_.allow_compressed) {
          return fail(415, "compressed request bodies (Content-Encoding: " + coding + ") are not accepted: send it uncompressed");
        }
        if ((coding != "gzip" && coding != "deflate") || !coding_.empty()) {
          return fail(415, "the only content codings accepted are gzip and deflate, once");
        }
        coding_ = coding;
      }
    }
  }
  if (request_.minor_version == 1 && hosts != 1) {
    return fail(400, hosts == 0 ? "an HTTP/1.1 request needs a Host header" : "the request has more than one Host header");
  }
  if (!codings.empty() && !lengths.empty()) {
    return fail(400, "the request has both Content-Length and Transfer-Encoding: its length is ambiguous");
  }
  if (!codings.empty()) {
    if (request_.minor_version == 0) return fail(400, "Transfer-Encoding is not valid in HTTP/1.0");
    if (codings.size() != 1 || codings[0] != "chunked") {
      return fail(501, "the only transfer coding accepted is chunked");
    }
    chunked_ = true;
  } else if (!lengths.empty()) {
    for (const std::string& l : lengths) {
      if (l != lengths[0]) return fail(400, "the request has conflicting Content-Length values");
    }
    if (!parse_decimal(lengths[0], content_length_)) return fail(400, "Content-Length is not a number");
    if (content_length_ > limits_.max_body_bytes) {
      return fail(413, "the request body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
    }
  }
  return state_ = State::HeadRead;
}

RequestParser::State RequestParser::parse_body() {
  if (chunked_) return parse_chunked();
  const size_t take = std::min(buffer_.size(), content_length_ - request_.body.size());
  request_.body.append(buffer_, 0, take);
  buffer_.erase(0, take);
  return request_.body.size() == content_length_ ? body_complete() : state_ = State::NeedBody;
}

// chunk = size [ext] CRLF data CRLF; the last chunk has size 0, then trailers and CRLF.
RequestParser::State RequestParser::parse_chunked() {
  size_t at = 0;
  for (;;) {
    if (chunk_ == Chunk::Data) {
      const size_t take = std::min(buffer_.size() - at, chunk_left_);
      request_.body.append(buffer_, at, take);
      at += take;
      chunk_left_ -= take;
      if (chunk_left_ > 0) break;
      chunk_ = Chunk::DataEnd;
      continue;
    }
    const size_t lf = buffer_.find('\n', at);
    if (lf == std::string::npos) {
      if (buffer_.size() - at > 1024) return fail(400, "malformed chunked body: a chunk line is too long");
      break;
    }
    const std::string_view line = line_at(buffer_, at, lf);
    at = lf + 1;
    if (chunk_ == Chunk::DataEnd) {
      if (!line.empty()) return fail(400, "malformed chunked body: a chunk's data is longer than its size");
      chunk_ = Chunk::Size;
    } else if (chunk_ == Chunk::Size) {
      const std::string_view size = trim(line.substr(0, line.find(';')));
      if (size.empty() || size.size() > 15 ||
          !std::all_of(size.begin(), size.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); })) {
        return fail(400, "malformed chunked body: a chunk size is not a hexadecimal number");
      }
      chunk_left_ = std::stoull(std::string(size), nullptr, 16);
      if (chunk_left_ > limits_.max_body_bytes - request_.body.size()) {
        return fail(413, "the request body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
      }
      chunk_ = chunk_left_ == 0 ? Chunk::Trailers : Chunk::Data;
    } else {  // trailers: read and dropped, bounded like headers
      trailer_bytes_ += line.size() + 2;
      if (trailer_bytes_ > limits_.max_head_bytes) return fail(431, "the chunked body's trailers are too large");
      if (line.empty()) {
        buffer_.erase(0, at);
        return body_complete();
      }
    }
  }
  buffer_.erase(0, at);
  return state_ = State::NeedBody;
}

// The whole body has come: inflated where it was compressed, chunk by chunk, stopping the
// moment it passes the body limit or the ratio.
RequestParser::State RequestParser::body_complete() {
  if (coding_.empty()) return state_ = State::Complete;
  const size_t limit = std::min(limits_.max_body_bytes, request_.body.size() * limits_.max_inflate_ratio);
  z_stream z{};
  if (inflateInit2(&z, coding_ == "gzip" ? 15 + 16 : 15) != Z_OK) return fail(500, "cannot start inflating the body");
  z.next_in = reinterpret_cast<Bytef*>(request_.body.data());
  z.avail_in = static_cast<uInt>(request_.body.size());
  std::string out;
  char chunk[16384];
  int status = Z_OK;
  while (status == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    status = inflate(&z, Z_NO_FLUSH);
    out.append(chunk, sizeof chunk - z.avail_out);
    if (out.size() > limit) status = Z_BUF_ERROR;
    if (status == Z_BUF_ERROR && z.avail_in == 0 && out.size() <= limit) status = Z_DATA_ERROR;  // cut short
  }
  inflateEnd(&z);
  if (out.size() > limit) {
    return fail(413, "the request body inflates to more than " + std::to_string(limit) + " bytes (the body limit, or " +
                         std::to_string(limits_.max_inflate_ratio) + " times its compressed size)");
  }
  if (status != Z_STREAM_END) return fail(400, "the request body is not valid " + coding_ + " data");
  request_.body = std::move(out);
  return state_ = State::Complete;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const char* http_reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 102: return "Processing";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 421: return "Misdirected Request";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

}  // namespace specula::serve
