#include "serve/remote_generator.h"

#include <curl/curl.h>
#include <signal.h>
#include <strings.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

#include "decode/prompt_style.h"
#include "serve/openai_api.h"
#include "serve/sse.h"

namespace specula::serve {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kPollMs = 20;                   // how often the stop flag and the budget are looked at
constexpr size_t kMaxBodyBytes = 64u << 20;   // a whole (not streamed) answer, at most
constexpr double kMaxRetryDelaySeconds = 30;  // whatever Retry-After says

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct sigaction current{};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  });
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// One HTTP exchange on a libcurl easy handle: the URL, the key, the TLS policy and the
// timeouts every request carries; what comes back is either streamed to `on_stream` (a
// 200 answer of type text/event-stream) or kept in `body`.
class Exchange {
 public:
  Exchange(const RemoteOptions& options, const std::string& url, std::string post_body, bool stream)
      : url_(url), post_(std::move(post_body)) {
    curl_ = curl_easy_init();
    if (!curl_) throw RemoteError("libcurl could not start a request");
    curl_easy_setopt(curl_, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, error_);
    curl_easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout_seconds * 1000));
    curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_TIME, static_cast<long>(std::max(1.0, options.idle_timeout_seconds)));
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, &Exchange::on_body);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, this);
    curl_easy_setopt(curl_, CURLOPT_HEADERFUNCTION, &Exchange::on_header);
    curl_easy_setopt(curl_, CURLOPT_HEADERDATA, this);
    if (options.insecure) {
      curl_easy_setopt(curl_, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(curl_, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (!options.api_key.empty()) headers_ = curl_slist_append(headers_, ("Authorization: Bearer " + options.api_key).c_str());
    headers_ = curl_slist_append(headers_, stream ? "Accept: text/event-stream" : "Accept: application/json");
    if (!post_.empty()) {
      headers_ = curl_slist_append(headers_, "Content-Type: application/json");
      headers_ = curl_slist_append(headers_, "Expect:");  // no 100-continue round trip
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, post_.c_str());
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(post_.size()));
    }
    curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers_);
  }
  ~Exchange() {
    curl_easy_cleanup(curl_);
    curl_slist_free_all(headers_);
  }
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  CURL* handle() const { return curl_; }
  const std::string& url() const { return url_; }
  const char* error_detail() const { return error_; }
  long status() const {
    long code = 0;
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &code);
    return code;
  }
  bool streamed() const { return streamed_; }
  const std::string& body() const { return body_; }
  // Seconds the server asked to wait (Retry-After); negative when it did not say.
  double retry_after() const { return retry_after_; }

  // Bytes of a 200 event stream; returning false aborts the exchange.
  std::function<bool(std::string_view)> on_stream;

 private:
  static size_t on_body(char* data, size_t size, size_t count, void* self) {
    auto& x = *static_cast<Exchange*>(self);
    const size_t n = size * count;
    if (!x.decided_) {
      x.decided_ = true;
      char* type = nullptr;
      curl_easy_getinfo(x.curl_, CURLINFO_CONTENT_TYPE, &type);
      x.streamed_ = x.status() == 200 && type && std::strstr(type, "text/event-stream") && x.on_stream;
    }
    if (x.streamed_) return x.on_stream(std::string_view(data, n)) ? n : 0;
    if (x.body_.size() + n > kMaxBodyBytes) return 0;
    x.body_.append(data, n);
    return n;
  }
  static size_t on_header(char* data, size_t size, size_t count, void* self) {
    auto& x = *static_cast<Exchange*>(self);
    const std::string_view line(data, size * count);
    constexpr std::string_view name = "retry-after:";
    if (line.size() > name.size() && strncasecmp(line.data(), name.data(), name.size()) == 0) {
      x.retry_after_ = std::atof(std::string(line.substr(name.size())).c_str());  // an HTTP date reads as 0
    }
    return size * count;
  }

  CURL* curl_ = nullptr;
  curl_slist* headers_ = nullptr;
  std::string url_;
  std::string post_;           // the request body; libcurl reads it in place
  char error_[CURL_ERROR_SIZE] = {};
  bool decided_ = false;       // the first body byte arrived: streamed_ is known
  bool streamed_ = false;
  std::string body_;
  double retry_after_ = -1.0;
};

