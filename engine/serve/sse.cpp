#include "serve/sse.h"

namespace specula::serve {

std::string sse_event(std::string_view data) {
  std::string out = "data: ";
  out += data;
  out += "\n\n";
  return out;
}

void SseParser::feed(std::string_view bytes) {
  for (const char c : bytes) {
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') continue;  // the LF of a CRLF
    }
    if (c == '\r' || c == '\n') {
      after_cr_ = c == '\r';
      line(partial_);
      partial_.clear();
    } else {
      partial_ += c;
    }
  }
}

void SseParser::finish() {
  if (!partial_.empty()) line(partial_);
  partial_.clear();
  dispatch();
}

void SseParser::line(std::string_view text) {
  if (text.empty()) {
    dispatch();
    return;
  }
  if (text.front() == ':') return;  // a comment: keep-alive
  const size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (name != "data") return;  // event, id, retry: nothing a completion stream needs
  if (has_data_) data_ += '\n';
  data_ += value;
  has_data_ = true;
}

void SseParser::dispatch() {
  if (!has_data_) return;
  has_data_ = false;
  std::string data;
  data.swap(data_);
  on_event_(data);
}

}  // namespace specula::serve
