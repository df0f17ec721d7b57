#include "serve/openai_api.h"

#include <cctype>
#include <cmath>
#include <limits>

namespace specula::serve {

using nlohmann::json;

namespace {

const char* error_type(int status) {
  if (status == 401) return "authentication_error";
  if (status == 429 || status == 503) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

// The field `name` of `body`, or null when it is absent or JSON null.
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void bad(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

long long integer(const json& value, const char* name, long long lo, long long hi) {
  if (!value.is_number_integer()) bad(name, std::string(name) + " must be an integer");
  if (value.is_number_unsigned() && value.get<unsigned long long>() > static_cast<unsigned long long>(hi)) {
    bad(name, std::string(name) + " must be at most " + std::to_string(hi));
  }
  const long long v = value.get<long long>();
  if (v < lo || v > hi) {
    bad(name, std::string(name) + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " +
                  std::to_string(v));
  }
  return v;
}

// A number as the engine holds it, in single precision: the range is checked after the
// conversion, so that a top_p of 1e-300, which becomes 0, is refused here and not found
// out by the sampler after the response has begun.
float number(const json& value, const char* name, float lo, float hi, bool lo_open = false) {
  if (!value.is_number()) bad(name, std::string(name) + " must be a number");
  const double given = value.get<double>();
  const float v = static_cast<float>(given);
  if (!std::isfinite(given) || !std::isfinite(v) || v > hi || (lo_open ? v <= lo : v < lo)) {
    bad(name, std::string(name) + " must be in " + (lo_open ? "(" : "[") + json(lo).dump() + ", " + json(hi).dump() +
                  "], got " + json(given).dump() + (double(v) != given ? " (" + json(v).dump() + " in single precision)" : ""));
  }
  return v;
}

std::string text(const json& value, const char* name) {
  if (!value.is_string()) bad(name, std::string(name) + " must be a string");
  return value.get<std::string>();
}

bool boolean(const json& value, const char* name) {
  if (!value.is_boolean()) bad(name, std::string(name) + " must be true or false");
  return value.get<bool>();
}

std::string prompt_of(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array() && value.size() == 1 && value[0].is_string()) return value[0].get<std::string>();
  if (value.is_array() && !value.empty() && value[0].is_string()) {
    bad("prompt", "a list of prompts is not supported: send one prompt per request (n gives several completions)");
  }
  bad("prompt", "prompt must be a string or a list of token ids");
}

// A prompt of token ids: a list of integers, or a list holding one such list.
std::optional<std::vector<int>> prompt_ids_of(const json& value) {
  const json* list = &value;
  if (value.is_array() && value.size() == 1 && value[0].is_array()) list = &value[0];
  if (!list->is_array() || list->empty() || !(*list)[0].is_number()) return std::nullopt;
  std::vector<int> ids;
  for (const json& id : *list) {
    if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() > std::numeric_limits<int>::max()) {
      bad("prompt", "a prompt of token ids holds non-negative integers only");
    }
    ids.push_back(id.get<int>());
  }
  return ids;
}

std::vector<std::string> stops_of(const json& value, int max_stop) {
  std::vector<std::string> stops;
  if (value.is_string()) {
    stops.push_back(value.get<std::string>());
  } else if (value.is_array()) {
    for (const json& s : value) stops.push_back(text(s, "stop"));
  } else {
    bad("stop", "stop must be a string or a list of strings");
  }
  if (static_cast<int>(stops.size()) > max_stop) bad("stop", "at most " + std::to_string(max_stop) + " stop strings");
  for (const auto& s : stops) {
    if (s.empty()) bad("stop", "a stop string is empty");
  }
  return stops;
}

// Fields Specula knows but cannot honour: refused rather than silently ignored.
void refuse_unsupported(const json& body, int n) {
  if (const json* v = field(body, "best_of"); v && integer(*v, "best_of", 1, kMaxCandidates) != n) {
    bad("best_of", "best_of is not supported (other than equal to n)");
  }
  for (const char* penalty : {"presence_penalty", "frequency_penalty"}) {
    if (const json* v = field(body, penalty); v && number(*v, penalty, -2.0f, 2.0f) != 0.0f) {
      bad(penalty, std::string(penalty) + " is not supported");
    }
  }
  if (const json* v = field(body, "logit_bias"); v && !(v->is_object() && v->empty())) {
    bad("logit_bias", "logit_bias is not supported");
  }
}

std::vector<float> logprobs_of(const json& logprobs) {
  std::vector<float> out;
  if (!logprobs.is_object()) return out;
  if (const json* list = field(logprobs, "token_logprobs"); list && list->is_array()) {  // the completions format
    for (const json& v : *list)
      if (v.is_number()) out.push_back(v.get<float>());
  } else if (const json* content = field(logprobs, "content"); content && content->is_array()) {  // the chat format
    for (const json& entry : *content)
      if (const json* v = entry.is_object() ? field(entry, "logprob") : nullptr; v && v->is_number()) {
        out.push_back(v->get<float>());
      }
  }
  return out;
}

int int_or(const json& object, const char* name, int fallback) {
  const json* v = object.is_object() ? field(object, name) : nullptr;
  return v && v->is_number_integer() ? v->get<int>() : fallback;
}

double double_or(const json& object, const char* name) {
  const json* v = field(object, name);
  return v && v->is_number() ? v->get<double>() : 0.0;
}

ChoiceUpdate choice_of(const json& choice) {
  if (!choice.is_object()) throw std::runtime_error("a choice is not a JSON object");
  ChoiceUpdate u;
  u.index = int_or(choice, "index", 0);
  if (const json* t = field(choice, "text"); t && t->is_string()) u.text = t->get<std::string>();
  for (const char* chat : {"delta", "message"}) {  // the chat shapes
    const json* m = field(choice, chat);
    const json* content = m && m->is_object() ? field(*m, "content") : nullptr;
    if (content && content->is_string()) u.text = content->get<std::string>();
  }
  if (const json* l = field(choice, "logprobs")) u.logprobs = logprobs_of(*l);
  const json* ext = field(choice, "specula");
  if (ext && ext->is_object()) {
    u.from_specula = true;
    u.tokens = int_or(*ext, "tokens", -1);
    u.accepted = int_or(*ext, "accepted", -1);
    u.proposed = int_or(*ext, "proposed", -1);
    if (const json* ids = field(*ext, "token_ids"); ids && ids->is_array()) {
      for (const json& id : *ids)
        if (id.is_number_integer()) u.token_ids.push_back(id.get<int>());
    }
  }
  const json* reason = field(choice, "finish_reason");
  if (!reason || !reason->is_string()) return u;
  const json* exact = ext && ext->is_object() ? field(*ext, "finish") : nullptr;
  if (exact && exact->is_string()) u.finish = finish_reason_from_name(exact->get<std::string>());
  if (u.finish) return u;
  if (reason->get<std::string>() == "length") {
    u.finish = FinishReason::Length;
  } else {
    // vLLM (stop_reason) and SGLang (matched_stop) say why: a stop string, or a stop token
    // (an id, or null for the end-of-sequence token)
    u.finish = FinishReason::Stop;
    for (const char* why : {"stop_reason", "matched_stop"}) {
      const auto it = choice.find(why);
      if (it != choice.end() && (it->is_null() || it->is_number())) u.finish = FinishReason::Eos;
    }
  }
  return u;
}

}  // namespace

ApiError::ApiError(int status_code, const std::string& message, std::string param_name, std::string error_code)
    : std::runtime_error(message), status(status_code), param(std::move(param_name)), code(std::move(error_code)) {}

json error_json(const ApiError& error) {
  return {{"error",
           {{"message", error.what()},
            {"type", error_type(error.status)},
            {"param", error.param.empty() ? json(nullptr) : json(error.param)},
            {"code", error.code.empty() ? json(nullptr) : json(error.code)}}}};
}

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

namespace {

json request_object(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) throw ApiError(400, "the request body is not valid JSON");
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return j;
}

// The fields completions and chat completions share: the model, n, sampling, stops and streaming.
void parse_common_fields(const json& j, const RequestLimits& limits, CompletionRequest& r) {
  if (const json* v = field(j, "model")) r.model = text(*v, "model");
  if (const json* v = field(j, "n")) r.n = static_cast<int>(integer(*v, "n", 1, limits.max_n));
  if (const json* v = field(j, "max_tokens")) r.max_tokens = static_cast<int>(integer(*v, "max_tokens", 1, limits.max_tokens));
  if (const json* v = field(j, "temperature")) r.temperature = number(*v, "temperature", 0.0f, 2.0f);
  if (const json* v = field(j, "top_p")) r.top_p = number(*v, "top_p", 0.0f, 1.0f, true);
  if (const json* v = field(j, "top_k")) {
    const long long k = integer(*v, "top_k", -1, std::numeric_limits<int>::max());  // vLLM: -1 is off
    r.top_k = k < 0 ? 0 : static_cast<int>(k);
  }
  if (const json* v = field(j, "min_p")) r.min_p = number(*v, "min_p", 0.0f, 1.0f);
  if (const json* v = field(j, "seed")) {
    if (!v->is_number_integer()) bad("seed", "seed must be an integer");
    r.seed = v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
  }
  if (const json* v = field(j, "stop")) r.stop = stops_of(*v, limits.max_stop);
  if (const json* v = field(j, "stream")) r.stream = boolean(*v, "stream");
  if (const json* v = field(j, "stream_options")) {
    if (!v->is_object()) bad("stream_options", "stream_options must be an object");
    if (const json* u = field(*v, "include_usage")) r.include_usage = boolean(*u, "stream_options.include_usage");
  }
}

}  // namespace