// What a libcurl failure means for the user.
std::string transport_error(CURLcode code, const Exchange& x) {
  const std::string detail = *x.error_detail() ? x.error_detail() : curl_easy_strerror(code);
  switch (code) {
    case CURLE_COULDNT_CONNECT:
      return "cannot connect to " + x.url() + " (" + detail + "): is the server running, and is that its address?";
    case CURLE_COULDNT_RESOLVE_HOST: return "cannot find the host of " + x.url() + " (" + detail + ")";
    case CURLE_OPERATION_TIMEDOUT: return x.url() + " did not answer in time (" + detail + ")";
    case CURLE_PEER_FAILED_VERIFICATION:
      return "the TLS certificate of " + x.url() + " is not trusted (" + detail +
             "); allow invalid certificates only for a server you trust (--insecure)";
    case CURLE_SSL_CONNECT_ERROR: return "the TLS handshake with " + x.url() + " failed (" + detail + ")";
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE: return "the connection to " + x.url() + " broke (" + detail + ")";
    default: return "the request to " + x.url() + " failed (" + detail + ")";
  }
}

// An HTTP status other than 200, as a message.
std::string status_error(long status, const Exchange& x, const std::string& model) {
  const std::string said = error_message(x.body(), "no message");
  const std::string code = " (" + std::to_string(status) + "): " + said;
  if (status == 401 || status == 403) return "the server refused the API key" + code + " (check --api-key)";
  if (status == 404 && said.find("model") != std::string::npos) return "the server does not know the model '" + model + "'" + code;
  if (status == 404) return x.url() + " does not exist" + code + ": is this an OpenAI-compatible server?";
  if (status == 429 || status == 503) return "the server stayed busy" + code;
  return "the server failed" + code;
}

// One generate() call: its candidates, its requests in flight and those waiting to be sent.
class RemoteSession {
 public:
  RemoteSession(const RemoteOptions& options, const std::string& base, const std::string& model, ServerTraits& traits,
                const GenerationRequest& request, const SessionCallbacks& callbacks)
      : options_(options), base_(base), model_(model), traits_(traits), request_(request), callbacks_(callbacks),
        stops_(stops_of(request)), candidates_(static_cast<size_t>(request.n_candidates)), multi_(curl_multi_init()) {
    if (!multi_) throw RemoteError("libcurl could not start");
    for (size_t i = 0; i < candidates_.size(); ++i) candidates_[i].c.index = static_cast<int>(i);
  }
  ~RemoteSession() {
    transfers_.clear();  // each leaves the multi handle first
    curl_multi_cleanup(multi_);
  }

  SessionResult run(const std::atomic<bool>* stop);

 private:
  struct Slot {
    Candidate c;
    int chunks = 0;  // text chunks received: the token count when the server says nothing better
    int tokens = 0;  // tokens so far, as well as known
    // a chat answer:
    bool chat = false;
    std::string answer;              // as the server sent it
    std::optional<bool> continues;   // it continues the prefill (else it starts over); unknown yet
    bool stopped_here = false;       // a stop string ended it here, not on the server
  };
  struct Attempt {
    std::vector<int> candidates;  // choice j of the answer is candidate candidates[j]
    bool with_n = false;          // asks for candidates.size() choices in one request
    bool chat = false;            // asks /v1/chat/completions
    bool with_logprobs = true;
    int retry = 0;                // how many 429/503 answers came before this attempt
    Clock::time_point at;         // not before
  };
  struct Transfer {
    Transfer(CURLM* multi, Attempt a, std::unique_ptr<Exchange> x, std::function<void(const std::string&)> on_event)
        : multi(multi), attempt(std::move(a)), exchange(std::move(x)), parser(std::move(on_event)) {}
    ~Transfer() { curl_multi_remove_handle(multi, exchange->handle()); }
    CURLM* multi;
    Attempt attempt;
    std::unique_ptr<Exchange> exchange;
    SseParser parser;
    bool saw_done = false;
    std::exception_ptr failure;  // raised while reading; the exchange was aborted
  };

