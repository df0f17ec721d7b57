#include "serve/llama_api.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace specula::serve {

using nlohmann::json;

namespace {

// llama.cpp's defaults for a request that says nothing (tools/server/README.md).
constexpr float kTemperature = 0.8f;
constexpr int kTopK = 40;
constexpr float kTopP = 0.95f;
constexpr float kMinP = 0.05f;

const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void bad(const std::string& message) { throw ApiError(400, message); }
[[noreturn]] void unsupported(const std::string& message) { throw ApiError(501, message); }

long long integer(const json& v, const char* name, long long lo, long long hi) {
  if (!v.is_number_integer()) bad(std::string(name) + " must be an integer");
  if (v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(hi)) {
    bad(std::string(name) + " must be at most " + std::to_string(hi));
  }
  const long long x = v.get<long long>();
  if (x < lo || x > hi) {
    bad(std::string(name) + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " +
        std::to_string(x));
  }
  return x;
}

double number(const json& v, const char* name) {
  if (!v.is_number() || !std::isfinite(v.get<double>())) bad(std::string(name) + " must be a finite number");
  return v.get<double>();
}

std::string text(const json& v, const char* name) {
  if (!v.is_string()) bad(std::string(name) + " must be a string");
  return v.get<std::string>();
}

bool boolean(const json& v, const char* name) {
  if (!v.is_boolean()) bad(std::string(name) + " must be true or false");
  return v.get<bool>();
}

std::vector<std::string> strings(const json& v, const char* name) {
  if (!v.is_array()) bad(std::string(name) + " must be a list of strings");
  std::vector<std::string> out;
  for (const json& s : v) out.push_back(text(s, name));
  return out;
}

std::vector<PromptPiece> prompt_of(const json& v) {
  if (v.is_string()) return {PromptPiece{.text = v.get<std::string>()}};
  if (!v.is_array()) bad("prompt must be a string or a list of token ids and strings");
  std::vector<PromptPiece> pieces;
  int texts = 0;
  for (const json& p : v) {
    if (p.is_string()) {
      pieces.push_back(PromptPiece{.text = p.get<std::string>()});
      ++texts;
    } else if (p.is_number_integer()) {
      pieces.push_back(
          PromptPiece{.id = static_cast<int>(integer(p, "a prompt token id", 0, std::numeric_limits<int>::max()))});
    } else {
      bad("several prompts in one request are not supported: send one prompt (a string, or token ids and strings)");
    }
  }
  if (texts > 1 && texts == static_cast<int>(pieces.size())) {
    bad("several prompts in one request are not supported: send one prompt per request");
  }
  return pieces;
}

std::vector<ExtraChunk> extra_of(const json& v) {
  if (!v.is_array()) bad("\"input_extra\" must be an array of {\"filename\": string, \"text\": string}");
  std::vector<ExtraChunk> chunks;
  for (const json& c : v) {
    const json* t = c.is_object() ? field(c, "text") : nullptr;
    if (!t || !t->is_string()) bad("\"input_extra\" chunk must contain a \"text\" field with a string value");
    ExtraChunk chunk{.filename = "tmp", .text = t->get<std::string>()};
    if (const json* f = field(c, "filename")) {
      if (!f->is_string()) bad("\"input_extra\" chunk's \"filename\" field must be a string");
      chunk.filename = f->get<std::string>();
    }
    chunks.push_back(std::move(chunk));
  }
  return chunks;
}

// llama.cpp's sampler names, and the one-letter forms of its --sampling-seq.
std::string sampler_name(const std::string& name) {
  static const std::vector<std::pair<std::string, std::string>> known = {
      {"top_k", "top_k"},   {"k", "top_k"},
      {"top_p", "top_p"},   {"p", "top_p"},
      {"nucleus", "top_p"}, {"min_p", "min_p"},
      {"m", "min_p"},       {"temperature", "temperature"},
      {"t", "temperature"}, {"temp", "temperature"},
      {"typ_p", "typ_p"},   {"typical_p", "typ_p"},
      {"y", "typ_p"},       {"dry", "dry"},
      {"d", "dry"},         {"xtc", "xtc"},
      {"x", "xtc"},         {"infill", "infill"},
      {"i", "infill"},      {"penalties", "penalties"},
      {"e", "penalties"},   {"top_n_sigma", "top_n_sigma"},
      {"s", "top_n_sigma"}};
  for (const auto& [alias, canonical] : known)
    if (alias == name) return canonical;
  bad("unknown sampler \"" + name + "\" in samplers");
}

std::vector<std::string> samplers_of(const json& v) {
  std::vector<std::string> out;
  if (v.is_string()) {  // llama.cpp also takes the one-letter sequence ("kpt")
    for (const char c : v.get<std::string>()) out.push_back(sampler_name(std::string(1, c)));
    return out;
  }
  for (const std::string& s : strings(v, "samplers")) out.push_back(sampler_name(s));
  return out;
}

// llama.cpp builds its sampler chain from the list: a sampler left out does not run. The
// samplers Specula lacks have no effect at their default settings, which is checked below.
SamplingParams sampling_of(const json& j, const std::vector<std::string>& samplers, bool listed) {
  SamplingParams s{.temperature = kTemperature, .top_k = kTopK, .top_p = kTopP, .min_p = kMinP, .seed = 0};
  if (const json* v = field(j, "temperature"))
    s.temperature = static_cast<float>(std::max(0.0, number(*v, "temperature")));
  if (const json* v = field(j, "top_k"))
    s.top_k = static_cast<int>(std::max<long long>(0, integer(*v, "top_k", -1, std::numeric_limits<int>::max())));
  if (const json* v = field(j, "top_p")) s.top_p = static_cast<float>(std::clamp(number(*v, "top_p"), 0.0, 1.0));
  if (const json* v = field(j, "min_p")) s.min_p = static_cast<float>(std::clamp(number(*v, "min_p"), 0.0, 1.0));
  if (s.top_p <= 0.0f) s.top_p = std::numeric_limits<float>::min();  // llama.cpp keeps at least one token
  if (listed) {
    const auto has = [&](const char* name) {
      return std::find(samplers.begin(), samplers.end(), name) != samplers.end();
    };
    if (!has("temperature")) s.temperature = 1.0f;  // no temperature sampler: the distribution as it is
    if (!has("top_k")) s.top_k = 0;
    if (!has("top_p")) s.top_p = 1.0f;
    if (!has("min_p")) s.min_p = 0.0f;
  }
  return s;
}

// Fields of samplers and features Specula does not have: accepted at their neutral value.
void refuse_unsupported(const json& j) {
  const struct {
    const char* name;
    double neutral;
  } numeric[] = {{"repeat_penalty", 1.0},  {"presence_penalty", 0.0}, {"frequency_penalty", 0.0},
                 {"dry_multiplier", 0.0},  {"mirostat", 0.0},         {"typical_p", 1.0},
                 {"xtc_probability", 0.0}, {"dynatemp_range", 0.0}};
  for (const auto& f : numeric) {
    if (const json* v = field(j, f.name); v && number(*v, f.name) != f.neutral) {
      unsupported(std::string(f.name) + " is not supported by this server (Specula has no such sampler)");
    }
  }
  if (const json* v = field(j, "top_n_sigma"); v && number(*v, "top_n_sigma") > 0)
    unsupported("top_n_sigma is not supported by this server");
  if (const json* v = field(j, "ignore_eos"); v && boolean(*v, "ignore_eos"))
    unsupported("ignore_eos is not supported by this server");
  if (const json* v = field(j, "grammar"); v && !(v->is_string() && v->get<std::string>().empty()))
    unsupported("grammars are not supported by this server");
  if (field(j, "json_schema")) unsupported("json_schema is not supported by this server");
  for (const char* name : {"logit_bias", "lora"}) {
    if (const json* v = field(j, name); v && !((v->is_array() || v->is_object()) && v->empty())) {
      unsupported(std::string(name) + " is not supported by this server");
    }
  }
}

void read_common(const json& j, LlamaRequest& r, int max_n) {
  const json* predict = field(j, "n_predict");
  if (!predict) predict = field(j, "max_tokens");
  if (predict) r.n_predict = static_cast<int>(integer(*predict, "n_predict", -1, std::numeric_limits<int>::max()));
  if (const json* v = field(j, "n_indent"))
    r.n_indent = static_cast<int>(integer(*v, "n_indent", 0, std::numeric_limits<int>::max()));
  const json* n = field(j, "n_cmpl");
  if (!n) n = field(j, "n");
  if (n) r.n = static_cast<int>(integer(*n, "n_cmpl", 1, max_n));
  const json* listed = field(j, "samplers");
  if (listed) r.samplers = samplers_of(*listed);
  r.sampling = sampling_of(j, r.samplers, listed != nullptr);
  if (const json* v = field(j, "seed")) {
    const long long seed = integer(*v, "seed", -1, std::numeric_limits<long long>::max());
    if (seed >= 0) r.seed = static_cast<uint64_t>(seed);
  }
  if (const json* v = field(j, "stop")) {
    r.stop = v->is_string() ? std::vector<std::string>{v->get<std::string>()} : strings(*v, "stop");
    std::erase(r.stop, std::string());
  }
  if (const json* v = field(j, "stream")) r.stream = boolean(*v, "stream");
  if (const json* v = field(j, "n_probs")) r.n_probs = static_cast<int>(integer(*v, "n_probs", 0, 100));
  if (const json* v = field(j, "return_tokens")) r.return_tokens = boolean(*v, "return_tokens");
  if (const json* v = field(j, "t_max_predict_ms"))
    r.t_max_predict_ms = static_cast<long long>(number(*v, "t_max_predict_ms"));
  if (const json* v = field(j, "t_max_prompt_ms"))
    number(*v, "t_max_prompt_ms");  // read; llama.cpp does not act on it either
  if (const json* v = field(j, "cache_prompt")) r.cache_prompt = boolean(*v, "cache_prompt");
  if (const json* v = field(j, "response_fields")) r.response_fields = strings(*v, "response_fields");
  refuse_unsupported(j);
}

// The tail of `s` within `max_bytes`, starting on a character boundary.
std::string_view tail(std::string_view s, size_t max_bytes, bool& cut) {
  if (s.size() <= max_bytes) return s;
  cut = true;
  size_t from = s.size() - max_bytes;
  while (from < s.size() && (static_cast<unsigned char>(s[from]) & 0xC0) == 0x80) ++from;
  return s.substr(from);
}

std::string_view head(std::string_view s, size_t max_bytes, bool& cut) {
  if (s.size() <= max_bytes) return s;
  cut = true;
  size_t to = max_bytes;
  while (to > 0 && (static_cast<unsigned char>(s[to]) & 0xC0) == 0x80) --to;
  return s.substr(0, to);
}

std::string prompt_text(const LlamaRequest& r) {
  std::string out;
  for (const PromptPiece& p : r.prompt) out += p.text;
  return out;
}

void append(std::vector<int>& to, const std::vector<int>& ids) { to.insert(to.end(), ids.begin(), ids.end()); }

// input_extra as ids, in llama.cpp's layout.
std::vector<int> extra_ids(const Tokenizer& tokenizer, const std::vector<ExtraChunk>& extra, size_t max_bytes,
                           bool& cut) {
  const FimTokens& fim = tokenizer.fim();
  std::vector<int> ids;
  if (extra.empty()) return ids;
  if (fim.repo >= 0) {
    ids.push_back(fim.repo);
    append(ids, tokenizer.encode("myproject\n", false));
  }
  size_t bytes = 0;  // the newest chunks are the ones kept when cut: count from the end
  size_t first = extra.size();
  while (first > 0 && bytes + extra[first - 1].text.size() <= max_bytes) bytes += extra[--first].text.size();
  if (first > 0) cut = true;
  for (size_t i = first; i < extra.size(); ++i) {
    if (fim.sep >= 0) {
      ids.push_back(fim.sep);
      append(ids, tokenizer.encode(extra[i].filename + "\n", false));
    } else {
      append(ids, tokenizer.encode("\n\n--- snippet ---\n\n", false));
    }
    append(ids, tokenizer.encode(extra[i].text, false));
  }
  if (fim.sep >= 0) {
    ids.push_back(fim.sep);
    append(ids, tokenizer.encode("filename\n", false));
  }
  return ids;
}

// The indentation of `line`: its leading spaces and tabs.
int indentation(std::string_view line) {
  int n = 0;
  while (n < static_cast<int>(line.size()) &&
         (line[static_cast<size_t>(n)] == ' ' || line[static_cast<size_t>(n)] == '\t'))
    ++n;
  return n;
}

}  // namespace