CompletionRequest parse_completion_request(std::string_view body, const RequestLimits& limits) {
  const json j = request_object(body);
  CompletionRequest r;
  const json* prompt = field(j, "prompt");
  if (!prompt) bad("prompt", "prompt is required");
  if (auto ids = prompt_ids_of(*prompt)) {
    r.prompt_ids = std::move(*ids);
  } else {
    r.prompt = prompt_of(*prompt);
  }
  if (const json* v = field(j, "suffix")) r.suffix = text(*v, "suffix");
  if (!r.prompt_ids.empty() && !r.suffix.empty()) bad("suffix", "a suffix goes with a prompt of text, not of token ids");
  if (const json* v = field(j, "echo")) r.echo = boolean(*v, "echo");
  json common = j;
  if (r.echo && common.contains("max_tokens")) {  // 0: score the prompt, generate nothing
    r.max_tokens = static_cast<int>(integer(common["max_tokens"], "max_tokens", 0, limits.max_tokens));
    common.erase("max_tokens");
  }
  parse_common_fields(common, limits, r);
  if (r.echo && r.stream) bad("echo", "echo is not supported with stream");
  if (const json* v = field(j, "logprobs")) r.logprobs = static_cast<int>(integer(*v, "logprobs", 0, 5));
  refuse_unsupported(j, r.n);
  return r;
}