  static std::vector<std::string> stops_of(const GenerationRequest& request);
  std::string body_of(const Attempt& attempt) const;
  std::string url_of(const Attempt& attempt) const {
    return base_ + (attempt.chat ? "/v1/chat/completions" : "/v1/completions");
  }
  void start(Attempt attempt);
  void on_event(Transfer& t, const std::string& data);
  void apply(const Attempt& attempt, const CompletionUpdate& update);
  void settle(Slot& s, const std::string& text, std::optional<FinishReason> finish, const std::vector<int>& ids);
  std::string chat_text(Slot& s, const std::string& text, bool last);
  size_t first_stop(const std::string& text, size_t from) const;
  void close_ended_chats();
  void fall_back_to_chat(const Transfer& t);
  void finish(Slot& slot, FinishReason reason, const std::vector<int>& ids);
  void finish_rest(FinishReason reason);
  void on_done(Transfer& t, CURLcode code);
  void after_success(const Transfer& t);
  void after_refusal(const Transfer& t);
  void retry_later(const Transfer& t);
  SessionResult result() const;
  bool budget_over() const {
    return request_.budget_seconds > 0 && seconds_since(start_) >= request_.budget_seconds;
  }
  std::vector<int> open_of(const Attempt& a, bool only_untouched) const;

  const RemoteOptions& options_;
  const std::string& base_;
  const std::string& model_;
  ServerTraits& traits_;
  const GenerationRequest& request_;
  const SessionCallbacks& callbacks_;
  const std::vector<std::string> stops_;  // every stop of the request, the code stops included
  const Clock::time_point start_ = Clock::now();
  std::vector<Slot> candidates_;
  CURLM* multi_;
  std::vector<std::unique_ptr<Transfer>> transfers_;  // in flight
  std::vector<Attempt> waiting_;                      // to send at their time
  std::optional<SessionTotals> server_totals_;        // from an answer that carried every candidate
  int prompt_tokens_ = 0;
};

SessionResult RemoteSession::run(const std::atomic<bool>* stop) {
  Attempt first;
  for (const Slot& s : candidates_) first.candidates.push_back(s.c.index);
  first.with_n = traits_.accepts_n && candidates_.size() > 1;
  first.chat = traits_.chat;
  first.with_logprobs = traits_.accepts_logprobs;
  first.at = start_;
  if (first.with_n) {
    waiting_.push_back(first);
  } else {
    for (int i : first.candidates) waiting_.push_back(Attempt{{i}, false, first.chat, first.with_logprobs, 0, start_});
  }
  for (;;) {
    if (stop && stop->load()) {
      finish_rest(FinishReason::Cancelled);
      break;
    }
    if (budget_over()) {
      finish_rest(FinishReason::Budget);
      break;
    }
    const auto now = Clock::now();
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->at > now) {
        ++it;
        continue;
      }
      Attempt a = std::move(*it);
      it = waiting_.erase(it);
      start(std::move(a));
    }
    if (transfers_.empty() && waiting_.empty()) break;
    int running = 0;
    curl_multi_perform(multi_, &running);
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      const auto it = std::find_if(transfers_.begin(), transfers_.end(),
                                   [&](const auto& t) { return t->exchange->handle() == msg->easy_handle; });
      if (it == transfers_.end()) continue;
      const CURLcode code = msg->data.result;
      const std::unique_ptr<Transfer> done = std::move(*it);
      transfers_.erase(it);
      on_done(*done, code);
    }
    close_ended_chats();
    curl_multi_poll(multi_, nullptr, 0, kPollMs, nullptr);
  }
  return result();
}

std::vector<std::string> RemoteSession::stops_of(const GenerationRequest& request) {
  std::vector<std::string> stops = request.stop;
  if (request.code_stops) stops.insert(stops.end(), code_stop_strings().begin(), code_stop_strings().end());
  return stops;
}

