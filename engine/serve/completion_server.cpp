#include "serve/completion_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "model/tokenizer.h"
#include "serve/openai_api.h"
#include "serve/sse.h"

namespace specula::serve {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kPollInterval = std::chrono::milliseconds(20);  // how soon a closed connection is noticed
constexpr int kSpareHandlers = 8;       // HTTP threads beyond the queue: health checks and quick 503s
constexpr int kRetryAfterSeconds = 1;   // what a 503 suggests
constexpr time_t kKeepAliveSeconds = 2; // an idle keep-alive connection holds a thread this long
constexpr int kBacklog = 256;           // connections the kernel holds until they are accepted

// One accepted request, shared by the HTTP thread that answers it and the engine thread
// that generates it.
struct Job {
  CompletionRequest request;
  GenerationRequest generation;
  std::vector<int> prompt_ids;          // the encoded prompt, BOS included (for token texts)
  std::string id;                       // "cmpl-..."
  long long created = 0;                // Unix time
  Clock::time_point queued;
  std::atomic<bool> cancel{false};      // the session's stop flag: the client went away

  std::mutex mutex;                     // guards everything below
  std::condition_variable changed;
  std::vector<CandidateDelta> deltas;   // streamed text not yet written
  std::vector<Candidate> finished;      // ended candidates not yet written
  std::optional<SessionResult> result;  // the session's end
  std::string failure;                  // why the session threw; empty: it did not
  double queue_seconds = 0.0;           // time spent waiting for the engine
  bool done = false;                    // result or failure is set
};

// Each token's text as the completion shows it, decoded in order after the prompt.
std::vector<std::string> token_texts(const Tokenizer& tokenizer, const std::vector<int>& prompt_ids,
                                     const std::vector<int>& tokens) {
  IncrementalDecoder decoder(tokenizer, prompt_ids);
  std::vector<std::string> texts;
  for (size_t i = 0; i < tokens.size(); ++i) {
    texts.push_back(decoder.push(std::span<const int>(&tokens[i], 1)));
    if (i + 1 == tokens.size()) texts.back() += decoder.finish();
  }
  return texts;
}

json logprobs_json(const Tokenizer& tokenizer, const Job& job, const Candidate& c) {
  if (!job.request.logprobs) return nullptr;
  const std::vector<std::string> texts = token_texts(tokenizer, job.prompt_ids, c.tokens);
  json offsets = json::array();
  size_t offset = 0;
  for (const std::string& t : texts) {
    offsets.push_back(offset);
    offset += t.size();
  }
  // only the sampled tokens: the decoder keeps no alternatives
  return {{"tokens", texts}, {"token_logprobs", c.logprobs}, {"top_logprobs", nullptr}, {"text_offset", offsets}};
}

// Specula's per-choice extension for a candidate that has ended.
json finished_extension(const Candidate& c) {
  return {{"finish", finish_reason_name(c.finish)},
          {"tokens", c.tokens.size()},
          {"token_ids", c.tokens},
          {"accepted", c.accepted},
          {"proposed", c.proposed}};
}

json choice_json(const Tokenizer& tokenizer, const Job& job, const Candidate& c, bool whole_text) {
  return {{"index", c.index},
          {"text", whole_text ? c.text : std::string()},
          {"logprobs", logprobs_json(tokenizer, job, c)},
          {"finish_reason", openai_finish_reason(c.finish)},
          {"specula", finished_extension(c)}};
}

json delta_choice_json(const CandidateDelta& d) {
  return {{"index", d.index},
          {"text", d.text},
          {"logprobs", nullptr},
          {"finish_reason", nullptr},
          {"specula", {{"tokens", d.tokens}, {"accepted", d.accepted}, {"proposed", d.proposed}}}};
}

json usage_json(const SessionTotals& t) {
  return {{"prompt_tokens", t.prompt_tokens},
          {"completion_tokens", t.generated_tokens},
          {"total_tokens", t.prompt_tokens + t.generated_tokens}};
}

std::string bearer_token(const httplib::Request& req) {
  const std::string header = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  return header.compare(0, prefix.size(), prefix) == 0 ? header.substr(prefix.size()) : std::string();
}

// Compares without leaking, through timing, how much of the key was right.
bool same_key(const std::string& given, const std::string& expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) diff |= given[i] ^ expected[i % expected.size()];
  return diff == 0;
}

