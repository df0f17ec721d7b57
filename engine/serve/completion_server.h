// `specula-cli serve`: an OpenAI-compatible HTTP server over a LocalGenerator.
//
// POST /v1/completions runs the n choices of a request as ONE batched speculative decode
// (run_session with n candidates); POST /v1/chat/completions does the same with the
// messages rendered through the model's chat template (model/model_chat.h; a model without
// one answers 400; a final assistant message is continued as a prefill); GET /v1/models and GET /health describe the server. POST /completion
// and POST /infill speak llama.cpp's native format (llama_api.h), for editor plugins (see
// docs/editor.md). Requests wait in a bounded queue, one session runs at a time, and a client
// that closes its connection cancels its generation within one decoding step. Every request
// gets a valid response or OpenAI's error object (llama.cpp's on its own endpoints): 400 bad
// JSON, field or framing, 401 missing or wrong key, 403 a
// foreign Host or web page Origin, 404 unknown model or path, 408 a request too slow to
// arrive, 413 body too large, 415 not JSON, 431 headers too large, 503 with Retry-After when
// the queue or the connections are full. HTTP is Specula's own server (http_server.h), which
// no slow, idle or hostile client can hold. See docs/scale-out.md.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "decode/generator.h"
#include "decode/prompt_style.h"
#include "decode/session.h"

namespace specula {
class TestRunner;
}

namespace specula::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                     // 0: any free port (listen() says which)
  std::string api_key;                 // empty: none; else /v1/ requests need "Authorization: Bearer KEY"
  int max_queue = 16;                  // requests waiting behind the one generating; the next gets 503
  size_t max_body_bytes = 1 << 20;     // larger request bodies (after transfer decoding) get 413
  bool allow_compressed = false;       // gzip/deflate bodies inflated (within the limit, at most 100:1); else 415
  int request_timeout_seconds = 30;    // a request must arrive whole this soon after its first byte (its head within 10 s); else 408
  int max_connections = 512;           // open at once; beyond: the oldest idle closed, else 503
  int max_connections_per_client = 128;  // open at once from one address; beyond: 503
  std::vector<std::string> allowed_hosts;    // Host names served beyond IP literals, localhost and --host; "*": any
  std::vector<std::string> allowed_origins;  // browser origins allowed (CORS); "*": any; none: no web page
  int max_kv_tokens = 1 << 17;         // KV positions one request may need (n, prompt and max_tokens); more: 400
  std::string model_name;              // the id /v1/models lists; a request names it or no model
  std::string chat_template;           // Jinja source for chat requests; empty: the model's own
  PromptStyle prompt_style = PromptStyle::Raw;  // how /v1/completions puts a prompt (without a suffix)
                                       // to the model: raw as it is; chat inside the chat of
                                       // prompt_style.h (the template's user turn, the assistant's
                                       // opened with a fence), ending at the closing fence; auto:
                                       // chat when the model has a template. Chat needs a template.
  DraftOptions draft;                  // drafter and policy of every request (the generator has the draft model)
  int prompt_cache_blocks = -1;        // KV blocks (16 positions) of recent prompts kept across requests, which
                                       // start from the longest kept start of their prompt; 0: none; -1: four
                                       // contexts, at most kDefaultPromptCacheTokens positions
  bool spm_infill = false;             // /infill: suffix first (llama.cpp's --spm-infill), also where
                                       // the model's file does not say it was trained so (FimTokens::spm)
  bool infill_fallback = false;        // /infill on a model without FIM tokens: the prefix as a plain
                                       // prompt, cut at the first line that dedents below the hole
                                       // (else 501, as llama.cpp answers)
  int suggestions = 1;                 // candidates decoded for each whole /infill and /completion answer,
                                       // the best answered first (suggestions.h); 1: the one asked for
  TestRunner* checks = nullptr;        // runs the suggestions' checks (the sandbox; must outlive the
                                       // server); null: suggestions ranked by likelihood
};

// The default prompt cache's largest size, in positions.
constexpr int kDefaultPromptCacheTokens = 8192;
// The prompt cache's size in blocks for `options` and a model of `context_length` positions.
int prompt_cache_blocks(const ServerOptions& options, int context_length);

// What GET /health reports: the queue now, and counters since the server started.
struct ServerStats {
  int waiting = 0;            // requests in the queue now
  bool generating = false;    // a session is running now
  long completed = 0;         // requests answered in full
  long cancelled = 0;         // requests whose client went away: generation stopped, or never started
  long rejected = 0;          // answered 503: the queue, the workers or the connections were full
  long failed = 0;            // generation threw: the client got an error or a cut stream
  long kv_blocks_left = 0;    // KV blocks that ended sessions still held, summed: 0 unless one leaked
};

class CompletionServer {
 public:
  // `generator` must outlive the server.
  CompletionServer(LocalGenerator& generator, ServerOptions options);
  ~CompletionServer();
  CompletionServer(const CompletionServer&) = delete;
  CompletionServer& operator=(const CompletionServer&) = delete;

  // Binds the address; returns the port. Throws std::runtime_error when it cannot.
  int listen();
  // Answers requests until stop(). Call after listen().
  void serve();
  // Thread-safe: cancels every running and waiting request and makes serve() return.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace specula::serve
