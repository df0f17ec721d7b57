#include "serve/completion_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "model/model_chat.h"
#include "model/tokenizer.h"
#include "serve/access_policy.h"
#include "serve/http_server.h"
#include "serve/llama_api.h"
#include "serve/openai_api.h"
#include "serve/sse.h"
#include "serve/suggestions.h"

namespace specula::serve {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kPollInterval = std::chrono::milliseconds(20);  // how soon a closed connection is noticed
constexpr int kSpareWorkers = 4;        // HTTP workers beyond the queue: requests refused at once with 503
constexpr int kRetryAfterSeconds = 1;   // what a 503 suggests
constexpr const char* kStreamProbe = ": keep-alive\n\n";  // an SSE comment: changes nothing a client reads

// Which wire format a request speaks: OpenAI's (/v1/completions) or llama.cpp's own.
enum class Dialect { OpenAi, LlamaCompletion, LlamaInfill };

Dialect dialect_of(const std::string& path) {
  if (path == "/completion" || path == "/completions") return Dialect::LlamaCompletion;
  if (path == "/infill") return Dialect::LlamaInfill;
  if (path == "/tokenize") return Dialect::LlamaCompletion;  // llama.cpp's own, its key and its errors
  return Dialect::OpenAi;
}

// One accepted request, shared by the HTTP thread that answers it and the engine thread
// that generates it.
struct Job {
  Dialect dialect = Dialect::OpenAi;
  bool chat = false;                    // /v1/chat/completions: OpenAI's chat shapes
  CompletionRequest request;            // OpenAI's request; for llama.cpp's, its n and stream
  LlamaRequest llama;                   // llama.cpp's request
  bool prompt_truncated = false;        // llama.cpp's: the prompt was cut to fit the context
  int hole_indent = -1;                 // the infill fallback's: lines indented less end it
  std::string next_line;                // the infill fallback's: a line repeating this one ends it
  std::vector<char> limited;            // (n) ended by n_indent, the fallback's dedent or the time limit
                                        // (written by the engine thread before `done`)
  bool ranked = false;                  // best of N: its candidates are ranked, the best answered (suggestions.h)
  SuggestionInput hole;                 // ranked: the code around the hole (the candidates come after)
  long long predict_limit_ms = 0;       // the generation's share of t_max_predict_ms
  Clock::time_point started;            // when generation began
  std::optional<RankedSuggestions> ranking;  // ranked: the order, set by the thread that answers
  GenerationRequest generation;
  std::vector<int> prompt_ids;          // the encoded prompt, BOS included (for token texts)
  std::string id;                       // "cmpl-..." or "chatcmpl-..."
  long long created = 0;                // Unix time
  Clock::time_point queued;
  std::atomic<bool> cancel{false};      // the session's stop flag: the client went away

  std::mutex mutex;                     // guards everything below
  std::condition_variable changed;
  std::vector<CandidateDelta> deltas;   // streamed text not yet written
  std::vector<Candidate> finished;      // ended candidates not yet written
  std::optional<SessionResult> result;  // the session's end
  std::vector<std::vector<std::vector<TokenLogprob>>> alternatives;  // a chat's top_logprobs: per candidate,
                                                                     // per token (set with result)
  std::vector<TokenScores> echoed;      // echo: per candidate, its prompt and tokens scored (set with result)
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

json bytes_of(const std::string& text) {
  json bytes = json::array();
  for (const char b : text) bytes.push_back(static_cast<unsigned char>(b));
  return bytes;
}

constexpr size_t kContextTokens = 4;  // tokens before an alternative, for its text

// The text token `id` adds after `before` (a few tokens before it, so that a tokenizer that
// marks word starts shows the space).
std::string text_after(const Tokenizer& tokenizer, std::vector<int> before, int id) {
  const std::string head = tokenizer.decode(before);
  before.push_back(id);
  const std::string whole = tokenizer.decode(before);
  if (whole.compare(0, head.size(), head) == 0) return whole.substr(head.size());
  return tokenizer.decode(std::span<const int>(&id, 1));
}

// echo: the prompt's tokens, then the completion's, in the completions format, each after
// the first with its log-probability (and the likeliest at its position with logprobs k > 0);
// `text` gets the prompt's text.
json echo_logprobs_json(const Tokenizer& tokenizer, const Job& job, const Candidate& c, std::string& text) {
  std::vector<int> all = job.prompt_ids;
  all.insert(all.end(), c.tokens.begin(), c.tokens.end());
  const std::vector<std::string> texts = token_texts(tokenizer, {}, all);
  text.clear();
  for (size_t i = 0; i < job.prompt_ids.size() && i < texts.size(); ++i) text += texts[i];
  if (!job.request.logprobs) return nullptr;
  const size_t index = static_cast<size_t>(c.index);
  const TokenScores* scores = index < job.echoed.size() ? &job.echoed[index] : nullptr;
  json offsets = json::array(), logprobs = json::array(), top = json::array();
  size_t offset = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    offsets.push_back(offset);
    offset += texts[i].size();
    const bool scored = i > 0 && scores && i - 1 < scores->nll.size();
    logprobs.push_back(scored ? json(-scores->nll[i - 1]) : json(nullptr));
    if (!scored || scores->top.empty()) {
      top.push_back(nullptr);
      continue;
    }
    const std::vector<int> before(all.begin() + static_cast<long>(i - std::min(i, kContextTokens)), all.begin() + static_cast<long>(i));
    json likeliest = json::object();
    for (const TokenLogprob& t : scores->top[i - 1]) likeliest[text_after(tokenizer, before, t.token)] = t.logprob;
    top.push_back(likeliest);
  }
  return {{"tokens", texts}, {"token_logprobs", logprobs}, {"top_logprobs", *job.request.logprobs > 0 ? top : json(nullptr)},
          {"text_offset", offsets}};
}

// The chat format: per token its text, log-probability and bytes, and with top_logprobs the
// most likely tokens at its position in the same shape.
json chat_logprobs_json(const Tokenizer& tokenizer, const Job& job, const Candidate& c) {
  if (!job.request.logprobs) return nullptr;
  const std::vector<std::string> texts = token_texts(tokenizer, job.prompt_ids, c.tokens);
  const size_t index = static_cast<size_t>(c.index);
  const auto* alternatives = index < job.alternatives.size() ? &job.alternatives[index] : nullptr;
  std::vector<int> sequence = job.prompt_ids;
  sequence.insert(sequence.end(), c.tokens.begin(), c.tokens.end());
  json content = json::array();
  for (size_t i = 0; i < texts.size() && i < c.logprobs.size(); ++i) {
    json top = json::array();
    if (alternatives && i < alternatives->size()) {
      const size_t at = job.prompt_ids.size() + i;
      const std::vector<int> before(sequence.begin() + static_cast<long>(at - std::min(at, kContextTokens)),
                                    sequence.begin() + static_cast<long>(at));
      for (const TokenLogprob& t : (*alternatives)[i]) {
        const std::string text = text_after(tokenizer, before, t.token);
        top.push_back({{"token", text}, {"logprob", t.logprob}, {"bytes", bytes_of(text)}});
      }
    }
    content.push_back({{"token", texts[i]}, {"logprob", c.logprobs[i]}, {"bytes", bytes_of(texts[i])}, {"top_logprobs", top}});
  }
  return {{"content", content}};
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
  if (job.chat) {
    // a response carries the message, a stream's last chunk for the choice an empty delta
    json choice = {{"index", c.index}};
    if (whole_text) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["delta"] = json::object();
    }
    choice["logprobs"] = chat_logprobs_json(tokenizer, job, c);
    choice["finish_reason"] = openai_finish_reason(c.finish);
    choice["specula"] = finished_extension(c);
    return choice;
  }
  if (job.request.echo) {
    std::string prompt_text;
    json logprobs = echo_logprobs_json(tokenizer, job, c, prompt_text);
    return {{"index", c.index},
            {"text", prompt_text + c.text},
            {"logprobs", std::move(logprobs)},
            {"finish_reason", openai_finish_reason(c.finish)},
            {"specula", finished_extension(c)}};
  }
  return {{"index", c.index},
          {"text", whole_text ? c.text : std::string()},
          {"logprobs", logprobs_json(tokenizer, job, c)},
          {"finish_reason", openai_finish_reason(c.finish)},
          {"specula", finished_extension(c)}};
}