void answer_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  if (error.status == 503 || error.status == 429) res.set_header("Retry-After", std::to_string(kRetryAfterSeconds));
  res.set_content(dump(error_json(error)), "application/json");
}

// cpp-httplib 0.11 listens with a backlog of 5 connections: a burst of clients overflows it
// and sees its connections reset. Listening again on the bound socket only widens the queue.
class HttpServer : public httplib::Server {
 public:
  bool widen_backlog(int backlog) { return ::listen(svr_sock_, backlog) == 0; }
};

uint64_t random_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

struct CompletionServer::Impl {
  Impl(LocalGenerator& g, ServerOptions o) : generator(g), options(std::move(o)), started(std::time(nullptr)) {}

  LocalGenerator& generator;
  const ServerOptions options;
  const long long started;
  HttpServer http;
  std::atomic<long> next_id{1};

  mutable std::mutex mutex;                // guards the queue, the running job and the counters
  std::condition_variable queue_changed;
  std::deque<std::shared_ptr<Job>> queue;  // waiting, oldest first
  std::shared_ptr<Job> running;            // the job the engine thread generates; null: none
  ServerStats counters;
  bool stopping = false;
  bool listening = false;                  // serve() is on its way into, or in, the accept loop
  std::atomic<bool> listen_returned{false};

  const Tokenizer& tokenizer() const { return *generator.target().tokenizer; }
  int context() const { return generator.target().config.context_length; }

  void routes();
  std::shared_ptr<Job> accept(const std::string& body);
  void enqueue(const std::shared_ptr<Job>& job);
  void abandon(const std::shared_ptr<Job>& job);
  void engine_loop();
  void generate(Job& job);
  bool stream(Job& job, httplib::DataSink& sink);
  bool respond(Job& job, httplib::DataSink& sink);
  json completion_json(Job& job) const;
  json extension_json(const Job& job) const;
  json health_json() const;
};

CompletionServer::CompletionServer(LocalGenerator& generator, ServerOptions options)
    : impl_(std::make_unique<Impl>(generator, std::move(options))) {
  if (!generator.target().tokenizer) throw std::invalid_argument("the model has no tokenizer: name one (--tokenizer)");
  if (impl_->options.max_queue < 0) throw std::invalid_argument("the queue length cannot be negative");
  if (impl_->options.model_name.empty()) throw std::invalid_argument("the served model needs a name");
  impl_->routes();
}

CompletionServer::~CompletionServer() { stop(); }

int CompletionServer::listen() {
  const ServerOptions& o = impl_->options;
  const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port <= 0) {
    throw std::runtime_error("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                             " (address in use, or not an address of this machine)");
  }
  impl_->http.widen_backlog(kBacklog);
  return port;
}

void CompletionServer::serve() {
  std::thread engine([this] { impl_->engine_loop(); });
  bool stopped_already;
  {
    std::lock_guard lock(impl_->mutex);
    stopped_already = impl_->stopping;
    impl_->listening = !stopped_already;
  }
  if (!stopped_already) impl_->http.listen_after_bind();
  impl_->listen_returned = true;
  stop();
  engine.join();
}

void CompletionServer::stop() {
  bool listening;
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
    listening = impl_->listening;
    for (const auto& job : impl_->queue) job->cancel = true;
    if (impl_->running) impl_->running->cancel = true;
  }
  impl_->queue_changed.notify_all();
  // httplib ignores a stop that comes before its accept loop runs, and the loop would then
  // never end (a SIGTERM right after "listening" was printed, while the engine thread
  // measured the cost model, left the server running): wait until it runs, then stop it.
  while (listening && !impl_->http.is_running() && !impl_->listen_returned) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  impl_->http.stop();
}