std::string RemoteSession::body_of(const Attempt& attempt) const {
  CompletionRequest r;
  r.model = model_;
  r.prompt = request_.prompt;
  r.suffix = request_.suffix.value_or("");
  r.n = static_cast<int>(attempt.candidates.size());
  r.max_tokens = request_.max_new_tokens;
  r.temperature = request_.sampling.temperature;
  r.top_p = request_.sampling.top_p;
  r.top_k = request_.sampling.top_k;
  r.min_p = request_.sampling.min_p;
  r.seed = request_.sampling.seed + static_cast<uint64_t>(attempt.candidates.front());  // candidate i: seed + i
  r.stream = true;
  r.include_usage = true;
  if (attempt.with_logprobs) r.logprobs = 1;
  if (!attempt.chat) {
    r.stop = stops_;
    return dump(completion_request_json(r, attempt.with_n));
  }
  // a restated answer's opening fence must not end it: stops go only to a server that continues
  if (traits_.prefill == ServerTraits::Prefill::Continued) {
    r.stop = stops_;
    if (request_.code_stops) r.stop.push_back(kChatCodeStop);
  }
  const nlohmann::ordered_json messages =
      request_.code_stops ? chat_code_messages(request_.prompt)
                          : nlohmann::ordered_json::array(
                                {{{"role", "user"}, {"content", "Continue this text:\n\n" + request_.prompt}},
                                 {{"role", "assistant"}, {"content", request_.prompt}}});
  return dump(chat_request_json(r, messages, attempt.with_n));
}

void RemoteSession::start(Attempt attempt) {
  for (int i : attempt.candidates) candidates_[static_cast<size_t>(i)].chat = attempt.chat;
  auto exchange = std::make_unique<Exchange>(options_, url_of(attempt), body_of(attempt), true);
  auto t = std::make_unique<Transfer>(multi_, std::move(attempt), std::move(exchange), nullptr);
  Transfer& transfer = *t;
  transfer.parser = SseParser([this, &transfer](const std::string& data) { on_event(transfer, data); });
  transfer.exchange->on_stream = [&transfer](std::string_view bytes) {
    try {
      transfer.parser.feed(bytes);
      return true;
    } catch (...) {
      transfer.failure = std::current_exception();
      return false;
    }
  };
  curl_multi_add_handle(multi_, transfer.exchange->handle());
  transfers_.push_back(std::move(t));
}

void RemoteSession::on_event(Transfer& t, const std::string& data) {
  if (data == "[DONE]") {
    t.saw_done = true;
    return;
  }
  const json body = json::parse(data, nullptr, false);
  if (body.is_discarded()) throw RemoteError("the server sent a malformed event: " + data.substr(0, 200));
  try {
    apply(t.attempt, parse_completion_update(body));
  } catch (const std::runtime_error& e) {
    throw RemoteError(std::string("the server sent an event Specula cannot read: ") + e.what());
  }
}

void RemoteSession::apply(const Attempt& attempt, const CompletionUpdate& update) {
  for (const ChoiceUpdate& u : update.choices) {
    if (u.index < 0 || u.index >= static_cast<int>(attempt.candidates.size())) {
      throw RemoteError("the server sent choice " + std::to_string(u.index) + " of a request for " +
                        std::to_string(attempt.candidates.size()));
    }
    Slot& s = candidates_[static_cast<size_t>(attempt.candidates[static_cast<size_t>(u.index)])];
    if (s.c.finish != FinishReason::Running) continue;
    // Specula's own server continues a final assistant message
    if (u.from_specula && traits_.prefill == ServerTraits::Prefill::Unknown) traits_.prefill = ServerTraits::Prefill::Continued;
    s.c.logprobs.insert(s.c.logprobs.end(), u.logprobs.begin(), u.logprobs.end());
    if (!u.text.empty()) ++s.chunks;
    s.tokens = u.tokens >= 0 ? u.tokens : (!s.c.logprobs.empty() ? static_cast<int>(s.c.logprobs.size()) : s.chunks);
    if (u.accepted >= 0) s.c.accepted = u.accepted;
    if (u.proposed >= 0) s.c.proposed = u.proposed;
    settle(s, u.text, u.finish, u.token_ids);
  }
  if (update.totals && attempt.candidates.size() == candidates_.size()) server_totals_ = update.totals;
  if (update.prompt_tokens >= 0) prompt_tokens_ = update.prompt_tokens;
}

