// specula-cli: one binary, several subcommands; argument parsing and wiring only.
#include <cstdio>
#include <exception>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"specula-cli: multi-candidate code generation with batched speculative decoding"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "specula-cli 0.1.0");
  specula::cli::add_check_command(app);
  specula::cli::add_generate_command(app);
  specula::cli::add_bench_spec_command(app);
  specula::cli::add_inspect_command(app);
  specula::cli::add_models_command(app);
  specula::cli::add_convert_command(app);
  specula::cli::add_bench_forward_command(app);
  specula::cli::add_eval_command(app);
  specula::cli::add_tokenize_command(app);
  specula::cli::add_serve_command(app);
  specula::cli::add_bench_serve_command(app);
  specula::cli::add_perplexity_command(app);
  specula::cli::add_template_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const specula::cli::CommandFailed& e) {
    if (*e.what()) std::fprintf(stderr, "specula-cli: %s\n", e.what());
    return e.code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "specula-cli: %s\n", e.what());
    return 1;
  }
  return 0;
}