json delta_choice_json(const Job& job, const CandidateDelta& d) {
  if (job.chat) {
    return {{"index", d.index},
            {"delta", {{"content", d.text}}},
            {"logprobs", nullptr},
            {"finish_reason", nullptr},
            {"specula", {{"tokens", d.tokens}, {"accepted", d.accepted}, {"proposed", d.proposed}}}};
  }
  return {{"index", d.index},
          {"text", d.text},
          {"logprobs", nullptr},
          {"finish_reason", nullptr},
          {"specula", {{"tokens", d.tokens}, {"accepted", d.accepted}, {"proposed", d.proposed}}}};
}

// The prompt cache's size and use, for /health.
json prompt_cache_json(const PromptCacheStats& s) {
  return {{"max_blocks", s.max_blocks}, {"blocks", s.blocks}, {"tokens", s.tokens},
          {"lookups", s.lookups}, {"hits", s.hits}, {"tokens_reused", s.tokens_reused}};
}

json usage_json(const SessionTotals& t) {
  return {{"prompt_tokens", t.prompt_tokens},
          {"completion_tokens", t.generated_tokens},
          {"total_tokens", t.prompt_tokens + t.generated_tokens},
          {"prompt_tokens_details", {{"cached_tokens", t.cached_tokens}}}};
}

std::string bearer_token(const HttpRequest& req) {
  const std::string* header = req.header("authorization");
  const std::string prefix = "Bearer ";
  return header && header->compare(0, prefix.size(), prefix) == 0 ? header->substr(prefix.size()) : std::string();
}

// Compares without leaking, through timing, how much of the key was right.
bool same_key(const std::string& given, const std::string& expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) diff |= given[i] ^ expected[i % expected.size()];
  return diff == 0;
}

HttpResponse error_response(const ApiError& error, Dialect dialect = Dialect::OpenAi) {
  const nlohmann::json body = dialect == Dialect::OpenAi ? error_json(error) : llama_error_json(error);
  HttpResponse res{.status = error.status, .content_type = "application/json", .body = dump(body), .headers = {}};
  if (error.status == 503 || error.status == 429) res.headers.emplace_back("Retry-After", std::to_string(kRetryAfterSeconds));
  return res;
}

HttpResponse json_response(const json& body) {
  return HttpResponse{.status = 200, .content_type = "application/json", .body = dump(body), .headers = {}};
}

// The routes and the methods each takes.
struct Route {
  const char* path;
  std::vector<std::string> methods;
};
const Route kRoutes[] = {
    {"/health", {"GET", "HEAD"}},
    {"/v1/models", {"GET", "HEAD"}},
    {"/v1/completions", {"POST"}},
    {"/v1/chat/completions", {"POST"}},
    {"/completion", {"POST"}},  // llama.cpp's native endpoints, for editor plugins
    {"/completions", {"POST"}},
    {"/infill", {"POST"}},
    {"/tokenize", {"POST"}},
};

// The longest text one token stands for, in bytes: a prompt longer than the context times
// this cannot fit, whatever it tokenizes to. A piece as stored is never shorter than the
// text it matches (byte-level BPE maps a byte to one or two characters, SentencePiece
// writes a space as three bytes); the factor of two covers normalization.
size_t longest_token_bytes(const Tokenizer& tokenizer) {
  size_t longest = 1;
  for (int id = 0; id < tokenizer.size(); ++id) longest = std::max(longest, tokenizer.piece(id).size());
  return 2 * longest;
}