// Text that reached candidate `s`, and its end if it ended: a chat answer's text goes through
// chat_text() first.
void RemoteSession::settle(Slot& s, const std::string& text, std::optional<FinishReason> finish_reason,
                           const std::vector<int>& ids) {
  const std::string shown = s.chat ? chat_text(s, text, finish_reason.has_value()) : text;
  if (!shown.empty()) {
    s.c.text += shown;
    if (callbacks_.on_delta) {
      callbacks_.on_delta(CandidateDelta{
          .index = s.c.index, .text = shown, .tokens = s.tokens, .accepted = s.c.accepted, .proposed = s.c.proposed});
    }
  }
  if (s.stopped_here) {
    finish(s, FinishReason::Stop, {});  // the server's ids run past the stop
  } else if (finish_reason) {
    finish(s, *finish_reason, ids);
  }
}

// The text of a chat answer that the candidate shows, given `text` more of it (`last`: the
// answer is complete): nothing while its first line does not say whether it continues the
// prefill; then, continuing, the answer as it comes, up to the first stop string; starting
// over, nothing until it is complete, then the completion taken from its code block.
std::string RemoteSession::chat_text(Slot& s, const std::string& text, bool last) {
  s.answer += text;
  std::string more;
  if (!s.continues) {
    s.continues = traits_.prefill == ServerTraits::Prefill::Continued
                      ? std::optional<bool>(true)
                      : chat_answer_continues(request_.prompt, s.answer, last);
    if (!s.continues) return {};
    if (traits_.prefill == ServerTraits::Prefill::Unknown) {
      traits_.prefill = *s.continues ? ServerTraits::Prefill::Continued : ServerTraits::Prefill::Ignored;
    }
    more = *s.continues ? s.answer : std::string();
  } else if (*s.continues) {
    more = text;
  }
  if (!*s.continues) {
    if (!last) return {};
    more = completion_from_chat_answer(request_.prompt, s.answer);
  }
  const size_t before = s.c.text.size();
  const size_t stop = first_stop(s.c.text + more, before);
  if (stop == std::string::npos) return more;
  s.stopped_here = true;
  if (stop < before) {  // the stop began in text already shown
    s.c.text.resize(stop);
    return {};
  }
  return more.substr(0, stop - before);
}

// Where the first stop string (the closing fence among them) ends a candidate's `text`, of
// which the part before `from` was already searched; npos: nowhere.
size_t RemoteSession::first_stop(const std::string& text, size_t from) const {
  size_t first = std::string::npos;
  auto look = [&](const std::string& stop) {
    if (stop.empty()) return;
    const size_t at = text.find(stop, from >= stop.size() ? from - stop.size() + 1 : 0);
    first = std::min(first, at);
  };
  for (const std::string& stop : stops_) look(stop);
  if (request_.code_stops) look(kChatCodeStop);
  return first;
}

// A chat request whose candidates all ended here (at stop strings the server was not sent)
// is closed, which ends the server's work on it.
void RemoteSession::close_ended_chats() {
  std::erase_if(transfers_, [&](const std::unique_ptr<Transfer>& t) {
    const auto here = [&](int i) { return candidates_[static_cast<size_t>(i)].stopped_here; };
    return t->attempt.chat && open_of(t->attempt, false).empty() &&
           std::any_of(t->attempt.candidates.begin(), t->attempt.candidates.end(), here);
  });
}

void RemoteSession::finish(Slot& s, FinishReason reason, const std::vector<int>& ids) {
  s.c.finish = reason;
  s.c.seconds = seconds_since(start_);
  if (!ids.empty()) {
    s.c.tokens = ids;
  } else {
    s.c.tokens.assign(static_cast<size_t>(s.tokens), -1);  // the count is known, the ids are not
  }
  if (callbacks_.on_finished) callbacks_.on_finished(s.c);
}

void RemoteSession::finish_rest(FinishReason reason) {
  transfers_.clear();  // closing the connections stops the server's work on them
  waiting_.clear();
  for (Slot& s : candidates_)
    if (s.c.finish == FinishReason::Running) settle(s, {}, reason, {});  // a chat's answer so far, as it is
}

// Candidates of `a` still running; `only_untouched`: of those, the ones no text reached.
std::vector<int> RemoteSession::open_of(const Attempt& a, bool only_untouched) const {
  std::vector<int> open;
  for (int i : a.candidates) {
    const Slot& s = candidates_[static_cast<size_t>(i)];
    if (s.c.finish == FinishReason::Running && (!only_untouched || s.chunks == 0)) open.push_back(i);
  }
  return open;
}