void CompletionServer::Impl::routes() {
  const int handlers = options.max_queue + 1 + kSpareHandlers;
  http.new_task_queue = [handlers] { return new httplib::ThreadPool(static_cast<size_t>(handlers)); };
  http.set_payload_max_length(options.max_body_bytes);
  http.set_keep_alive_timeout(kKeepAliveSeconds);

  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    const std::string key = bearer_token(req);
    if (!key.empty() && same_key(key, options.api_key)) return httplib::Server::HandlerResponse::Unhandled;
    answer_error(res, ApiError(401, key.empty() ? "an API key is required: send \"Authorization: Bearer KEY\""
                                                : "the API key is not valid",
                               {}, "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib raises itself (no route, body too large, malformed HTTP) get OpenAI's error object.
  http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message = "HTTP error " + std::to_string(res.status);
    if (res.status == 404) message = "no such endpoint: " + req.method + " " + req.path;
    if (res.status == 413) message = "the request body is larger than " + std::to_string(options.max_body_bytes) + " bytes";
    if (res.status == 400) message = "malformed HTTP request";
    answer_error(res, ApiError(res.status, message));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr failure) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    answer_error(res, ApiError(500, "internal error: " + what));
  });
  http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    std::fprintf(stderr, "%s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
  });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump(health_json()), "application/json");
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json model = {{"id", options.model_name}, {"object", "model"},       {"created", started},
                        {"owned_by", "specula"},    {"max_model_len", context()}};
    res.set_content(dump(json{{"object", "list"}, {"data", json::array({model})}}), "application/json");
  });
  http.Post("/v1/chat/completions", [](const httplib::Request&, httplib::Response& res) {
    answer_error(res, ApiError(404,
                               "this server has no chat endpoint: applying the model's chat template would need a "
                               "template engine, which Specula does not have; use /v1/completions with the prompt "
                               "written out",
                               {}, "chat_not_supported"));
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    std::shared_ptr<Job> job;
    try {
      job = accept(req.body);
      enqueue(job);
    } catch (const ApiError& e) {
      answer_error(res, e);
      return;
    }
    const auto provider = [this, job](size_t, httplib::DataSink& sink) {
      return job->request.stream ? stream(*job, sink) : respond(*job, sink);
    };
    res.set_chunked_content_provider(job->request.stream ? "text/event-stream" : "application/json", provider,
                                     [this, job](bool) { abandon(job); });
  });
}

// Parses and checks a request against the model and the server's limits.
std::shared_ptr<Job> CompletionServer::Impl::accept(const std::string& body) {
  RequestLimits limits;
  limits.max_tokens = context();
  auto job = std::make_shared<Job>();
  CompletionRequest& r = job->request;
  r = parse_completion_request(body, limits);
  if (!r.model.empty() && r.model != options.model_name) {
    throw ApiError(404, "the model '" + r.model + "' does not exist: this server serves '" + options.model_name + "'",
                   "model", "model_not_found");
  }
  GenerationRequest& g = job->generation;
  g.prompt = r.prompt;
  if (!r.suffix.empty()) g.suffix = r.suffix;
  try {
    job->prompt_ids = request_prompt_ids(tokenizer(), g);
  } catch (const std::invalid_argument& e) {
    throw ApiError(400, e.what(), "suffix");  // a suffix for a model without fill-in-the-middle tokens
  }
  if (static_cast<int>(job->prompt_ids.size()) >= context()) {
    throw ApiError(400, "the prompt has " + std::to_string(job->prompt_ids.size()) + " tokens; the model's context holds " +
                            std::to_string(context()), "prompt");
  }
  DecodeOptions sizing;
  sizing.n_seqs = r.n;
  sizing.max_new_tokens = r.max_tokens;
  const int kv = decode_cache_tokens(static_cast<int>(job->prompt_ids.size()), context(), sizing);
  if (kv > options.max_kv_tokens) {
    throw ApiError(400, std::to_string(r.n) + " completions of up to " + std::to_string(r.max_tokens) + " tokens need " +
                            std::to_string(kv) + " KV positions; this server allows " +
                            std::to_string(options.max_kv_tokens) + " per request", "n");
  }
  g.allow_empty_prompt = true;
  g.n_candidates = r.n;
  g.sampling = SamplingParams{r.temperature, r.top_k, r.top_p, r.min_p, r.seed ? *r.seed : random_seed()};
  g.max_new_tokens = r.max_tokens;
  g.stop = r.stop;
  g.draft = options.draft;
  char id[32];
  std::snprintf(id, sizeof id, "cmpl-%08lx", next_id.fetch_add(1));
  job->id = id;
  job->created = std::time(nullptr);
  job->queued = Clock::now();
  return job;
}

