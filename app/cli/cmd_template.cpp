// specula-cli template (-m MODEL | --template FILE) --messages FILE: the text a chat template
// makes of a conversation, exactly (nothing added), as Hugging Face's apply_chat_template
// renders it with jinja2. Exit 2 for unusable input and for a template that raises.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "commands.h"
#include "model/chat_template.h"
#include "model/model_chat.h"

namespace specula::cli {

namespace {

using Json = nlohmann::ordered_json;

struct Options {
  std::string model;     // GGUF file or Hugging Face directory carrying a chat template
  std::string template_file;
  std::string messages_file;
  bool no_generation_prompt = false;
  std::optional<std::string> bos_token;  // unset: the model's (empty with --template)
  std::optional<std::string> eos_token;
};

// The model's template, BOS and EOS (model/model_chat.h); exit 2 when it carries none.
ModelChatTemplate model_template(const std::string& model) {
  std::optional<ModelChatTemplate> t;
  try {
    t = read_model_chat_template(model);
  } catch (const std::exception& e) {
    throw CommandFailed(e.what(), 2);
  }
  if (!t) {
    throw CommandFailed(model + ": the model carries no chat template (" +
                            (std::filesystem::is_directory(model) ? "tokenizer_config.json" : "tokenizer.chat_template") + ")",
                        2);
  }
  return *t;
}

// --messages: a JSON array of objects, each with a string "role".
Json read_messages(const std::string& path) {
  Json messages;
  try {
    messages = Json::parse(read_input_file(path));
  } catch (const Json::exception& e) {
    throw CommandFailed(path + ": not JSON: " + e.what(), 2);
  }
  if (!messages.is_array()) throw CommandFailed(path + ": expected a JSON array of {\"role\", \"content\"} objects", 2);
  for (const Json& m : messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      throw CommandFailed(path + ": every message needs a string \"role\" (and a \"content\")", 2);
    }
  }
  return messages;
}

void run(const Options& o) {
  if (o.model.empty() == o.template_file.empty()) throw CommandFailed("give the template with exactly one of -m and --template", 2);
  ModelChatTemplate t = o.model.empty() ? ModelChatTemplate{.source = read_input_file(o.template_file)} : model_template(o.model);
  const ChatTemplateInput input{.messages = read_messages(o.messages_file),
                                .add_generation_prompt = !o.no_generation_prompt,
                                .bos_token = o.bos_token.value_or(t.bos_token),
                                .eos_token = o.eos_token.value_or(t.eos_token)};
  std::string text;
  try {
    text = ChatTemplate(t.source).apply(input);
  } catch (const ChatTemplateError& e) {
    throw CommandFailed(e.kind() + ": " + e.what(), 2);
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
}

}  // namespace

void add_template_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("template", "Print the text a chat template makes of a conversation (no weights are loaded)");
  cmd->add_option("-m,--model", o->model, "GGUF file or Hugging Face directory whose chat template to use");
  cmd->add_option("--template", o->template_file, "Jinja chat template file to use instead of a model's");
  cmd->add_option("--messages", o->messages_file, "JSON file: an array of {\"role\", \"content\"} messages")->required();
  cmd->add_flag("--no-generation-prompt", o->no_generation_prompt, "Do not open the assistant's turn at the end");
  cmd->add_option("--bos-token", o->bos_token, "BOS text the template sees (default: the model's; empty with --template)");
  cmd->add_option("--eos-token", o->eos_token, "EOS text the template sees (default: the model's; empty with --template)");
  cmd->footer("Exit codes: 0 printed; 2 unusable input, a model without a chat template, or a template that raises "
              "(its message follows, as jinja2 names it).");
  cmd->callback([o] { run(*o); });
}

}  // namespace specula::cli