void RemoteSession::on_done(Transfer& t, CURLcode code) {
  if (t.failure) std::rethrow_exception(t.failure);
  if (code != CURLE_OK) throw RemoteError(transport_error(code, *t.exchange));
  const long status = t.exchange->status();
  if (status == 200) return after_success(t);
  const bool no_such_path = status == 405 || (status == 404 && error_message(t.exchange->body(), "").find("model") ==
                                                                      std::string::npos);
  if (no_such_path && !t.attempt.chat && options_.api == RemoteApi::Auto) return fall_back_to_chat(t);
  if (no_such_path && t.attempt.chat) {
    const std::string said = " (" + std::to_string(status) + ": " + error_message(t.exchange->body(), "no message") + ")";
    if (options_.api == RemoteApi::Auto) {
      throw RemoteError(base_ + " has neither /v1/completions nor /v1/chat/completions" + said +
                        ": is this an OpenAI-compatible server?");
    }
    throw RemoteError(t.exchange->url() + " does not exist" + said + ": the server does not speak chat (--remote-api auto)");
  }
  // llama.cpp's server answers n > 1 with 500 "Only one completion choice is allowed"
  if (status == 400 || status == 422 || (status == 500 && t.attempt.with_n)) return after_refusal(t);
  if ((status == 429 || status == 503) && t.attempt.retry < options_.max_retries) return retry_later(t);
  throw RemoteError(status_error(status, *t.exchange, model_));
}

// A server without /v1/completions: the attempt again, and every later one, through chat.
void RemoteSession::fall_back_to_chat(const Transfer& t) {
  if (request_.suffix) {
    throw RemoteError(t.exchange->url() + " does not exist (" + std::to_string(t.exchange->status()) +
                      "), and a chat cannot fill in the middle: this server cannot complete with a suffix");
  }
  traits_.chat = true;
  Attempt again = t.attempt;
  again.chat = true;
  again.at = Clock::now();
  waiting_.push_back(again);
}

void RemoteSession::after_success(const Transfer& t) {
  if (!t.exchange->streamed()) {  // the server answered with one object instead of a stream
    const json body = json::parse(t.exchange->body(), nullptr, false);
    if (body.is_discarded()) throw RemoteError("the server answered with something that is not JSON");
    apply(t.attempt, parse_completion_update(body));
  }
  if (t.attempt.candidates.size() == 1 && candidates_.size() > 1) traits_.accepts_n = false;  // the fallback works
  if (t.exchange->streamed() && !t.saw_done && !open_of(t.attempt, false).empty()) {
    throw RemoteError("the stream from " + t.exchange->url() + " ended before the completion did (no [DONE])");
  }
  // A server that ignores n answers one choice: the others go out one request each.
  const std::vector<int> missing = open_of(t.attempt, true);
  if (t.attempt.with_n && !missing.empty()) {
    traits_.accepts_n = false;
    for (int i : missing) waiting_.push_back(Attempt{{i}, false, t.attempt.chat, t.attempt.with_logprobs, 0, Clock::now()});
  }
  for (int i : open_of(t.attempt, false)) {  // [DONE] came but no finish_reason: the choice ended
    Slot& s = candidates_[static_cast<size_t>(i)];
    if (s.chunks > 0 || !t.attempt.with_n) settle(s, {}, FinishReason::Stop, {});
  }
}

// Refused: first without n (one request per candidate), then without logprobs, then it is the request.
void RemoteSession::after_refusal(const Transfer& t) {
  const Attempt& a = t.attempt;
  if (a.with_n) {
    for (int i : a.candidates) waiting_.push_back(Attempt{{i}, false, a.chat, a.with_logprobs, 0, Clock::now()});
    return;
  }
  if (a.with_logprobs) {
    traits_.accepts_logprobs = false;
    Attempt again = a;
    again.with_logprobs = false;
    again.at = Clock::now();
    waiting_.push_back(again);
    return;
  }
  throw std::invalid_argument("the server refused the request (" + std::to_string(t.exchange->status()) +
                              "): " + error_message(t.exchange->body(), "no message"));
}

