// specula-cli perplexity: a model's perplexity on a text, as llama.cpp's llama-perplexity
// reports it (eval/perplexity.h says how the text is cut and scored).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "eval/perplexity.h"
#include "model/tokenizer.h"
#include "model_options.h"
#include "serve/remote_generator.h"

namespace specula::cli {

namespace {

struct PerplexityArgs {
  ModelOptions models;
  serve::RemoteOptions remote;
  std::string text_path;
  int context = 512;
  bool json = false;
};

// On a server (--remote): the text in the server's ids (its /tokenize), BOS where it adds
// one, each window scored by the server (echo with logprobs).
PerplexityResult remote_perplexity(const PerplexityArgs& a, const std::string& text, const PerplexityOptions& options) {
  if (!a.models.model_path.empty() || !a.models.tokenizer_path.empty()) {
    throw CommandFailed("--remote scores the text on the server: -m and --tokenizer do not apply", 2);
  }
  try {
    serve::RemoteGenerator server(a.remote);
    const std::vector<int> tokens = server.tokenize(text, false);
    const std::vector<int> special = server.tokenize("", true);
    const int bos = special.size() == 1 ? special[0] : -1;
    const WindowScorer score = [&server](std::span<const int> window, const std::function<bool(long)>& advanced) {
      TokenScores scores = server.score(window);
      scores.stopped = !advanced(static_cast<long>(window.size()));
      return scores;
    };
    return perplexity(score, tokens, bos, options);
  } catch (const serve::RemoteError& e) {
    throw CommandFailed(e.what(), kExitRemote);
  }
}

void run(const PerplexityArgs& a) {
  const std::string text = read_input_file(a.text_path);
  PerplexityOptions options;
  options.context = a.context;
  const bool show = isatty(STDERR_FILENO) == 1;
  options.progress = [show](long done, long total) {
    if (show) std::fprintf(stderr, "\r\033[Kscoring %ld of %ld positions", done, total);
    return true;
  };
  PerplexityResult result;
  try {
    if (!a.remote.url.empty()) {
      result = remote_perplexity(a, text, options);
    } else {
      LoadedModels loaded = load_models(a.models);
      const std::vector<int> tokens = loaded.target->tokenizer->encode(text, false);
      result = perplexity(*loaded.backend, *loaded.target, tokens, options);
    }
  } catch (const std::invalid_argument& e) {
    throw CommandFailed(e.what(), 2);
  }
  if (show) std::fputs("\r\033[K", stderr);
  if (a.json) {
    const nlohmann::json out = {{"tokens", result.tokens},
                                {"scored", result.scored},
                                {"windows", result.windows},
                                {"context", a.context},
                                {"perplexity", result.perplexity()}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("%ld tokens, %ld scored in %d windows of %d: perplexity %.4f\n", result.tokens, result.scored,
                result.windows, a.context, result.perplexity());
  }
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto a = std::make_shared<PerplexityArgs>();
  CLI::App* cmd = app.add_subcommand("perplexity", "A model's perplexity on a text (as llama-perplexity reports it)");
  add_model_options(cmd, a->models);
  add_remote_options(cmd, a->remote);
  cmd->add_option("-f,--file", a->text_path, "The text")->required();
  cmd->add_option("--ctx", a->context, "Positions per window, BOS included (default 512)")->check(CLI::Range(2, 1 << 20));
  cmd->add_flag("--json", a->json, "One JSON object: tokens, scored, windows, context, perplexity");
  cmd->callback([a] {
    try {
      run(*a);
    } catch (const ModelError& e) {
      throw CommandFailed(e.what(), 2);
    }
  });
}

}  // namespace specula::cli