void CompletionServer::Impl::enqueue(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lock(mutex);
    if (stopping) throw ApiError(503, "the server is shutting down");
    const int capacity = options.max_queue + (running ? 0 : 1);  // an idle engine takes the next one at once
    if (static_cast<int>(queue.size()) >= capacity) {
      ++counters.rejected;
      throw ApiError(503, "the server is busy: " + std::to_string(queue.size()) + " requests are waiting; retry later");
    }
    queue.push_back(job);
  }
  queue_changed.notify_all();
}

// The client is gone: a waiting job leaves the queue, a running one stops within one step.
void CompletionServer::Impl::abandon(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lock(job->mutex);
    if (job->done) return;
  }
  job->cancel = true;
  std::lock_guard lock(mutex);
  for (auto it = queue.begin(); it != queue.end(); ++it) {
    if (*it != job) continue;
    queue.erase(it);
    ++counters.cancelled;
    break;
  }
}

void CompletionServer::Impl::engine_loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex);
      queue_changed.wait(lock, [&] { return stopping || !queue.empty(); });
      if (stopping) return;
      job = queue.front();
      queue.pop_front();
      running = job;
    }
    generate(*job);
    std::lock_guard lock(mutex);
    running = nullptr;
  }
}

void CompletionServer::Impl::generate(Job& job) {
  job.queue_seconds = std::chrono::duration<double>(Clock::now() - job.queued).count();
  SessionCallbacks callbacks;
  callbacks.on_delta = [&job](const CandidateDelta& d) {
    std::lock_guard lock(job.mutex);
    job.deltas.push_back(d);
    job.changed.notify_all();
  };
  callbacks.on_finished = [&job](const Candidate& c) {
    if (c.finish == FinishReason::Cancelled) return;  // nobody is listening
    std::lock_guard lock(job.mutex);
    job.finished.push_back(c);
    job.changed.notify_all();
  };
  std::optional<SessionResult> result;
  std::string failure;
  try {
    result = generator.generate(job.generation, callbacks, &job.cancel);
  } catch (const std::exception& e) {
    failure = e.what();
    std::fprintf(stderr, "%s failed: %s\n", job.id.c_str(), e.what());
  }
  {
    std::lock_guard lock(mutex);
    if (!result) {
      ++counters.failed;
    } else {
      counters.kv_blocks_left += result->totals.kv_blocks_left;
      bool cut = false;
      for (const Candidate& c : result->candidates) cut |= c.finish == FinishReason::Cancelled;
      ++(cut ? counters.cancelled : counters.completed);
    }
  }
  std::lock_guard lock(job.mutex);
  job.result = std::move(result);
  job.failure = failure.empty() && !job.result ? "generation failed" : failure;
  job.done = true;
  job.changed.notify_all();
}

