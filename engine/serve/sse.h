// Server-sent events (the WHATWG EventSource format), which OpenAI-compatible servers stream
// completions in: `data:` lines, blank-line dispatch, comments (`:` lines, the usual
// keep-alive), LF, CRLF or CR line ends, and bytes split anywhere by the network.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace specula::serve {

// One `data: ...` event as a server writes it.
std::string sse_event(std::string_view data);

class SseParser {
 public:
  // Called with the data of each complete event (its data lines joined by '\n').
  explicit SseParser(std::function<void(const std::string& data)> on_event) : on_event_(std::move(on_event)) {}

  // Feeds the next bytes of the stream, in pieces of any size.
  void feed(std::string_view bytes);
  // The stream ended: an event whose blank line never came is dispatched all the same.
  void finish();

 private:
  void line(std::string_view text);
  void dispatch();

  std::function<void(const std::string&)> on_event_;
  std::string partial_;        // the current line, not yet ended
  bool after_cr_ = false;      // the last byte was CR: a following LF belongs to it
  std::string data_;           // data of the event being read
  bool has_data_ = false;      // a data field was seen since the last dispatch
};

}  // namespace specula::serve