LlamaRequest parse_llama_request(LlamaEndpoint endpoint, std::string_view body, int max_n) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) bad("the request body is not valid JSON (or not valid UTF-8)");
  if (!j.is_object()) bad("the request body must be a JSON object");
  LlamaRequest r;
  r.endpoint = endpoint;
  if (endpoint == LlamaEndpoint::Completion) {
    const json* prompt = field(j, "prompt");
    if (!prompt) bad("\"prompt\" must be provided");
    r.prompt = prompt_of(*prompt);
  } else {
    if (const json* v = field(j, "prompt")) r.prompt = {PromptPiece{.text = text(*v, "prompt")}};
    if (const json* v = field(j, "input_prefix")) r.input_prefix = text(*v, "input_prefix");
    if (const json* v = field(j, "input_suffix")) r.input_suffix = text(*v, "input_suffix");
    if (const json* v = field(j, "input_extra")) r.input_extra = extra_of(*v);
  }
  read_common(j, r, max_n);
  return r;
}

json llama_error_json(const ApiError& error) {
  const char* type = "invalid_request_error";
  switch (error.status) {
    case 401:
      type = "authentication_error";
      break;
    case 403:
      type = "permission_error";
      break;
    case 404:
      type = "not_found_error";
      break;
    case 501:
      type = "not_supported_error";
      break;
    case 503:
      type = "unavailable_error";
      break;
    default:
      type = error.status >= 500 ? "server_error" : "invalid_request_error";
  }
  return {{"error", {{"code", error.status}, {"message", error.what()}, {"type", type}}}};
}