// Streams the job as server-sent events until it ends, the client leaves or the server stops.
bool CompletionServer::Impl::stream(Job& job, httplib::DataSink& sink) {
  std::vector<CandidateDelta> deltas;
  std::vector<Candidate> finished;
  for (;;) {
    bool done = false;
    {
      std::unique_lock lock(job.mutex);
      job.changed.wait_for(lock, kPollInterval, [&] { return !job.deltas.empty() || !job.finished.empty() || job.done; });
      deltas.swap(job.deltas);
      finished.swap(job.finished);
      done = job.done;
    }
    const json head = {{"id", job.id}, {"object", "text_completion"}, {"created", job.created}, {"model", options.model_name}};
    std::string out;
    for (const CandidateDelta& d : deltas) {
      json chunk = head;
      chunk["choices"] = json::array({delta_choice_json(d)});
      out += sse_event(dump(chunk));
    }
    for (const Candidate& c : finished) {
      json chunk = head;
      chunk["choices"] = json::array({choice_json(tokenizer(), job, c, false)});
      out += sse_event(dump(chunk));
    }
    deltas.clear();
    finished.clear();
    if (done && !job.failure.empty()) return false;  // cut the stream: no [DONE] tells the client it failed
    if (done) {
      if (job.request.include_usage) {
        json last = head;
        last["choices"] = json::array();
        last["usage"] = usage_json(job.result->totals);
        last["specula"] = extension_json(job);
        out += sse_event(dump(last));
      }
      out += sse_event("[DONE]");
    }
    if (!out.empty() && !sink.write(out.data(), out.size())) break;
    if (done) {
      sink.done();
      return true;
    }
    if (!sink.is_writable()) break;
    std::lock_guard lock(mutex);
    if (stopping) break;
  }
  job.cancel = true;
  return false;
}

// Waits for the whole completion, watching the connection, then writes it as one object.
bool CompletionServer::Impl::respond(Job& job, httplib::DataSink& sink) {
  for (;;) {
    {
      std::unique_lock lock(job.mutex);
      if (job.changed.wait_for(lock, kPollInterval, [&] { return job.done; })) break;
    }
    bool stopping_now = false;
    {
      std::lock_guard lock(mutex);
      stopping_now = stopping;
    }
    if (stopping_now || !sink.is_writable()) {
      job.cancel = true;
      return false;
    }
  }
  if (!job.failure.empty()) return false;  // the status line went out already: cutting the body says it failed
  const std::string body = dump(completion_json(job));
  if (!sink.write(body.data(), body.size())) return false;
  sink.done();
  return true;
}

json CompletionServer::Impl::completion_json(Job& job) const {
  json choices = json::array();
  for (const Candidate& c : job.result->candidates) choices.push_back(choice_json(tokenizer(), job, c, true));
  return {{"id", job.id},
          {"object", "text_completion"},
          {"created", job.created},
          {"model", options.model_name},
          {"choices", choices},
          {"usage", usage_json(job.result->totals)},
          {"specula", extension_json(job)}};
}

json CompletionServer::Impl::extension_json(const Job& job) const {
  return {{"drafter", options.draft.kind},
          {"draft_policy", options.draft.policy},
          {"queue_s", job.queue_seconds},
          {"totals", totals_json(job.result->totals, job.request.n)}};
}

json CompletionServer::Impl::health_json() const {
  ServerStats s;
  {
    std::lock_guard lock(mutex);
    s = counters;
    s.waiting = static_cast<int>(queue.size());
    s.generating = running != nullptr;
  }
  return {{"status", "ok"},
          {"model", options.model_name},
          {"waiting", s.waiting},
          {"max_queue", options.max_queue},
          {"generating", s.generating},
          {"completed", s.completed},
          {"cancelled", s.cancelled},
          {"rejected", s.rejected},
          {"failed", s.failed},
          {"kv_blocks_left", s.kv_blocks_left}};
}

}  // namespace specula::serve
