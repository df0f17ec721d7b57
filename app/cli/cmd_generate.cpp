// specula-cli generate: N candidates for one prompt, with batched speculative decoding; with
// --suffix, N fillings of the hole between the prompt and the suffix (fill in the middle).
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "model_options.h"
#include "model/model.h"
#include "decode/prompt_style.h"
#include "decode/session.h"
#include "serve/openai_api.h"

namespace specula::cli {

namespace {

struct GenerateArgs {
  ModelOptions models;
  serve::RemoteOptions remote;
  std::string prompt;
  std::string prompt_file;
  std::string suffix_file;  // empty: no fill in the middle
  int steps = 0;
  int max_tokens = 256;
  float temperature = 1.0f;
  float top_p = 1.0f;
  int top_k = 0;
  float min_p = 0.0f;
  uint64_t seed = 0;
  int candidates = 1;
  double budget = 0.0;
  bool budget_given = false;
  std::vector<std::string> stops;
  bool code_stops = false;
  bool token_healing = true;  // for code prompts (--code-stops); --no-token-healing: off
  bool json = false;
  std::string prompt_style = "auto";  // for code (--code-stops); auto without --code-stops: raw
};

nlohmann::json to_json(const SessionResult& r, int n, const GenerationRequest& request, PromptStyle style) {
  nlohmann::json out;
  out["prompt"] = request.prompt;
  out["prompt_style"] = prompt_style_name(style);
  out["chat_prefix"] = request.chat_prefix ? nlohmann::json(*request.chat_prefix) : nlohmann::json(nullptr);
  out["candidates"] = nlohmann::json::array();
  for (const Candidate& c : r.candidates) {
    out["candidates"].push_back({{"text", c.text},
                                 {"tokens", c.tokens.size()},
                                 {"finish", finish_reason_name(c.finish)},
                                 {"mean_logprob", c.mean_logprob()},
                                 {"accepted", c.accepted},
                                 {"proposed", c.proposed}});
  }
  out["totals"] = serve::totals_json(r.totals, n);
  return out;
}

void run(const GenerateArgs& a) {
  GenerationRequest request;
  request.prompt = a.prompt_file.empty() ? a.prompt : read_input_file(a.prompt_file);
  if (!a.suffix_file.empty()) request.suffix = read_input_file(a.suffix_file);
  request.allow_empty_prompt = true;  // like llama2.c: no prompt generates from BOS alone
  request.n_candidates = a.candidates;
  request.sampling = SamplingParams{
      .temperature = a.temperature, .top_k = a.top_k, .top_p = a.top_p, .min_p = a.min_p, .seed = a.seed};
  request.stop = a.stops;
  request.code_stops = a.code_stops;
  // Generating code (--code-stops) without a suffix: the body starts on the next line, and
  // its first token may extend the prompt's last one (token healing).
  if (request.code_stops && !request.suffix) request.prompt = code_prompt(request.prompt);
  request.token_healing = request.code_stops && a.token_healing;
  if (a.budget_given && !(a.budget > 0)) throw CommandFailed("--budget must be a positive number of seconds", 2);
  request.budget_seconds = a.budget;

  const OpenedGenerator opened = open_generator(a.models, a.remote);
  request.draft = opened.draft;
  // The chat style asks for a function to complete: auto chooses it for code (--code-stops) only.
  const PromptStyle style =
      apply_prompt_style(request, a.prompt_style == "auto" && !request.code_stops ? "raw" : a.prompt_style, opened);

  if (a.steps > 0) {
    const Model* model = opened.target;
    if (!model) throw CommandFailed("--steps counts positions with the model's tokenizer: it needs a local model", 2);
    const int context = model->config.context_length;
    // llama2.c's meaning: the number of positions run through the model, BOS and prompt
    // included; the token predicted at the last position is printed but never run, so
    // steps positions yield steps + 1 tokens in all
    const int prompt_tokens = static_cast<int>(request_prompt_ids(*model->tokenizer, request).size());
    const int steps = std::min(a.steps, context);
    if (steps < prompt_tokens) {
      throw CommandFailed("--steps " + std::to_string(a.steps) + " is shorter than the " +
                              std::to_string(prompt_tokens) + " prompt tokens", 2);
    }
    request.max_new_tokens = steps + 1 - prompt_tokens;
  } else {
    request.max_new_tokens = a.max_tokens;
  }

  // one candidate in text mode streams as it goes
  const bool stream = !a.json && a.candidates == 1;
  bool prompt_shown = false;  // the prompt goes out with the first text, after the request was accepted
  const auto show_prompt = [&] {
    if (prompt_shown) return;
    std::fputs(request.prompt.c_str(), stdout);
    prompt_shown = true;
  };
  SessionCallbacks callbacks;
  if (stream) {
    callbacks.on_delta = [&](const CandidateDelta& d) {
      show_prompt();
      std::fputs(d.text.c_str(), stdout);
      std::fflush(stdout);
    };
  }
  SessionResult result;
  try {
    result = opened.generator->generate(request, callbacks);
  } catch (const serve::RemoteError& e) {
    throw CommandFailed(e.what(), kExitRemote);
  }

  if (a.json) {
    std::puts(to_json(result, a.candidates, request, style).dump(2).c_str());
    return;
  }
  // each candidate is shown in place: prompt, completion, and the suffix after it
  const std::string suffix = request.suffix.value_or("");
  if (stream) {
    show_prompt();
    std::fputs((suffix + "\n").c_str(), stdout);
  } else {
    for (const Candidate& c : result.candidates) {
      std::printf("--- candidate %d (%s, %zu tokens, mean logprob %.3f)\n%s%s%s\n", c.index, finish_reason_name(c.finish),
                  c.tokens.size(), c.mean_logprob(), request.prompt.c_str(), c.text.c_str(), suffix.c_str());
    }
  }
  const SessionTotals& t = result.totals;
  std::fprintf(stderr, "%s\n%d tokens in %.3f s: %.1f tokens/s, %.2f ms/token/sequence, acceptance %.2f, %d target forwards\n",
               opened.note.c_str(), t.generated_tokens, t.wall_seconds, t.tokens_per_second(),
               t.ms_per_token_per_sequence(a.candidates), t.acceptance_rate(), t.target_forwards);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate N candidate continuations of a prompt");
  add_model_options(cmd, args->models);
  add_remote_options(cmd, args->remote);
  auto* prompt = cmd->add_option("-p,--prompt", args->prompt, "Prompt text (none: generate from BOS alone)");
  cmd->add_option("-f,--file", args->prompt_file, "Read the prompt from a file")->excludes(prompt);
  cmd->add_option("--suffix", args->suffix_file, "Fill in the middle: read the code after the hole from FILE (the prompt is the code before it)");
  auto* steps = cmd->add_option("--steps", args->steps, "Total positions, BOS and prompt included (llama2.c's meaning)")->check(CLI::PositiveNumber);
  cmd->add_option("--max-tokens", args->max_tokens, "New tokens per candidate (default 256)")->check(CLI::PositiveNumber)->excludes(steps);
  cmd->add_option("--temp", args->temperature, "Temperature; 0 is greedy (default 1)")->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-p", args->top_p, "Nucleus sampling mass (default 1: off)")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--top-k", args->top_k, "Keep the K most likely tokens (0: off)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--min-p", args->min_p, "Drop tokens under this fraction of the best one (0: off)")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--seed", args->seed, "Random seed; candidate i uses seed + i");
  cmd->add_option("-n,--candidates", args->candidates, "Number of candidates (1.." + std::to_string(kMaxCandidates) + ")");
  cmd->add_option_function<double>("--budget", [args](double s) { args->budget = s; args->budget_given = true; }, "Wall-clock budget in seconds; unfinished candidates end with finish=budget");
  cmd->add_option("--stop", args->stops, "Stop string (repeatable); the completion is cut before it");
  cmd->add_flag("--code-stops", args->code_stops,
                "Complete code: the prompt ends with a newline, the first token may extend its last one (token "
                "healing), and generation also stops at a new top-level def / class / if __name__ / print( line");
  cmd->add_flag("!--no-token-healing", args->token_healing,
                "With --code-stops: give the prompt's last token as it is, even where other tokens extend it");
  add_prompt_style_option(cmd, args->prompt_style);
  cmd->add_flag("--json", args->json, "Print one JSON object with every candidate and the totals");
  cmd->callback([args] {
    try {
      run(*args);
    } catch (const std::invalid_argument& e) {
      throw CommandFailed(e.what(), 2);
    }
  });
}

}  // namespace specula::cli
