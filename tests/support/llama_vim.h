// What an editor plug-in sends `specula-cli serve`: llama.vim's llama#fim request
// (autoload/llama.vim), field for field, for a hole in a small Python file, and a JSON POST
// to the server on loopback. Shared by the editor, prompt-cache and suggestions suites.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "serve_process.h"

namespace specula::test {

// POST `body` as JSON to the server on `port`; the reply's JSON (null when none or not
// JSON) and, through `status`, its HTTP status (-1 without a reply).
inline nlohmann::json post_json(int port, const std::string& path, const nlohmann::json& body, int* status = nullptr,
                                const httplib::Headers& headers = {}) {
  auto client = http_client(port);
  const auto res = client.Post(path, headers, body.dump(), "application/json");
  if (status) *status = res ? res->status : -1;
  return res ? nlohmann::json::parse(res->body, nullptr, false) : nlohmann::json();
}

// A Python file with the cursor on the empty line inside `mean`'s body, as llama.vim cuts it:
// the lines before the cursor's line, the cursor's line before the cursor (empty), and the
// rest of the line with the lines after it.
inline const std::string kLlamaVimPrefix =
    "import math\n"
    "\n"
    "\n"
    "def mean(values):\n"
    "    \"\"\"Return the arithmetic mean of a list of numbers.\"\"\"\n"
    "    total = 0\n";
inline const std::string kLlamaVimSuffix =
    "\n"
    "    return total / len(values)\n"
    "\n"
    "\n"
    "def variance(values):\n"
    "    m = mean(values)\n";

// autoload/llama.vim's llama#fim request, field for field (its defaults: n_predict 128,
// t_max_prompt_ms 500, t_max_predict_ms 1000; stop_strings []; one ring chunk).
inline nlohmann::json llama_vim_request() {
  using nlohmann::json;
  return {{"input_prefix", kLlamaVimPrefix},
          {"input_suffix", kLlamaVimSuffix},
          {"input_extra", json::array({{{"text", "def median(values):\n    return sorted(values)[len(values) // 2]\n"},
                                        {"time", {1733000000, 250000}},
                                        {"filename", "stats.py"}}})},
          {"prompt", ""},
          {"n_predict", 128},
          {"stop", json::array()},
          {"n_indent", 0},
          {"top_k", 40},
          {"top_p", 0.90},
          {"stream", false},
          {"samplers", {"top_k", "top_p", "infill"}},
          {"cache_prompt", true},
          {"t_max_prompt_ms", 500},
          {"t_max_predict_ms", 1000},
          {"response_fields",
           {"content", "timings/prompt_n", "timings/prompt_ms", "timings/prompt_per_token_ms",
            "timings/prompt_per_second", "timings/predicted_n", "timings/predicted_ms",
            "timings/predicted_per_token_ms", "timings/predicted_per_second", "truncated", "tokens_cached"}}};
}

// The same request made deterministic: greedy, with the temperature sampler in the chain.
inline nlohmann::json greedy(nlohmann::json request) {
  request["temperature"] = 0;
  request["samplers"] = {"top_k", "top_p", "infill", "temperature"};
  return request;
}

}  // namespace specula::test