// The template chat requests are rendered with: the one the server was given (with the
// model's BOS and EOS texts), else the model's own.
std::optional<ModelChatTemplate> served_chat_template(const Model& model, const std::string& given) {
  std::optional<ModelChatTemplate> own = model_chat_template(model);
  if (given.empty()) return own;
  ModelChatTemplate t = own.value_or(ModelChatTemplate{});
  if (!own && model.tokenizer) {
    const Tokenizer& tok = *model.tokenizer;
    if (tok.bos() >= 0 && tok.bos() < tok.size()) t.bos_token = tok.piece(tok.bos());
    if (tok.eos() >= 0 && tok.eos() < tok.size()) t.eos_token = tok.piece(tok.eos());
  }
  t.source = given;
  return t;
}

uint64_t random_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// The text a chat request is a completion of. A final assistant message being continued is
// its prefill: the chat before it, with the assistant's turn opened, then its content as it is
// (as llama.cpp's server renders it), so that the answer continues that content.
std::string rendered_chat(const ModelChatTemplate& chat_template, const ChatRequest& chat,
                          const ChatTemplateLimits& limits) {
  if (!chat.continue_final) return render_chat(chat_template, chat.messages, /*add_generation_prompt=*/true, limits);
  nlohmann::ordered_json before = chat.messages;
  const nlohmann::ordered_json prefill = before.back();
  before.erase(before.size() - 1);
  return render_chat(chat_template, before, /*add_generation_prompt=*/true, limits) +
         prefill["content"].get<std::string>();
}

}  // namespace

struct CompletionServer::Impl {
  Impl(LocalGenerator& g, ServerOptions o)
      : generator(g), options(std::move(o)), started(std::time(nullptr)),
        access{.bound_host = options.host, .allowed_hosts = options.allowed_hosts, .allowed_origins = options.allowed_origins},
        token_bytes(g.target().tokenizer ? longest_token_bytes(*g.target().tokenizer) : 1),
        chat_template(served_chat_template(g.target(), options.chat_template)), http(http_options(), service()) {}

  LocalGenerator& generator;
  const ServerOptions options;
  const long long started;
  const AccessPolicy access;
  const size_t token_bytes;                // longest_token_bytes of the model's tokenizer
  const std::optional<ModelChatTemplate> chat_template;  // options.chat_template, else the model's; none: chat gets 400
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

  HttpServerOptions http_options() const;
  HttpService service();
  std::optional<HttpResponse> admit(const HttpRequest& head) const;
  std::optional<HttpResponse> quick(const HttpRequest& request) const;
  void work(const HttpRequest& request, HttpExchange& exchange);
  HttpResponse refusal(int status, const std::string& message);
  std::vector<std::pair<std::string, std::string>> cors_headers(const HttpRequest& request) const;
  std::shared_ptr<Job> accept(const std::string& body);
  HttpResponse tokenize(const std::string& body) const;
  std::shared_ptr<Job> accept_chat(const std::string& body);
  void put_in_prompt_style(Job& job) const;
  void check_model(const CompletionRequest& request) const;
  size_t max_prompt_bytes() const;
  void prepare(Job& job, const char* id_prefix);
  std::shared_ptr<Job> accept_llama(Dialect dialect, const std::string& body);
  std::function<size_t(int, const std::string&)> line_rules(Job& job) const;
  void finish_without_generating(Job& job);
  void stream_llama(Job& job, HttpExchange& exchange, const HttpRequest& request);
  nlohmann::json llama_json(const Job& job) const;
  nlohmann::json llama_final(const Job& job, const Candidate& c, bool apply_fields = true) const;
  nlohmann::json ranked_llama_json(const Job& job) const;
  bool rank(Job& job, HttpExchange& exchange);
  void enqueue(const std::shared_ptr<Job>& job);
  void abandon(const std::shared_ptr<Job>& job);
  void engine_loop();
  void generate(Job& job);
  void stream(Job& job, HttpExchange& exchange, const HttpRequest& request);
  void respond(Job& job, HttpExchange& exchange, const HttpRequest& request);
  json completion_json(Job& job) const;
  json extension_json(const Job& job) const;
  json health_json() const;
};

int prompt_cache_blocks(const ServerOptions& options, int context_length) {
  if (options.prompt_cache_blocks >= 0) return options.prompt_cache_blocks;
  const int tokens = std::min(4 * std::max(context_length, 1), kDefaultPromptCacheTokens);
  return (tokens + 15) / 16;
}

CompletionServer::CompletionServer(LocalGenerator& generator, ServerOptions options)
    : impl_(std::make_unique<Impl>(generator, std::move(options))) {
  if (!generator.target().tokenizer) throw std::invalid_argument("the model has no tokenizer: name one (--tokenizer)");
  if (impl_->options.max_queue < 0) throw std::invalid_argument("the queue length cannot be negative");
  if (impl_->options.model_name.empty()) throw std::invalid_argument("the served model needs a name");
  if (impl_->options.prompt_cache_blocks < -1)
    throw std::invalid_argument("the prompt cache's size cannot be negative (0: none)");
  generator.enable_prompt_cache(prompt_cache_blocks(impl_->options, generator.target().config.context_length));
}

CompletionServer::~CompletionServer() { stop(); }

int CompletionServer::listen() { return impl_->http.listen(); }

void CompletionServer::serve() {
  std::thread engine([this] { impl_->engine_loop(); });
  impl_->http.serve();
  stop();
  engine.join();
}

void CompletionServer::stop() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
    for (const auto& job : impl_->queue) job->cancel = true;
    if (impl_->running) impl_->running->cancel = true;
  }
  impl_->queue_changed.notify_all();
  impl_->http.stop();
}

HttpServerOptions CompletionServer::Impl::http_options() const {
  HttpServerOptions o;
  o.host = options.host;
  o.port = options.port;
  o.limits.max_body_bytes = options.max_body_bytes;
  o.limits.allow_compressed = options.allow_compressed;
  o.body_timeout = std::chrono::seconds(options.request_timeout_seconds);
  o.head_timeout = std::min<std::chrono::milliseconds>(o.head_timeout, o.body_timeout);
  o.max_connections = options.max_connections;
  o.max_connections_per_peer = options.max_connections_per_client;
  o.workers = options.max_queue + 1 + kSpareWorkers;
  return o;
}

