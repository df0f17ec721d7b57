// OpenAI's completions wire format, both directions: the server parses requests and writes
// responses and stream chunks with it; the remote generator writes requests and reads the
// responses of any OpenAI-compatible server (Specula's own, vLLM, SGLang, llama.cpp's).
//
// Specula's server adds one field, "specula", to a response, to each choice and to the last
// stream chunk: the drafter, acceptance, milliseconds per token per sequence and the other
// session totals (the same names as `specula-cli generate --json`), and per choice the token
// ids and Specula's own finish reason. Other servers leave it out; every reader here treats
// it as optional.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "decode/decoder.h"
#include "decode/session.h"

namespace specula::serve {

// An answer other than success: the HTTP status and OpenAI's error object
// {"error": {"message", "type", "param", "code"}}.
struct ApiError : std::runtime_error {
  ApiError(int status, const std::string& message, std::string param = {}, std::string code = {});
  int status;         // 400, 401, 404, 413, 429, 500, 503
  std::string param;  // the request field at fault; empty: none
  std::string code;   // OpenAI's machine-readable code ("invalid_api_key", "model_not_found"); empty: none
};

nlohmann::json error_json(const ApiError& error);

// Serializes without ever throwing on invalid UTF-8 (a token can be a lone byte): such
// bytes become U+FFFD.
std::string dump(const nlohmann::json& value);

// POST /v1/completions, as Specula reads it. Fields it does not know are ignored; fields
// it knows but cannot honour (best_of > n, penalties, logit_bias) are refused.
//
// `prompt` may be a string or a list of token ids (one prompt either way). `echo: true` puts
// the prompt before each completion, in its text and its logprobs, every prompt token after
// the first scored (its log-probability; with logprobs k > 0 also the k likeliest tokens at
// its position), as OpenAI's legacy API did and vLLM does: with max_tokens 0 it scores a text
// (a perplexity window, lm-evaluation-harness's log-likelihoods) without generating. Echo is
// refused with stream.
struct CompletionRequest {
  std::string model;              // empty: whatever the server serves
  std::string prompt;
  std::vector<int> prompt_ids;    // a prompt of token ids (prompt is then empty); empty: none
  std::string suffix;             // fill-in-the-middle: the text after the gap; empty: none
  bool echo = false;              // the prompt first in text and logprobs, scored; max_tokens may be 0
  int n = 1;                      // completions of the prompt, decoded together
  int max_tokens = 16;            // per completion (OpenAI's default)
  float temperature = 1.0f;       // 0..2; 0 is greedy
  float top_p = 1.0f;             // (0, 1]
  int top_k = 0;                  // vLLM's extension; 0: off
  float min_p = 0.0f;             // vLLM's extension; 0: off
  std::optional<uint64_t> seed;   // completion i samples with seed + i; none: the server picks one
  std::vector<std::string> stop;  // the completion ends before the first of these
  bool stream = false;            // server-sent events, one chunk per text delta
  bool include_usage = false;     // stream_options.include_usage: a last chunk with usage and totals
  std::optional<int> logprobs;    // 0..5: return the sampled tokens' log-probabilities
  int top_logprobs = 0;           // a chat's 0..20: with each token, the most likely ones at its position
};

// What a server accepts: the largest n, max_tokens and number of stop strings.
struct RequestLimits {
  int max_n = kMaxCandidates;
  int max_tokens = 1 << 20;
  int max_stop = 16;
  int max_messages = 4096;  // of a chat
};

// Parses and checks a request body. Throws ApiError (400, naming the field) for malformed
// JSON, a wrong type or a value out of range.
CompletionRequest parse_completion_request(std::string_view body, const RequestLimits& limits);

// POST /v1/chat/completions, as Specula reads it: the conversation, and the fields it shares
// with completions in `completion` (its prompt and suffix unused). max_completion_tokens is
// read as max_tokens; absent both, max_tokens is 0: what the context leaves. `logprobs: true`
// sets completion.logprobs to 0 (the sampled tokens'), and top_logprobs (0..20, which needs
// it) completion.top_logprobs; top_logprobs above 0 with stream, tools, functions and
// response_format are refused.
//
// A final assistant message is continued (a prefill, as llama.cpp's server does and vLLM's
// continue_final_message asks) unless the request says add_generation_prompt: true;
// continue_final_message: true with a final message of another role is refused, as is
// continue_final_message together with add_generation_prompt (vLLM's rules).
struct ChatRequest {
  CompletionRequest completion;
  nlohmann::ordered_json messages;  // [{"role", "content" (a string: text parts joined), ...}]
  bool continue_final = false;      // the last message is the assistant's, to be continued
};

// Parses and checks a chat request body: malformed messages (not an array, empty, a message
// without a string role or a content, content parts other than text) are 400 naming
// "messages" and the message at fault. Roles are not checked: the template decides.
ChatRequest parse_chat_request(std::string_view body, const RequestLimits& limits);

// The body a client sends. `send_n` false leaves `n` out (servers that refuse it).
nlohmann::json completion_request_json(const CompletionRequest& request, bool send_n = true);
// The same request for /v1/chat/completions with `messages` instead of the prompt (and no
// suffix): `logprobs` becomes logprobs: true, and a final assistant message is sent to be
// continued (continue_final_message: true, add_generation_prompt: false).
nlohmann::json chat_request_json(const CompletionRequest& request, const nlohmann::ordered_json& messages,
                                 bool send_n = true);

// OpenAI's finish_reason for a candidate: "stop" (EOS or a stop string) or "length".
const char* openai_finish_reason(FinishReason reason);
// The FinishReason that finish_reason_name() gives `name`; nullopt for an unknown name.
std::optional<FinishReason> finish_reason_from_name(std::string_view name);

// The session totals under the names `specula-cli generate --json` prints them.
nlohmann::json totals_json(const SessionTotals& totals, int n_candidates);
SessionTotals totals_from_json(const nlohmann::json& totals);

// One choice of a response or a stream chunk, as a client reads it.
struct ChoiceUpdate {
  int index = 0;
  std::string text;                    // text added (a chunk) or the whole completion (a response);
                                       // a chat's delta or message content
  std::optional<FinishReason> finish;  // set once the choice has ended
  std::vector<float> logprobs;         // sampled tokens' log-probabilities carried by this update
  std::vector<int> token_ids;          // ids, when the server says them (Specula's extension)
  int tokens = -1;                     // tokens so far, when the server says it; -1: unknown
  int accepted = -1, proposed = -1;    // draft tokens so far (Specula's extension); -1: unknown
  bool from_specula = false;           // it carries Specula's extension: Specula's server sent it
};

// The choices and, when present, the totals of a response or of one stream chunk. Throws
// std::runtime_error when the JSON is not a completion.
struct CompletionUpdate {
  std::vector<ChoiceUpdate> choices;
  std::optional<SessionTotals> totals;  // Specula's extension
  int prompt_tokens = -1;               // usage.prompt_tokens; -1: not sent
};
CompletionUpdate parse_completion_update(const nlohmann::json& body);

// The message of an error body, whatever the server's dialect (OpenAI's error object,
// llama.cpp's, FastAPI's "detail", plain text); `fallback` when there is none.
std::string error_message(std::string_view body, const std::string& fallback);

}  // namespace specula::serve
