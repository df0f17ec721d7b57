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

namespace specula::cli {

namespace {

struct PerplexityArgs {
  ModelOptions models;
  std::string text_path;
  int context = 512;
  bool json = false;
};

void run(const PerplexityArgs& a) {
  const std::string text = read_input_file(a.text_path);
  LoadedModels loaded = load_models(a.models);
  const std::vector<int> tokens = loaded.target->tokenizer->encode(text, false);
  PerplexityOptions options;
  options.context = a.context;
  const bool show = isatty(STDERR_FILENO) == 1;
  options.progress = [show](long done, long total) {
    if (show) std::fprintf(stderr, "\r\033[Kscoring %ld of %ld positions", done, total);
    return true;
  };
  PerplexityResult result;
  try {
    result = perplexity(*loaded.backend, *loaded.target, tokens, options);
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
