// specula-cli convert IN OUT.gguf: any supported model to GGUF, optionally quantized.
#include <cstdio>
#include <filesystem>
#include <string>

#include "commands.h"
#include "model/model.h"
#include "model/model_export.h"

namespace specula::cli {

void add_convert_command(CLI::App& app) {
  struct Options {
    std::string input;
    std::string output;
    std::string tokenizer;
    std::string type = "f32";
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("convert", "Write a model as GGUF (f32, f16, q8_0, q4_0, q4_1, q5_0 or q5_1 weights)");
  cmd->add_option("input", options->input, "GGUF file, llama2.c checkpoint or Hugging Face directory")->required();
  cmd->add_option("output", options->output, "GGUF file to write")->required();
  cmd->add_option("--tokenizer", options->tokenizer, "Tokenizer file for models without a vocabulary");
  cmd->add_option("--type", options->type, "Weight matrix type")
      ->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"}));
  cmd->callback([options] {
    LoadOptions load;
    load.tokenizer_path = options->tokenizer;
    try {
      const auto model = load_model(options->input, load);
      if (!model->tokenizer) {
        std::fprintf(stderr, "specula-cli: warning: %s has no vocabulary; the GGUF will have none (pass --tokenizer)\n",
                     options->input.c_str());
      }
      write_gguf_model(*model, options->output, *tensor_type_from_name(options->type));
      std::printf("wrote %s: %s weights, %ju bytes\n", options->output.c_str(), options->type.c_str(),
                  static_cast<uintmax_t>(std::filesystem::file_size(options->output)));
    } catch (const ModelError& e) {
      throw CommandFailed(e.what(), 2);
    }
  });
}

}  // namespace specula::cli