void RemoteSession::retry_later(const Transfer& t) {
  const double asked = t.exchange->retry_after();
  const double delay = std::min(kMaxRetryDelaySeconds, asked >= 0 ? asked : 0.5 * std::pow(2.0, t.attempt.retry));
  if (request_.budget_seconds > 0 && seconds_since(start_) + delay >= request_.budget_seconds) {
    throw RemoteError(status_error(t.exchange->status(), *t.exchange, model_) + "; a retry in " +
                      std::to_string(static_cast<int>(std::ceil(delay))) + " s would pass the budget");
  }
  Attempt again = t.attempt;
  ++again.retry;
  again.at = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(delay));
  waiting_.push_back(again);
}

SessionResult RemoteSession::result() const {
  SessionResult r;
  for (const Slot& s : candidates_) r.candidates.push_back(s.c);
  SessionTotals& t = r.totals;
  if (server_totals_) {
    t = *server_totals_;
  } else {
    t.prompt_tokens = prompt_tokens_;
    for (const Candidate& c : r.candidates) {
      t.generated_tokens += static_cast<int>(c.tokens.size());
      t.accepted += c.accepted;
      t.proposed += c.proposed;
    }
  }
  t.wall_seconds = seconds_since(start_);  // as the user waited: network and queue included
  return r;
}

std::string strip_base(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (url.size() >= 3 && url.compare(url.size() - 3, 3, "/v1") == 0) url.resize(url.size() - 3);
  return url;
}

}  // namespace

const char* remote_api_name(RemoteApi api) {
  switch (api) {
    case RemoteApi::Auto: return "auto";
    case RemoteApi::Completions: return "completions";
    case RemoteApi::Chat: return "chat";
  }
  return "auto";
}

RemoteGenerator::RemoteGenerator(RemoteOptions options)
    : options_(std::move(options)), base_(strip_base(options_.url)), model_(options_.model) {
  traits_.chat = options_.api == RemoteApi::Chat;
  if (base_.rfind("http://", 0) != 0 && base_.rfind("https://", 0) != 0) {
    throw std::invalid_argument("the server URL must start with http:// or https://, got '" + options_.url + "'");
  }
  global_init();
}

ServerInfo RemoteGenerator::probe(double timeout_seconds) {
  Exchange x(options_, base_ + "/v1/models", {}, false);
  curl_easy_setopt(x.handle(), CURLOPT_TIMEOUT_MS, static_cast<long>(std::max(0.001, timeout_seconds) * 1000));
  const CURLcode code = curl_easy_perform(x.handle());
  if (code != CURLE_OK) throw RemoteError(transport_error(code, x));
  if (x.status() != 200) throw RemoteError(status_error(x.status(), x, options_.model));
  const json body = json::parse(x.body(), nullptr, false);
  ServerInfo info;
  info.url = base_;
  const auto data = body.is_object() ? body.find("data") : body.end();
  if (data == body.end() || !data->is_array()) throw RemoteError(x.url() + " did not answer with a list of models");
  for (const json& m : *data)
    if (m.is_object() && m.contains("id") && m["id"].is_string()) info.models.push_back(m["id"].get<std::string>());
  if (options_.model.empty()) {
    if (info.models.empty()) throw RemoteError(base_ + " serves no model");
    info.model = info.models.front();
  } else {
    info.model = options_.model;
    if (std::find(info.models.begin(), info.models.end(), info.model) == info.models.end()) {
      std::string listed;
      for (const auto& m : info.models) listed += (listed.empty() ? "" : ", ") + m;
      throw RemoteError("the server does not serve the model '" + info.model + "'; it lists: " + listed);
    }
  }
  model_ = info.model;
  info.summary = info.model + " at " + base_;
  return info;
}

SessionResult RemoteGenerator::generate(const GenerationRequest& request, const SessionCallbacks& callbacks,
                                        const std::atomic<bool>* stop) {
  if (request.prompt.empty() && !request.allow_empty_prompt) throw std::invalid_argument("the prompt is empty");
  if (request.n_candidates < 1 || request.n_candidates > kMaxCandidates) {
    throw std::invalid_argument("the number of candidates must be between 1 and " + std::to_string(kMaxCandidates));
  }
  if (request.max_new_tokens < 1) throw std::invalid_argument("max new tokens must be at least 1");
  if (!(request.budget_seconds >= 0) || std::isinf(request.budget_seconds)) {
    throw std::invalid_argument("the time budget must be a positive number of seconds (0: none)");
  }
  // the completions endpoint would read the chat's special tokens as plain text
  if (request.chat_prefix) throw std::invalid_argument("a server is prompted in the raw style only (no chat prompts)");
  if (model_.empty()) probe(request.budget_seconds > 0 ? std::min(options_.connect_timeout_seconds, request.budget_seconds)
                                                       : options_.connect_timeout_seconds);
  if (traits_.chat && request.suffix) {
    throw std::invalid_argument("the server is asked through chat, and a chat cannot fill in the middle");
  }
  RemoteSession session(options_, base_, model_, traits_, request, callbacks);
  return session.run(stop);
}