ApiError infill_not_supported(const FimTokens& fim) {
  std::string missing;
  if (fim.prefix < 0) missing += "prefix token is missing. ";
  if (fim.suffix < 0) missing += "suffix token is missing. ";
  if (fim.middle < 0) missing += "middle token is missing. ";
  return ApiError(501, "Infill is not supported by this model: " + missing);
}

json select_fields(const json& response, const std::vector<std::string>& paths) {
  json out = json::object();
  for (const std::string& path : paths) {
    const json* at = &response;
    size_t from = 0;
    bool found = true;
    while (found) {
      const size_t slash = path.find('/', from);
      const std::string key = path.substr(from, slash == std::string::npos ? std::string::npos : slash - from);
      const auto it = at->is_object() ? at->find(key) : at->end();
      found = at->is_object() && it != at->end();
      if (found) at = &*it;
      if (slash == std::string::npos) break;
      from = slash + 1;
    }
    if (found) out[path] = *at;
  }
  return out;
}

std::vector<int> completion_prompt_ids(const Tokenizer& tokenizer, const std::vector<PromptPiece>& prompt) {
  std::vector<int> ids;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i].id >= 0) {
      ids.push_back(prompt[i].id);
    } else {
      append(ids, tokenizer.encode(prompt[i].text, i == 0, true));
    }
  }
  return ids;
}