namespace {

// A message's content: a string, or OpenAI's list of content parts of which only text parts
// are read, joined by newlines (as vLLM joins them for templates that expect a string).
std::string message_content(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad("messages", where + ".content must be a string or a list of text parts");
  std::string joined;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string at = where + ".content[" + std::to_string(i) + "]";
    if (!part.is_object() || part.value("type", json()) != "text") {
      bad("messages", at + " must be {\"type\": \"text\", \"text\": ...}: only text parts are supported");
    }
    const json* t = field(part, "text");
    if (!t || !t->is_string()) bad("messages", at + ".text must be a string");
    if (i > 0) joined += "\n";
    joined += t->get<std::string>();
  }
  return joined;
}

// The conversation as the template reads it: every message an object with a string role and
// its content as a string; other keys (name, ...) pass through.
nlohmann::ordered_json messages_of(const json& messages, int max_messages) {
  if (!messages.is_array()) bad("messages", "messages must be an array of {\"role\", \"content\"} objects");
  if (messages.empty()) bad("messages", "messages must not be empty");
  if (static_cast<int>(messages.size()) > max_messages) {
    bad("messages", "at most " + std::to_string(max_messages) + " messages");
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad("messages", where + " must be an object");
    const json* role = field(m, "role");
    if (!role || !role->is_string()) bad("messages", where + ".role must be a string");
    const json* content = field(m, "content");
    if (!content) bad("messages", where + ".content is required");
    nlohmann::ordered_json message = {{"role", role->get<std::string>()}, {"content", message_content(*content, where)}};
    for (const auto& [key, value] : m.items()) {
      if (key != "role" && key != "content") message[key] = value;
    }
    out.push_back(std::move(message));
  }
  return out;
}

}  // namespace