std::string RemoteGenerator::describe() const {
  return "server " + base_ + (model_.empty() ? std::string() : " (model " + model_ + ")") +
         (traits_.chat ? ", through chat" : "");
}

json RemoteGenerator::post(const std::string& path, const json& body) {
  Exchange x(options_, base_ + path, dump(body), false);
  const CURLcode code = curl_easy_perform(x.handle());
  if (code != CURLE_OK) throw RemoteError(transport_error(code, x));
  if (x.status() != 200) throw RemoteError(status_error(x.status(), x, model_));
  json answer = json::parse(x.body(), nullptr, false);
  if (!answer.is_object()) throw RemoteError(x.url() + " did not answer with a JSON object");
  return answer;
}

std::vector<int> RemoteGenerator::tokenize(const std::string& text, bool add_special) {
  if (model_.empty()) probe(options_.connect_timeout_seconds);
  json answer;
  try {  // llama.cpp reads content and add_special, vLLM prompt and add_special_tokens
    answer = post("/tokenize", {{"content", text}, {"add_special", add_special}, {"prompt", text},
                                {"add_special_tokens", add_special}, {"model", model_}});
  } catch (const RemoteError& e) {
    if (std::string_view(e.what()).find("(404)") == std::string_view::npos) throw;
    throw RemoteError(base_ + " has no /tokenize endpoint (llama.cpp's and vLLM's servers have one), so its token ids "
                      "are not known here: " + e.what());
  }
  const auto tokens = answer.find("tokens");
  if (tokens == answer.end() || !tokens->is_array()) throw RemoteError(base_ + "/tokenize did not answer with a list of tokens");
  std::vector<int> ids;
  for (const json& t : *tokens) {
    if (!t.is_number_integer()) throw RemoteError(base_ + "/tokenize answered with a token that is not an id");
    ids.push_back(t.get<int>());
  }
  return ids;
}

TokenScores RemoteGenerator::score(std::span<const int> ids) {
  if (ids.size() < 2) throw std::invalid_argument("scoring needs at least 2 tokens");
  if (model_.empty()) probe(options_.connect_timeout_seconds);
  const json answer = post("/v1/completions", {{"model", model_},
                                               {"prompt", std::vector<int>(ids.begin(), ids.end())},
                                               {"max_tokens", 0},
                                               {"echo", true},
                                               {"logprobs", 0},
                                               {"temperature", 0}});
  const std::string missing = base_ + " returns no log-probabilities of the prompt (echo with logprobs), which scoring "
                              "a text needs: Specula's serve and vLLM return them, llama.cpp's server does not";
  const json* logprobs = nullptr;
  if (auto choices = answer.find("choices"); choices != answer.end() && choices->is_array() && !choices->empty() &&
                                             (*choices)[0].is_object()) {
    if (auto l = (*choices)[0].find("logprobs"); l != (*choices)[0].end() && l->is_object()) logprobs = &*l;
  }
  if (!logprobs || !logprobs->contains("token_logprobs") || !(*logprobs)["token_logprobs"].is_array()) throw RemoteError(missing);
  const json& values = (*logprobs)["token_logprobs"];
  if (values.size() < ids.size()) throw RemoteError(missing + " (" + std::to_string(values.size()) + " values for " +
                                                    std::to_string(ids.size()) + " tokens)");
  TokenScores scores;
  for (size_t i = 1; i < ids.size(); ++i) {
    if (!values[i].is_number()) throw RemoteError(missing + " (position " + std::to_string(i) + " has none)");
    scores.nll.push_back(-values[i].get<double>());
  }
  return scores;
}

}  // namespace specula::serve