InfillPrompt infill_prompt(const Tokenizer& tokenizer, const LlamaRequest& r, int max_tokens, bool fallback,
                           bool spm_infill) {
  const FimTokens& fim = tokenizer.fim();
  const size_t max_bytes = static_cast<size_t>(max_tokens) * 64;  // no token stands for more text
  InfillPrompt out;
  const std::string before(tail(r.input_prefix + prompt_text(r), max_bytes, out.truncated));
  const std::string after(head(r.input_suffix, max_bytes, out.truncated));
  const int bos = tokenizer.vocabulary().add_bos ? tokenizer.bos() : -1;
  if (!fim.complete()) {
    if (!fallback) throw infill_not_supported(fim);
    std::vector<int> ids = tokenizer.encode(before, false);
    const size_t room = static_cast<size_t>(std::max(1, max_tokens - (bos >= 0 ? 1 : 0)));
    if (ids.size() > room) {
      ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(room));
      out.truncated = true;
    }
    if (bos >= 0) out.ids.push_back(bos);
    append(out.ids, ids);
    out.hole_indent = hole_indentation(before, after);
    out.next_line = std::string(next_line(after));
    return out;
  }
  Tokenizer::FimParts parts = tokenizer.fim_parts(before, after);
  const int room = std::max(2, max_tokens - 3 - (bos >= 0 ? 1 : 0));  // the prefix, suffix and middle tokens
  const size_t prefix_take = std::min(parts.prefix.size(), static_cast<size_t>(3 * room / 4));
  const size_t suffix_take = std::min(parts.suffix.size(), static_cast<size_t>(room) - prefix_take);
  out.truncated |= prefix_take < parts.prefix.size() || suffix_take < parts.suffix.size();
  parts.prefix.erase(parts.prefix.begin(), parts.prefix.end() - static_cast<std::ptrdiff_t>(prefix_take));
  parts.suffix.resize(suffix_take);
  std::vector<int> extra = extra_ids(tokenizer, r.input_extra, max_bytes, out.truncated);
  const size_t extra_take = std::min(extra.size(), static_cast<size_t>(room) - prefix_take - suffix_take);
  out.truncated |= extra_take < extra.size();
  if (bos >= 0) out.ids.push_back(bos);
  out.ids.insert(out.ids.end(), extra.end() - static_cast<std::ptrdiff_t>(extra_take), extra.end());
  append_fim_parts(out.ids, fim, parts, spm_infill || fim.spm);
  return out;
}

