// llama.cpp's native completion endpoints, which the editor plugins speak (llama.vim,
// llama.vscode, llama.qtcreator): POST /completion and POST /infill as llama.cpp's server
// (tools/server/README.md) reads them, and the answers it writes: one object per completion
// (an array of them when a request asks for several), server-sent `data:` events when
// streamed, and llama.cpp's error object {"error": {"code", "message", "type"}}.
//
// What Specula does differently, on purpose and documented in docs/editor.md: the sampler
// order is Specula's own (the `samplers` list only says which samplers run), `n_probs` gives
// each sampled token's log-probability without alternatives, `cache_prompt` and
// `t_max_prompt_ms` are read and have no effect (there is no prompt cache, and llama.cpp
// does not act on t_max_prompt_ms either), and fields whose samplers Specula lacks
// (penalties, grammars, mirostat, ...) are refused unless they have their neutral value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "compute/sampler.h"
#include "decode/session.h"
#include "model/tokenizer.h"
#include "serve/openai_api.h"

namespace specula::serve {

enum class LlamaEndpoint { Completion, Infill };

// One file of repository context (/infill's input_extra).
struct ExtraChunk {
  std::string filename;  // "tmp" when the client names none, as llama.cpp does
  std::string text;
};

// One piece of a /completion prompt: text, or a token id.
struct PromptPiece {
  std::string text;
  int id = -1;  // >= 0: a token id (text unused)
};

struct LlamaRequest {
  LlamaEndpoint endpoint = LlamaEndpoint::Completion;
  std::vector<PromptPiece> prompt;      // /completion: in order; /infill: the cursor line before the cursor
  std::string input_prefix;             // /infill: the code before the hole
  std::string input_suffix;             // /infill: the code after it
  std::vector<ExtraChunk> input_extra;  // /infill: other files, oldest first
  int n_predict = -1;                   // tokens per completion; -1: until EOS or the context is full; 0: none
  int n_indent = 0;                     // lines after the first need at least this indentation
  int n = 1;                            // completions (n_cmpl, or n)
  SamplingParams sampling;              // after the samplers list (seed: set below)
  std::optional<uint64_t> seed;         // none: the server picks one (llama.cpp's -1)
  std::vector<std::string> samplers;    // as sent (for generation_settings)
  std::vector<std::string> stop;
  bool stream = false;
  int n_probs = 0;  // > 0: completion_probabilities
  bool return_tokens = false;
  long long t_max_predict_ms = 0;            // > 0: stop at the first step after this long (time_limit_end)
  bool cache_prompt = true;                  // start from the server's prompt cache and keep this prompt
  std::vector<std::string> response_fields;  // non-empty: only these ("a/b" flattened)
};

// Parses and checks a body for `endpoint`. Throws ApiError: 400 malformed JSON or a field of
// the wrong type or range, 501 a feature Specula does not have.
LlamaRequest parse_llama_request(LlamaEndpoint endpoint, std::string_view body, int max_n);

// llama.cpp's error object: {"error": {"code": status, "message", "type"}} (type
// "invalid_request_error", "authentication_error", "not_found_error", "not_supported_error",
// "unavailable_error", "server_error", ...).
nlohmann::json llama_error_json(const ApiError& error);

// llama.cpp's answer to /infill on a model without FIM tokens (501).
ApiError infill_not_supported(const FimTokens& fim);

// The fields `paths` of `response`; a path "a/b" takes response["a"]["b"] and names it "a/b"
// in the result; paths that are not there are left out (llama.cpp's response_fields).
nlohmann::json select_fields(const nlohmann::json& response, const std::vector<std::string>& paths);

// The ids of a /completion prompt: text tokenized with special tokens recognised, BOS first
// when the prompt starts with text and the vocabulary adds one; ids as they are.
std::vector<int> completion_prompt_ids(const Tokenizer& tokenizer, const std::vector<PromptPiece>& prompt);

// The prompt of an /infill request within `max_tokens`.
struct InfillPrompt {
  std::vector<int> ids;
  bool truncated = false;  // the prefix, the suffix or the extra context was cut to fit
  int hole_indent = -1;    // fallback only: lines indented less than this end the completion
  std::string next_line;   // fallback only: the first non-blank line after the hole; the completion
                           // ends before a line that repeats it (the model never saw it)
};
// With FIM tokens: BOS where the vocabulary adds one, then the extra context (repository
// level, `<|repo_name|>myproject` and a `<|file_sep|>filename` line before each file, where
// the vocabulary has those tokens; else each file after a "--- snippet ---" line), then the
// family's FIM prompt of input_prefix + prompt and input_suffix (suffix first where the model
// was trained so, FimTokens::spm, or `spm_infill`: llama.cpp's --spm-infill). Cut as
// llama.cpp does: the prefix keeps its last 3/4 of the room, the suffix its first 1/4, the
// extra context its end in what is left. Without FIM tokens and `fallback`: input_prefix + prompt, its end, as a
// plain prompt, which ends at the first line that dedents below the hole or repeats the line
// after it. Throws infill_not_supported without FIM tokens and without `fallback`.
InfillPrompt infill_prompt(const Tokenizer& tokenizer, const LlamaRequest& request, int max_tokens, bool fallback,
                           bool spm_infill = false);

// llama.cpp's n_indent rule: where a completion's text ends because a line after its first
// starts with less than `n_indent` spaces or tabs (the cut keeps that line's whitespace, as
// llama.cpp does); npos: nowhere yet.
size_t indent_end(std::string_view text, int n_indent);
// The fallback's rule: where the first non-blank line after the first that is indented less
// than `hole_indent` begins; npos: nowhere yet.
size_t dedent_end(std::string_view text, int hole_indent);
// The indentation of the hole: that of the cursor's line when text precedes the cursor on
// it, else that of the first non-blank line after the hole (at least the cursor line's
// whitespace), else 0.
int hole_indentation(std::string_view before, std::string_view after);
// The first non-blank line after the hole's line in `after` (the code after the hole), without
// its line end; empty when there is none.
std::string_view next_line(std::string_view after);
// Where the first line after the first that is `line` and complete begins; npos: none yet.
size_t repeat_end(std::string_view text, std::string_view line);
// Where a completion's text ends when its t_max_predict_ms is up: after its last line end,
// or, before its first one, where it stands (the line in progress is cut off, never waited for).
size_t time_limit_end(std::string_view text);

// What a finished completion's answer says besides the candidate.
struct LlamaOutcome {
  int prompt_tokens = 0;
  int cached_tokens = 0;      // of them, those the prompt cache gave (not computed)
  double prefill_seconds = 0.0;
  bool truncated = false;     // the prompt was cut, or prompt and completion filled the context
  bool limited = false;       // ended by n_indent, the fallback's dedent or t_max_predict_ms
  std::string stopping_word;  // the stop string that ended it; empty: none
  std::string model;
  std::string prompt_text;               // the prompt as text
  std::vector<std::string> token_texts;  // each generated token's text (n_probs > 0)
};
// llama.cpp's final answer for one completion (content "" when streamed: the text went out
// in the chunks), response_fields applied.
nlohmann::json llama_final_json(const LlamaRequest& request, const Candidate& candidate, const LlamaOutcome& outcome);
// One streamed chunk: `text` added to completion `index`.
nlohmann::json llama_partial_json(const CandidateDelta& delta, int prompt_tokens);
// "eos", "word", "limit" or "none" (llama.cpp's stop_type).
const char* llama_stop_type(FinishReason finish, bool limited);

}  // namespace specula::serve