HttpService CompletionServer::Impl::service() {
  return HttpService{
      .admit = [this](const HttpRequest& head) { return admit(head); },
      .quick = [this](const HttpRequest& request) { return quick(request); },
      .work = [this](const HttpRequest& request, HttpExchange& exchange) { work(request, exchange); },
      .error = [this](int status, const std::string& message) { return refusal(status, message); },
  };
}

// The HTTP server's own refusals, in OpenAI's error object; every 503 counts as rejected.
HttpResponse CompletionServer::Impl::refusal(int status, const std::string& message) {
  if (status == 503) {
    std::lock_guard lock(mutex);
    ++counters.rejected;
  }
  return error_response(ApiError(status, message));
}

// Decided from the head alone, before any byte of the body is read: the host and the
// origin, the route and its method, the key, and a JSON body.
std::optional<HttpResponse> CompletionServer::Impl::admit(const HttpRequest& head) const {
  const Dialect dialect = dialect_of(head.path);
  const auto refuse = [dialect](const ApiError& e) { return error_response(e, dialect); };
  if (auto refused = check_host(head, access)) return refuse(ApiError(refused->status, refused->message));
  if (auto refused = check_origin(head, access)) return refuse(ApiError(refused->status, refused->message));
  const Route* route = nullptr;
  for (const Route& r : kRoutes) {
    if (head.path == r.path) route = &r;
  }
  if (!route) return error_response(ApiError(404, "no such endpoint: " + head.method + " " + head.path));
  const bool preflight = head.method == "OPTIONS" && !allowed_origin(head, access).empty();
  if (!preflight && std::find(route->methods.begin(), route->methods.end(), head.method) == route->methods.end()) {
    HttpResponse res = refuse(ApiError(405, head.method + " is not allowed on " + head.path));
    std::string allow;
    for (const std::string& m : route->methods) allow += (allow.empty() ? "" : ", ") + m;
    res.headers.emplace_back("Allow", allow);
    return res;
  }
  if (preflight || (head.path.rfind("/v1/", 0) != 0 && dialect == Dialect::OpenAi)) return std::nullopt;
  if (!options.api_key.empty()) {
    const std::string key = bearer_token(head);
    if (key.empty() || !same_key(key, options.api_key)) {
      return refuse(ApiError(401,
                             key.empty() ? "an API key is required: send \"Authorization: Bearer KEY\""
                                         : "the API key is not valid",
                             {}, "invalid_api_key"));
    }
  }
  if (head.method == "POST" && !is_json_body(head)) {
    return refuse(ApiError(415, "the request body must be JSON, sent with \"Content-Type: application/json\""));
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> CompletionServer::Impl::cors_headers(const HttpRequest& request) const {
  const std::string origin = allowed_origin(request, access);
  if (origin.empty()) return {};
  return {{"Access-Control-Allow-Origin", origin}, {"Vary", "Origin"}};
}

// What the I/O thread answers at once: descriptions and preflights.
std::optional<HttpResponse> CompletionServer::Impl::quick(const HttpRequest& request) const {
  std::optional<HttpResponse> res;
  if (request.method == "OPTIONS") {
    res = HttpResponse{.status = 204, .content_type = "text/plain", .body = {}, .headers = {}};
    res->headers = {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                    {"Access-Control-Allow-Headers", "Authorization, Content-Type"},
                    {"Access-Control-Max-Age", "600"}};
  } else if (request.path == "/health") {
    res = json_response(health_json());
  } else if (request.path == "/v1/models") {
    const json model = {{"id", options.model_name}, {"object", "model"},       {"created", started},
                        {"owned_by", "specula"},    {"max_model_len", context()}};
    res = json_response(json{{"object", "list"}, {"data", json::array({model})}});
  }
  if (res) {
    for (auto& h : cors_headers(request)) res->headers.push_back(std::move(h));
  }
  return res;
}

// POST /v1/completions and /v1/chat/completions, on a worker: accepted into the queue, then
// streamed or answered whole.
void CompletionServer::Impl::work(const HttpRequest& request, HttpExchange& exchange) {
  const Dialect dialect = dialect_of(request.path);
  std::shared_ptr<Job> job;
  try {
    if (request.path == "/tokenize") {
      HttpResponse res = tokenize(request.body);
      for (auto& h : cors_headers(request)) res.headers.push_back(std::move(h));
      exchange.respond(res);
      return;
    }
    if (dialect != Dialect::OpenAi) {
      job = accept_llama(dialect, request.body);
    } else {
      job = request.path == "/v1/chat/completions" ? accept_chat(request.body) : accept(request.body);
    }
    const bool warms_cache = job->generation.cache_prompt && generator.prompt_cache_stats().max_blocks > 0;
    if (dialect != Dialect::OpenAi && job->generation.max_new_tokens == 0 && !warms_cache) {
      finish_without_generating(*job);  // llama.cpp's n_predict 0: the prompt only, and no cache to keep it
    } else {
      enqueue(job);
    }
  } catch (const ApiError& e) {
    HttpResponse res = error_response(e, dialect);
    for (auto& h : cors_headers(request)) res.headers.push_back(std::move(h));
    exchange.respond(res);
    return;
  }
  if (dialect != Dialect::OpenAi && job->request.stream) {
    stream_llama(*job, exchange, request);
  } else if (job->request.stream) {
    stream(*job, exchange, request);
  } else {
    respond(*job, exchange, request);
  }
  abandon(job);  // a no-op for a job that ended; else the client went away
}

// Parses and checks a request against the model and the server's limits.
std::shared_ptr<Job> CompletionServer::Impl::accept(const std::string& body) {
  RequestLimits limits;
  limits.max_tokens = context();
  auto job = std::make_shared<Job>();
  job->request = parse_completion_request(body, limits);
  check_model(job->request);
  GenerationRequest& g = job->generation;
  g.prompt = job->request.prompt;
  if (!job->request.suffix.empty()) g.suffix = job->request.suffix;
  if (!job->request.prompt_ids.empty()) {  // sent as the model is to read them, in no prompt style
    for (const int id : job->request.prompt_ids) {
      if (id >= tokenizer().size()) {
        throw ApiError(400, "the prompt's token id " + std::to_string(id) + " is not in the vocabulary of " +
                                std::to_string(tokenizer().size()) + " tokens", "prompt");
      }
    }
    g.prompt_ids = job->request.prompt_ids;
  } else {
    put_in_prompt_style(*job);
  }
  prepare(*job, "cmpl");
  return job;
}

// POST /tokenize, llama.cpp's: {"content", "add_special"} to {"tokens"} (vLLM's "prompt" and
// "add_special_tokens" read too), on the worker that answers it: the model's own ids, for a
// client that cuts a text into windows of tokens (specula-cli perplexity --remote).
HttpResponse CompletionServer::Impl::tokenize(const std::string& body) const {
  const json j = json::parse(body, nullptr, false);
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
  const auto value = [&](const char* name, const char* other) -> const json* {
    if (auto it = j.find(name); it != j.end()) return &*it;
    if (auto it = j.find(other); it != j.end()) return &*it;
    return nullptr;
  };
  const json* content = value("content", "prompt");
  if (!content || !content->is_string()) throw ApiError(400, "content must be a string", "content");
  const json* special = value("add_special", "add_special_tokens");
  if (special && !special->is_boolean()) throw ApiError(400, "add_special must be true or false", "add_special");
  if (auto pieces = j.find("with_pieces"); pieces != j.end() && pieces->is_boolean() && pieces->get<bool>()) {
    throw ApiError(400, "with_pieces is not supported: ask for the ids alone", "with_pieces");
  }
  const std::string& text = content->get_ref<const std::string&>();
  return json_response({{"tokens", tokenizer().encode(text, special && special->get<bool>())}});
}

// serve --prompt-style: a completion prompt inside the code chat, ending at its closing fence.
void CompletionServer::Impl::put_in_prompt_style(Job& job) const {
  GenerationRequest& g = job.generation;
  PromptStyle style = PromptStyle::Raw;
  try {
    style = resolve_prompt_style(options.prompt_style, chat_template.has_value(), g.suffix.has_value());
  } catch (const std::invalid_argument& e) {
    throw ApiError(400, std::string(e.what()) + " (this server puts prompts in the chat style)", "suffix");
  }
  if (style != PromptStyle::Chat) return;
  try {
    g.chat_prefix = chat_code_prefix(*chat_template, g.prompt);
  } catch (const ChatTemplateError& e) {
    throw ApiError(400, "the chat template failed: " + e.kind() + ": " + e.what(), "prompt", "chat_template_error");
  }
  job.request.stop.push_back(kChatCodeStop);  // prepare() takes the stops from the request
}

void CompletionServer::Impl::check_model(const CompletionRequest& r) const {
  if (!r.model.empty() && r.model != options.model_name) {
    throw ApiError(404, "the model '" + r.model + "' does not exist: this server serves '" + options.model_name + "'",
                   "model", "model_not_found");
  }
}

// The longest prompt, in bytes, that could fit in the context whatever it tokenizes to.
size_t CompletionServer::Impl::max_prompt_bytes() const { return static_cast<size_t>(context()) * token_bytes; }

// A chat request: its messages through the model's template, then as a completion of that text.
std::shared_ptr<Job> CompletionServer::Impl::accept_chat(const std::string& body) {
  RequestLimits limits;
  limits.max_tokens = context();
  auto job = std::make_shared<Job>();
  job->chat = true;
  ChatRequest chat = parse_chat_request(body, limits);
  job->request = std::move(chat.completion);
  check_model(job->request);
  if (!chat_template) {
    throw ApiError(400, "the model '" + options.model_name +
                            "' has no chat template (tokenizer.chat_template), so it cannot take messages: use "
                            "/v1/completions with the prompt written out, or name a template (serve --chat-template)",
                   "messages", "chat_template_missing");
  }
  // Rendering is the server's work too: messages that cannot fit are refused before it.
  size_t content_bytes = 0;
  for (const auto& m : chat.messages) content_bytes += m["content"].get_ref<const std::string&>().size();
  if (content_bytes > max_prompt_bytes()) {
    throw ApiError(400, "the messages have " + std::to_string(content_bytes) + " bytes, more than the model's context of " +
                            std::to_string(context()) + " tokens can hold", "messages");
  }
  ChatTemplateLimits template_limits;
  template_limits.max_output_bytes = std::max<size_t>(max_prompt_bytes(), 1 << 16);
  GenerationRequest& g = job->generation;
  try {
    g.prompt = rendered_chat(*chat_template, chat, template_limits);
  } catch (const ChatTemplateError& e) {
    throw ApiError(400, "the chat template failed: " + e.kind() + ": " + e.what(), "messages", "chat_template_error");
  }
  g.chat_prefix = "";  // the prompt is the whole rendered chat
  prepare(*job, "chatcmpl");
  return job;
}

// Tokenizes the job's prompt and checks it and the request against the model and the
// server's limits; then sizes and names the generation.
void CompletionServer::Impl::prepare(Job& job, const char* id_prefix) {
  CompletionRequest& r = job.request;
  // Tokenizing is the server's work, not the client's: a prompt that cannot fit, whatever it
  // tokenizes to, is refused from its length in bytes.
  GenerationRequest& g = job.generation;
  const size_t prompt_bytes = g.prompt.size() + r.suffix.size() + g.chat_prefix.value_or("").size();
  if (prompt_bytes > max_prompt_bytes()) {
    throw ApiError(400, "the prompt has " + std::to_string(prompt_bytes) + " bytes, more than the model's context of " +
                            std::to_string(context()) + " tokens can hold", job.chat ? "messages" : "prompt");
  }
  try {
    job.prompt_ids = request_prompt_ids(tokenizer(), g);
  } catch (const std::invalid_argument& e) {
    throw ApiError(400, e.what(), "suffix");  // a suffix for a model without fill-in-the-middle tokens
  }
  const bool scores_only = r.echo && r.max_tokens == 0;  // a prompt as long as the context may be scored
  if (static_cast<int>(job.prompt_ids.size()) > context() - (scores_only ? 0 : 1)) {
    throw ApiError(400, "the prompt has " + std::to_string(job.prompt_ids.size()) + " tokens; the model's context holds " +
                            std::to_string(context()), job.chat ? "messages" : "prompt");
  }
  if (r.max_tokens == 0 && !r.echo) r.max_tokens = context() - static_cast<int>(job.prompt_ids.size());  // chat's default
  DecodeOptions sizing;
  sizing.n_seqs = r.n;
  sizing.max_new_tokens = r.max_tokens;
  const int kv = decode_cache_tokens(static_cast<int>(job.prompt_ids.size()), context(), sizing);
  if (kv > options.max_kv_tokens) {
    throw ApiError(400, std::to_string(r.n) + " completions of up to " + std::to_string(r.max_tokens) + " tokens need " +
                            std::to_string(kv) + " KV positions; this server allows " +
                            std::to_string(options.max_kv_tokens) + " per request", "n");
  }
  g.allow_empty_prompt = true;
  g.n_candidates = r.n;
  g.sampling = SamplingParams{.temperature = r.temperature,
                              .top_k = r.top_k,
                              .top_p = r.top_p,
                              .min_p = r.min_p,
                              .seed = r.seed ? *r.seed : random_seed()};
  g.max_new_tokens = r.max_tokens;
  g.stop = r.stop;
  g.draft = options.draft;
  g.cache_prompt = true;
  char id[32];
  std::snprintf(id, sizeof id, "%s-%08lx", id_prefix, next_id.fetch_add(1));
  job.id = id;
  job.created = std::time(nullptr);
  job.queued = Clock::now();
}

// POST /completion and POST /infill: llama.cpp's request, checked against the model and the
// server's limits, as a session. An infill prompt too long for the context is cut (truncated
// says so); a /completion prompt too long is refused, as llama.cpp does.
std::shared_ptr<Job> CompletionServer::Impl::accept_llama(Dialect dialect, const std::string& body) {
  const bool infill = dialect == Dialect::LlamaInfill;
  if (infill && !tokenizer().fim().complete() && !options.infill_fallback) throw infill_not_supported(tokenizer().fim());
  auto job = std::make_shared<Job>();
  job->dialect = dialect;
  LlamaRequest& r = job->llama;
  r = parse_llama_request(infill ? LlamaEndpoint::Infill : LlamaEndpoint::Completion, body, kMaxCandidates);
  if (infill) {
    const int reserve = r.n_predict > 0 ? std::min(r.n_predict, context() / 2) : context() / 4;
    InfillPrompt prompt = infill_prompt(tokenizer(), r, context() - reserve, options.infill_fallback, options.spm_infill);
    job->prompt_ids = std::move(prompt.ids);
    job->prompt_truncated = prompt.truncated;
    job->hole_indent = prompt.hole_indent;
    job->next_line = std::move(prompt.next_line);
  } else {
    size_t bytes = 0;
    for (const PromptPiece& p : r.prompt) bytes += p.text.size();
    if (bytes > static_cast<size_t>(context()) * token_bytes) {
      throw ApiError(400, "the request exceeds the available context size (" + std::to_string(context()) + " tokens)");
    }
    job->prompt_ids = completion_prompt_ids(tokenizer(), r.prompt);
    for (const int id : job->prompt_ids) {
      if (id >= tokenizer().size()) throw ApiError(400, "invalid token id " + std::to_string(id) + " in the prompt");
    }
  }
  const int prompt_tokens = static_cast<int>(job->prompt_ids.size());
  if (prompt_tokens == 0) throw ApiError(400, "the prompt is empty");
  if (prompt_tokens >= context()) {
    throw ApiError(400, "the request exceeds the available context size: the prompt has " + std::to_string(prompt_tokens) +
                            " tokens, the context holds " + std::to_string(context()));
  }
  GenerationRequest& g = job->generation;
  g.prompt_ids = job->prompt_ids;
  const int decoded = decoded_candidates(r.n, options.suggestions, r.stream, kMaxCandidates);
  g.n_candidates = decoded;
  // -1, or more than the context leaves: until the context is full (llama.cpp's truncated)
  g.max_new_tokens = r.n_predict < 0 ? context() - prompt_tokens : std::min(r.n_predict, context() - prompt_tokens);
  DecodeOptions sizing;
  sizing.n_seqs = decoded;
  sizing.max_new_tokens = std::max(1, g.max_new_tokens);
  const int kv = decode_cache_tokens(prompt_tokens, context(), sizing);
  if (kv > options.max_kv_tokens) {
    throw ApiError(400, std::to_string(decoded) + " completions need " + std::to_string(kv) +
                            " KV positions; this server allows " + std::to_string(options.max_kv_tokens) + " per request");
  }
  g.sampling = r.sampling;
  g.sampling.seed = r.seed ? *r.seed : random_seed();
  r.sampling.seed = g.sampling.seed;  // generation_settings says the seed used
  g.stop = r.stop;
  g.draft = options.draft;
  g.cache_prompt = r.cache_prompt;
  job->limited.assign(static_cast<size_t>(decoded), 0);
  job->ranked = options.suggestions > 1 && !r.stream && g.max_new_tokens > 0;
  if (job->ranked) job->hole = suggestion_hole(r);
  job->predict_limit_ms = generation_limit_ms(r.t_max_predict_ms, job->ranked);
  const bool rules = r.n_indent > 0 || r.t_max_predict_ms > 0 || job->hole_indent > 0 || !job->next_line.empty();
  if (rules) g.text_end = line_rules(*job);  // without one, text streams token by token
  job->request.n = r.n;
  job->request.stream = r.stream;
  char id[32];
  std::snprintf(id, sizeof id, "cmpl-%08lx", next_id.fetch_add(1));
  job->id = id;
  job->created = std::time(nullptr);
  job->queued = Clock::now();
  return job;
}

// llama.cpp's n_indent and t_max_predict_ms, and the fallback's dedent and repeat rules, as the session's
// text_end hook. The time counts from the first token (the first call). When it is up, the
// completion ends at the first step after it, with the whole lines written so far, or, before
// its first line end, the line as it stands. llama.cpp waits for the next line end instead,
// which a long line (a string, a comprehension) can put far past the limit: an editor's
// ghost text is then late, and the limit is there to keep it on time.
std::function<size_t(int, const std::string&)> CompletionServer::Impl::line_rules(Job& job) const {
  struct State {
    std::optional<Clock::time_point> first;  // the first token's time
  };
  auto state = std::make_shared<State>();
  const int n_indent = job.llama.n_indent;
  const auto limit = std::chrono::milliseconds(job.predict_limit_ms);
  return [state, &job, n_indent, limit](int i, const std::string& text) -> size_t {
    const auto now = Clock::now();
    if (!state->first) state->first = now;
    size_t end = std::min({indent_end(text, n_indent), dedent_end(text, job.hole_indent), repeat_end(text, job.next_line)});
    if (limit.count() > 0 && now - *state->first > limit) end = std::min(end, time_limit_end(text));
    if (end != std::string::npos) job.limited[static_cast<size_t>(i)] = 1;
    return end;
  };
}

// n_predict 0 (llama.vim sends it to warm a prompt cache): nothing to generate, answered at once.
void CompletionServer::Impl::finish_without_generating(Job& job) {
  SessionResult result;
  for (int i = 0; i < job.llama.n; ++i) result.candidates.push_back(Candidate{.index = i, .finish = FinishReason::Length});
  result.totals.prompt_tokens = static_cast<int>(job.prompt_ids.size());
  {
    std::lock_guard lock(mutex);
    ++counters.completed;
  }
  std::lock_guard lock(job.mutex);
  job.result = std::move(result);
  job.done = true;
}

nlohmann::json CompletionServer::Impl::llama_final(const Job& job, const Candidate& c, bool apply_fields) const {
  const size_t i = static_cast<size_t>(c.index);
  const bool limited = i < job.limited.size() && job.limited[i];
  LlamaOutcome o{.prompt_tokens = job.result->totals.prompt_tokens,
                 .cached_tokens = job.result->totals.cached_tokens,
                 .prefill_seconds = job.result->totals.prefill_seconds,
                 .truncated = job.prompt_truncated ||
                              job.result->totals.prompt_tokens + static_cast<int>(c.tokens.size()) >= context(),
                 .limited = limited,
                 .stopping_word = {},
                 .model = options.model_name,
                 .prompt_text = tokenizer().decode(job.prompt_ids),
                 .token_texts = {}};
  if (c.finish == FinishReason::Stop && !limited) {  // which stop string: the text goes on with it
    IncrementalDecoder decoder(tokenizer(), job.prompt_ids);
    const std::string whole = decoder.push(c.tokens) + decoder.finish();
    for (const std::string& s : job.llama.stop) {
      if (whole.compare(c.text.size(), s.size(), s) == 0) o.stopping_word = s;
    }
  }
  if (job.llama.n_probs > 0) o.token_texts = token_texts(tokenizer(), job.prompt_ids, c.tokens);
  if (apply_fields) return llama_final_json(job.llama, c, o);
  LlamaRequest every_field = job.llama;
  every_field.response_fields.clear();
  return llama_final_json(every_field, c, o);
}

// One completion: its object; several: an array of them, as llama.cpp answers.
nlohmann::json CompletionServer::Impl::llama_json(const Job& job) const {
  if (job.ranking) return ranked_llama_json(job);
  if (job.result->candidates.size() == 1) return llama_final(job, job.result->candidates[0]);
  json all = json::array();
  for (const Candidate& c : job.result->candidates) all.push_back(llama_final(job, c));
  return all;
}

// Ranks a best-of-N job's candidates by the deadline of its t_max_predict_ms, on the thread
// that answers it (the engine goes on with the next request meanwhile). False: the client
// went away or the server stops; the checks stop being waited for.
bool CompletionServer::Impl::rank(Job& job, HttpExchange& exchange) {
  for (const Candidate& c : job.result->candidates) {
    job.hole.candidates.push_back({.text = c.text, .mean_logprob = c.mean_logprob()});
  }
  const auto deadline =
      check_deadline(job.started, job.result->totals.prefill_seconds, job.llama.t_max_predict_ms, Clock::now());
  bool gone = false;
  const auto abandoned = [&] {
    std::lock_guard lock(mutex);
    return gone = stopping || !exchange.connected();
  };
  job.ranking = rank_suggestions(job.hole, options.checks, deadline, abandoned);
  return !gone;
}

// The best of a ranked job's candidates, as many as were asked for, best first, each with its
// place as its index; the first also carries the ranking (ranking_json). One asked for: its
// object; several: an array, as llama.cpp answers.
nlohmann::json CompletionServer::Impl::ranked_llama_json(const Job& job) const {
  const std::vector<int>& order = job.ranking->order;
  json all = json::array();
  for (size_t place = 0; place < order.size() && place < static_cast<size_t>(job.llama.n); ++place) {
    json one = llama_final(job, job.result->candidates[static_cast<size_t>(order[place])], false);
    one["index"] = place;
    if (place == 0) one.update(ranking_json(*job.ranking, job.hole));
    all.push_back(job.llama.response_fields.empty() ? one : select_fields(one, job.llama.response_fields));
  }
  return all.size() == 1 ? all[0] : all;
}

// llama.cpp's stream: a `data:` event per text delta, then each completion's final object
// (stop true, timings) once the session has ended; no [DONE]. A failure is an error event.
void CompletionServer::Impl::stream_llama(Job& job, HttpExchange& exchange, const HttpRequest& request) {
  if (!exchange.begin_stream(200, "text/event-stream", kStreamProbe, cors_headers(request))) {
    job.cancel = true;
    return;
  }
  const int prompt_tokens = static_cast<int>(job.prompt_ids.size());
  std::vector<CandidateDelta> deltas;
  for (;;) {
    bool done = false;
    {
      std::unique_lock lock(job.mutex);
      job.changed.wait_for(lock, kPollInterval, [&] { return !job.deltas.empty() || job.done; });
      deltas.swap(job.deltas);
      job.finished.clear();
      done = job.done;
    }
    std::string out;
    for (const CandidateDelta& d : deltas) out += sse_event(dump(llama_partial_json(d, prompt_tokens)));
    deltas.clear();
    if (done && !job.failure.empty()) {
      out += sse_event(dump(llama_error_json(ApiError(500, "generation failed: " + job.failure))));
    } else if (done) {
      for (const Candidate& c : job.result->candidates) out += sse_event(dump(llama_final(job, c)));
    }
    if (!out.empty() && !exchange.send(out)) break;
    if (done) {
      exchange.end_stream();
      return;
    }
    if (!exchange.connected()) break;
    std::lock_guard lock(mutex);
    if (stopping) break;
  }
  job.cancel = true;
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
  job.started = Clock::now();
  job.queue_seconds = std::chrono::duration<double>(job.started - job.queued).count();
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
    if (job.generation.max_new_tokens > 0) {
      result = generator.generate(job.generation, callbacks, &job.cancel);
    } else {  // echo with max_tokens 0: the prompt scored, nothing generated
      result.emplace();
      for (int i = 0; i < job.generation.n_candidates; ++i) {
        result->candidates.push_back(Candidate{.index = i, .finish = FinishReason::Length});
      }
      result->totals.prompt_tokens = static_cast<int>(job.prompt_ids.size());
    }
    if (job.request.echo && job.request.logprobs) {  // without logprobs the prompt is echoed unscored
      for (const Candidate& c : result->candidates) {
        std::vector<int> all = job.prompt_ids;
        all.insert(all.end(), c.tokens.begin(), c.tokens.end());
        job.echoed.push_back(all.size() < 2 ? TokenScores{} : generator.score_tokens(all, job.request.logprobs.value_or(0)));
      }
    }
    if (job.request.top_logprobs > 0) {
      for (const Candidate& c : result->candidates) {
        job.alternatives.push_back(generator.top_logprobs(job.prompt_ids, c.tokens, job.request.top_logprobs));
      }
    }
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
// A failure after the stream began is sent as an error event, as OpenAI's API does, and
// the stream ends without [DONE].
void CompletionServer::Impl::stream(Job& job, HttpExchange& exchange, const HttpRequest& request) {
  if (!exchange.begin_stream(200, "text/event-stream", kStreamProbe, cors_headers(request))) {
    job.cancel = true;
    return;
  }
  const json head = {{"id", job.id},
                    {"object", job.chat ? "chat.completion.chunk" : "text_completion"},
                    {"created", job.created},
                    {"model", options.model_name}};
  if (job.chat) {  // each choice's first chunk names the role, as OpenAI's do
    std::string out;
    for (int i = 0; i < job.request.n; ++i) {
      json chunk = head;
      chunk["choices"] = json::array({{{"index", i},
                                       {"delta", {{"role", "assistant"}, {"content", ""}}},
                                       {"logprobs", nullptr},
                                       {"finish_reason", nullptr}}});
      out += sse_event(dump(chunk));
    }
    if (!exchange.send(out)) {
      job.cancel = true;
      return;
    }
  }
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
    std::string out;
    for (const CandidateDelta& d : deltas) {
      json chunk = head;
      chunk["choices"] = json::array({delta_choice_json(job, d)});
      out += sse_event(dump(chunk));
    }
    for (const Candidate& c : finished) {
      json chunk = head;
      chunk["choices"] = json::array({choice_json(tokenizer(), job, c, false)});
      out += sse_event(dump(chunk));
    }
    deltas.clear();
    finished.clear();
    if (done && !job.failure.empty()) {
      out += sse_event(dump(error_json(ApiError(500, "generation failed: " + job.failure))));
    } else if (done) {
      if (job.request.include_usage) {
        json last = head;
        last["choices"] = json::array();
        last["usage"] = usage_json(job.result->totals);
        last["specula"] = extension_json(job);
        out += sse_event(dump(last));
      }
      out += sse_event("[DONE]");
    }
    if (!out.empty() && !exchange.send(out)) break;
    if (done) {
      exchange.end_stream();
      return;
    }
    if (!exchange.connected()) break;
    std::lock_guard lock(mutex);
    if (stopping) break;
  }
  job.cancel = true;
}

// Waits for the whole completion, watching the connection, then answers with its status:
// the status line waits until the outcome is known.
void CompletionServer::Impl::respond(Job& job, HttpExchange& exchange, const HttpRequest& request) {
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
    if (stopping_now || !exchange.connected()) {
      job.cancel = true;
      return;
    }
  }
  if (job.ranked && job.failure.empty() && !rank(job, exchange)) {
    std::lock_guard lock(mutex);  // generation had ended: the client left while it was ranked
    --counters.completed;
    ++counters.cancelled;
    return;
  }
  const nlohmann::json body = job.dialect == Dialect::OpenAi ? completion_json(job) : llama_json(job);
  HttpResponse res = job.failure.empty() ? json_response(body)
                                         : error_response(ApiError(500, "generation failed: " + job.failure), job.dialect);
  for (auto& h : cors_headers(request)) res.headers.push_back(std::move(h));
  exchange.respond(res);
}

json CompletionServer::Impl::completion_json(Job& job) const {
  json choices = json::array();
  for (const Candidate& c : job.result->candidates) choices.push_back(choice_json(tokenizer(), job, c, true));
  return {{"id", job.id},
          {"object", job.chat ? "chat.completion" : "text_completion"},
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
          {"kv_blocks_left", s.kv_blocks_left},
          {"prompt_cache", prompt_cache_json(generator.prompt_cache_stats())},
          {"connections", http.connections()}};
}

}  // namespace specula::serve