size_t indent_end(std::string_view text, int n_indent) {
  if (n_indent <= 0) return std::string_view::npos;
  for (size_t nl = text.find('\n'); nl != std::string_view::npos; nl = text.find('\n', nl + 1)) {
    const size_t pos = nl + 1 + static_cast<size_t>(indentation(text.substr(nl + 1)));
    if (pos < text.size() && static_cast<int>(pos - nl - 1) < n_indent) return pos;
  }
  return std::string_view::npos;
}

size_t dedent_end(std::string_view text, int hole_indent) {
  if (hole_indent <= 0) return std::string_view::npos;
  for (size_t nl = text.find('\n'); nl != std::string_view::npos; nl = text.find('\n', nl + 1)) {
    const size_t start = nl + 1;
    const size_t pos = start + static_cast<size_t>(indentation(text.substr(start)));
    const bool blank = pos >= text.size() || text[pos] == '\n' || text[pos] == '\r';
    if (!blank && static_cast<int>(pos - start) < hole_indent) return start;
  }
  return std::string_view::npos;
}

std::string_view next_line(std::string_view after) {
  size_t from = after.find('\n');  // the rest of the cursor's line is not a line of its own
  while (from != std::string_view::npos) {
    const size_t end = after.find('\n', from + 1);
    std::string_view line =
        after.substr(from + 1, end == std::string_view::npos ? std::string_view::npos : end - from - 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (indentation(line) < static_cast<int>(line.size())) return line;
    from = end;
  }
  return {};
}

int hole_indentation(std::string_view before, std::string_view after) {
  const size_t nl = before.rfind('\n');
  const std::string_view line = nl == std::string_view::npos ? before : before.substr(nl + 1);
  const int own = indentation(line);
  if (own < static_cast<int>(line.size())) return own;  // text before the cursor on its line
  const std::string_view next = next_line(after);
  return next.empty() ? own : std::max(own, indentation(next));
}

size_t repeat_end(std::string_view text, std::string_view line) {
  if (line.empty()) return std::string_view::npos;
  for (size_t nl = text.find('\n'); nl != std::string_view::npos; nl = text.find('\n', nl + 1)) {
    const size_t start = nl + 1;
    if (text.compare(start, line.size(), line) != 0) continue;
    const size_t after = start + line.size();
    if (after < text.size() && (text[after] == '\n' || text[after] == '\r')) return start;
  }
  return std::string_view::npos;
}

size_t time_limit_end(std::string_view text) {
  const size_t last_line_end = text.rfind('\n');
  return last_line_end == std::string_view::npos ? text.size() : last_line_end + 1;
}

const char* llama_stop_type(FinishReason finish, bool limited) {
  switch (finish) {
    case FinishReason::Eos:
      return "eos";
    case FinishReason::Stop:
      return limited ? "limit" : "word";
    case FinishReason::Length:
    case FinishReason::Budget:
      return "limit";
    default:
      return "none";
  }
}

json llama_partial_json(const CandidateDelta& d, int prompt_tokens) {
  return {{"index", d.index},
          {"content", d.text},
          {"tokens", json::array()},
          {"stop", false},
          {"id_slot", 0},
          {"tokens_predicted", d.tokens},
          {"tokens_evaluated", prompt_tokens}};
}

json llama_final_json(const LlamaRequest& r, const Candidate& c, const LlamaOutcome& o) {
  const double prompt_ms = 1000.0 * o.prefill_seconds;
  const double predicted_ms = 1000.0 * std::max(0.0, c.seconds - o.prefill_seconds);
  const int predicted = static_cast<int>(c.tokens.size());
  const int computed = o.prompt_tokens - o.cached_tokens;  // llama.cpp's prompt_n: the prompt cache's tokens not counted
  json timings = {{"cache_n", o.cached_tokens},
                  {"prompt_n", computed},
                  {"prompt_ms", prompt_ms},
                  {"prompt_per_token_ms", computed > 0 ? prompt_ms / computed : 0.0},
                  {"prompt_per_second", prompt_ms > 0 ? 1e3 * computed / prompt_ms : 0.0},
                  {"predicted_n", predicted},
                  {"predicted_ms", predicted_ms},
                  {"predicted_per_token_ms", predicted > 0 ? predicted_ms / predicted : 0.0},
                  {"predicted_per_second", predicted_ms > 0 ? 1e3 * predicted / predicted_ms : 0.0}};
  if (c.proposed > 0) {
    timings["draft_n"] = c.proposed;
    timings["draft_n_accepted"] = c.accepted;
  }
  const json settings = {{"n_predict", r.n_predict},  {"max_tokens", r.n_predict},
                         {"seed", r.sampling.seed},   {"temperature", r.sampling.temperature},
                         {"top_k", r.sampling.top_k}, {"top_p", r.sampling.top_p},
                         {"min_p", r.sampling.min_p}, {"stop", r.stop},
                         {"stream", r.stream},        {"n_probs", r.n_probs},
                         {"samplers", r.samplers}};
  json res = {{"index", c.index},
              {"content", r.stream ? std::string() : c.text},
              {"tokens", r.return_tokens && !r.stream ? json(c.tokens) : json::array()},
              {"id_slot", 0},
              {"stop", true},
              {"model", o.model},
              {"tokens_predicted", predicted},
              {"tokens_evaluated", o.prompt_tokens},
              {"generation_settings", settings},
              {"prompt", o.prompt_text},
              {"has_new_line", c.text.find('\n') != std::string::npos},
              {"truncated", o.truncated},
              {"stop_type", llama_stop_type(c.finish, o.limited)},
              {"stopping_word", o.stopping_word},
              {"tokens_cached", o.cached_tokens},
              {"timings", timings}};
  if (r.n_probs > 0 && !r.stream) {
    json probs = json::array();  // the sampled tokens only: the decoder keeps no alternatives
    for (size_t i = 0; i < c.tokens.size() && i < o.token_texts.size(); ++i) {
      const std::string& t = o.token_texts[i];
      probs.push_back({{"id", c.tokens[i]},
                       {"token", t},
                       {"bytes", std::vector<unsigned char>(t.begin(), t.end())},
                       {"logprob", i < c.logprobs.size() ? c.logprobs[i] : 0.0f},
                       {"top_logprobs", json::array()}});
    }
    res["completion_probabilities"] = probs;
  }
  return r.response_fields.empty() ? res : select_fields(res, r.response_fields);
}

}  // namespace specula::serve
