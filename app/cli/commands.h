// The subcommands of specula-cli. Each file adds one subcommand to the app; its
// callback does the work and reports failure by throwing CommandFailed (exit code and
// message) or any std::exception (exit code 1).
#pragma once

#include <CLI/CLI.hpp>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace specula::cli {

struct CommandFailed : std::runtime_error {
  CommandFailed(const std::string& message, int exit_code)
      : std::runtime_error(message), code(exit_code) {}
  int code;
};

// The bytes of a file the user named (a prompt, a text); CommandFailed (exit 2) when unreadable.
inline std::string read_input_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CommandFailed("cannot read " + path, 2);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void add_check_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_bench_spec_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_models_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_bench_forward_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_bench_serve_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
void add_template_command(CLI::App& app);

}  // namespace specula::cli
