// A Generator that runs sessions on an OpenAI-compatible server (Specula's `serve`, vLLM,
// SGLang, llama.cpp's llama-server) over HTTP or HTTPS, through libcurl.
//
// It asks for the n candidates in one streamed request when the server accepts `n`, and
// otherwise sends n concurrent requests (candidate i with seed + i, as a local session
// seeds it); every choice streams into its candidate's callbacks. It asks for the sampled
// tokens' log-probabilities (ranking uses them) and does without when the server refuses.
// The budget and the stop flag close the streams; unfinished candidates then end with
// Budget or Cancelled, their text so far kept. 429 and 503 are retried with back-off
// (Retry-After when the server sends it) inside the budget. Connection refused, TLS
// failures, 401, 404, other errors and malformed streams throw RemoteError with a message
// that says what to do. The drafter and policy of a request are the server's to choose.
//
// Servers that only speak chat (no /v1/completions: 404 or 405) are asked through
// /v1/chat/completions instead (RemoteApi::Auto), or always when the user says so (Chat):
// the user asks for the function and the assistant's message opens with a fence and the
// prompt, sent to be continued (vLLM's continue_final_message, llama.cpp's and Specula's
// assistant prefill). An answer that continues the prefill is the completion; one that
// starts over, restating the function in a code block, gives the completion from that block
// (decode/prompt_style.h), so a candidate stays the prompt's completion either way. Until a
// server has shown that it continues, stop strings are applied here rather than sent (a
// restated answer's opening fence must not end it), and the answer's text is held back until
// its first line says which it is.
//
// The process ignores SIGPIPE from the first RemoteGenerator on: a server that closes a
// connection must not kill the client writing to it.
#pragma once

#include <atomic>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "decode/generator.h"

namespace specula::serve {

struct RemoteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Which endpoint generation asks: /v1/completions, falling back to /v1/chat/completions on a
// server without it (Auto); or only one of them.
enum class RemoteApi { Auto, Completions, Chat };
const char* remote_api_name(RemoteApi api);  // "auto", "completions", "chat"

struct RemoteOptions {
  std::string url;                       // base URL: "http://host:8000", with or without a trailing /v1
  std::string api_key;                   // sent as "Authorization: Bearer KEY"; empty: none
  std::string model;                     // the model to ask for; empty: the first one the server lists
  bool insecure = false;                 // accept a TLS certificate that does not verify (self-signed)
  double connect_timeout_seconds = 10.0;
  double idle_timeout_seconds = 120.0;   // a response silent this long has failed
  int max_retries = 4;                   // for 429 and 503, each within the budget
  RemoteApi api = RemoteApi::Auto;
};

// What a generator has learnt of its server, kept from one generate() to the next.
struct ServerTraits {
  enum class Prefill { Unknown, Continued, Ignored };  // what the server does with a final assistant message
  bool accepts_n = true;          // false once the server refused n > 1, or ignored it
  bool accepts_logprobs = true;   // false once the server refused logprobs
  bool chat = false;              // asks /v1/chat/completions
  Prefill prefill = Prefill::Unknown;
};

// What the connection test finds.
struct ServerInfo {
  std::string url;                  // the base URL requests go to
  std::string model;                // the model generation asks for
  std::vector<std::string> models;  // every model the server lists
  std::string summary;              // one line for the user
};

class RemoteGenerator final : public Generator {
 public:
  // Throws std::invalid_argument for a URL that is not http:// or https://.
  explicit RemoteGenerator(RemoteOptions options);

  // GET /v1/models: checks that the server answers, takes the key and serves the model
  // (the first one it lists when none was named). Throws RemoteError.
  ServerInfo probe(double timeout_seconds = 10.0);

  SessionResult generate(const GenerationRequest& request, const SessionCallbacks& callbacks = {},
                         const std::atomic<bool>* stop = nullptr) override;
  std::string describe() const override;

  // POST /tokenize (llama.cpp's and vLLM's endpoint): the server's ids for `text`, with the
  // special tokens it adds (BOS) when `add_special`. Throws RemoteError, naming the endpoint
  // when the server has none.
  std::vector<int> tokenize(const std::string& text, bool add_special);
  // The server's scores of `ids` (at least 2): POST /v1/completions with the ids as the
  // prompt, echo, logprobs 0 and max_tokens 0, as Specula's `serve` and vLLM answer; the
  // nll of TokenScores from the prompt's token_logprobs. Throws RemoteError when the server
  // returns no log-probabilities of the prompt (llama.cpp's server does not).
  TokenScores score(std::span<const int> ids);

 private:
  nlohmann::json post(const std::string& path, const nlohmann::json& body);

  RemoteOptions options_;
  std::string base_;             // the URL without a trailing "/" or "/v1"
  std::string model_;            // the model named, or the one probe() found; empty: ask probe()
  ServerTraits traits_;
};

}  // namespace specula::serve