ChatRequest parse_chat_request(std::string_view body, const RequestLimits& limits) {
  const json j = request_object(body);
  ChatRequest chat;
  CompletionRequest& r = chat.completion;
  const json* messages = field(j, "messages");
  if (!messages) bad("messages", "messages is required");
  chat.messages = messages_of(*messages, limits.max_messages);
  r.max_tokens = 0;  // unless given: what the context leaves
  parse_common_fields(j, limits, r);
  if (const json* v = field(j, "max_completion_tokens")) {
    r.max_tokens = static_cast<int>(integer(*v, "max_completion_tokens", 1, limits.max_tokens));
  }
  if (const json* v = field(j, "logprobs"); v && boolean(*v, "logprobs")) r.logprobs = 0;
  if (const json* v = field(j, "top_logprobs")) {
    r.top_logprobs = static_cast<int>(integer(*v, "top_logprobs", 0, 20));
    if (!r.logprobs) bad("top_logprobs", "top_logprobs needs logprobs: true");
    // the alternatives come from a pass over each whole sequence once it is generated
    if (r.top_logprobs > 0 && r.stream) bad("top_logprobs", "top_logprobs is not supported with stream: true");
  }
  const json* continue_final = field(j, "continue_final_message");
  const json* generation_prompt = field(j, "add_generation_prompt");
  const bool asked_continue = continue_final && boolean(*continue_final, "continue_final_message");
  const bool asked_generation = generation_prompt && boolean(*generation_prompt, "add_generation_prompt");
  const bool ends_with_assistant = chat.messages.back()["role"] == "assistant";
  if (asked_continue && asked_generation) {
    bad("continue_final_message", "continue_final_message and add_generation_prompt cannot both be true");
  }
  if (asked_continue && !ends_with_assistant) {
    bad("continue_final_message", "continue_final_message needs the last message to be the assistant's");
  }
  chat.continue_final = ends_with_assistant && !asked_generation;
  for (const char* unsupported : {"tools", "functions", "response_format"}) {
    if (field(j, unsupported)) bad(unsupported, std::string(unsupported) + " is not supported");
  }
  refuse_unsupported(j, r.n);
  return chat;
}

json completion_request_json(const CompletionRequest& r, bool send_n) {
  json j = {{"prompt", r.prompt},     {"max_tokens", r.max_tokens}, {"temperature", r.temperature},
            {"top_p", r.top_p},       {"stream", r.stream}};
  if (!r.model.empty()) j["model"] = r.model;
  if (send_n) j["n"] = r.n;
  if (!r.suffix.empty()) j["suffix"] = r.suffix;
  if (r.top_k > 0) j["top_k"] = r.top_k;
  if (r.min_p > 0) j["min_p"] = r.min_p;
  if (r.seed) j["seed"] = *r.seed;
  if (!r.stop.empty()) j["stop"] = r.stop;
  if (r.stream && r.include_usage) j["stream_options"] = {{"include_usage", true}};
  if (r.logprobs) j["logprobs"] = *r.logprobs;
  return j;
}

json chat_request_json(const CompletionRequest& r, const nlohmann::ordered_json& messages, bool send_n) {
  json j = completion_request_json(r, send_n);
  j.erase("prompt");
  j.erase("suffix");
  j["messages"] = messages;
  if (r.logprobs) j["logprobs"] = true;
  if (!messages.empty() && messages.back().value("role", "") == "assistant") {
    j["continue_final_message"] = true;
    j["add_generation_prompt"] = false;
  }
  return j;
}

const char* openai_finish_reason(FinishReason reason) { return reason == FinishReason::Length ? "length" : "stop"; }

std::optional<FinishReason> finish_reason_from_name(std::string_view name) {
  for (FinishReason r : {FinishReason::Running, FinishReason::Stop, FinishReason::Eos, FinishReason::Length,
                         FinishReason::Budget, FinishReason::Cancelled}) {
    if (name == finish_reason_name(r)) return r;
  }
  return std::nullopt;
}

json totals_json(const SessionTotals& t, int n_candidates) {
  return {{"wall_s", t.wall_seconds},
          {"tokens_per_s", t.tokens_per_second()},
          {"ms_per_token_per_seq", t.ms_per_token_per_sequence(n_candidates)},
          {"acceptance_rate", t.acceptance_rate()},
          {"accepted", t.accepted},
          {"proposed", t.proposed},
          {"target_forwards", t.target_forwards},
          {"target_tokens", t.target_tokens},
          {"draft_forwards", t.draft_forwards},
          {"steps", t.steps},
          {"prompt_tokens", t.prompt_tokens},
          {"generated_tokens", t.generated_tokens},
          {"peak_kv_blocks", t.peak_blocks},
          {"kv_blocks_left", t.kv_blocks_left}};
}

SessionTotals totals_from_json(const json& j) {
  SessionTotals t;
  if (!j.is_object()) return t;
  t.wall_seconds = double_or(j, "wall_s");
  t.accepted = int_or(j, "accepted", 0);
  t.proposed = int_or(j, "proposed", 0);
  t.target_forwards = int_or(j, "target_forwards", 0);
  t.target_tokens = int_or(j, "target_tokens", 0);
  t.draft_forwards = int_or(j, "draft_forwards", 0);
  t.steps = int_or(j, "steps", 0);
  t.prompt_tokens = int_or(j, "prompt_tokens", 0);
  t.generated_tokens = int_or(j, "generated_tokens", 0);
  t.peak_blocks = int_or(j, "peak_kv_blocks", 0);
  t.kv_blocks_left = int_or(j, "kv_blocks_left", 0);
  return t;
}

CompletionUpdate parse_completion_update(const json& body) {
  if (!body.is_object()) throw std::runtime_error("the server sent JSON that is not an object");
  if (const json* e = field(body, "error")) {
    throw std::runtime_error("the server reported an error: " + error_message(body.dump(), e->dump()));
  }
  const json* choices = field(body, "choices");
  if (!choices || !choices->is_array()) throw std::runtime_error("the server sent an object without choices");
  CompletionUpdate u;
  for (const json& c : *choices) u.choices.push_back(choice_of(c));
  if (const json* ext = field(body, "specula"); ext && ext->is_object()) {
    if (const json* t = field(*ext, "totals")) u.totals = totals_from_json(*t);
  }
  if (const json* usage = field(body, "usage")) u.prompt_tokens = int_or(*usage, "prompt_tokens", -1);
  return u;
}

std::string error_message(std::string_view body, const std::string& fallback) {
  const json j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object()) {
    for (const char* key : {"error", "detail", "message"}) {
      const json* v = field(j, key);
      if (!v) continue;
      if (v->is_string()) return v->get<std::string>();
      if (const json* m = v->is_object() ? field(*v, "message") : nullptr; m && m->is_string()) {
        return m->get<std::string>();
      }
    }
  }
  std::string plain(body.substr(0, 300));
  while (!plain.empty() && std::isspace(static_cast<unsigned char>(plain.back()))) plain.pop_back();
  return plain.empty() || plain.front() == '{' ? fallback : plain;
}

}  // namespace specula::serve
