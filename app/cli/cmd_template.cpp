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
#include "model/gguf.h"

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

// A model's chat template and its BOS / EOS texts.
struct ModelTemplate {
  std::string source;
  std::string bos_token;
  std::string eos_token;
};

std::string piece_or_empty(const Vocabulary& vocab, int id) {
  return id >= 0 && id < vocab.size() ? vocab.pieces[static_cast<size_t>(id)] : std::string();
}

// GGUF: tokenizer.chat_template and the BOS / EOS pieces, from the metadata alone.
ModelTemplate gguf_template(const std::string& path) {
  const GgufFile gguf = GgufFile::read_header(path, GgufPart::Metadata);
  ModelTemplate t{.source = gguf.get_string("tokenizer.chat_template", "")};
  if (t.source.empty()) throw CommandFailed(path + ": the model carries no chat template (tokenizer.chat_template)", 2);
  const Vocabulary vocab = gguf_vocabulary(gguf);
  t.bos_token = piece_or_empty(vocab, vocab.bos);
  t.eos_token = piece_or_empty(vocab, vocab.eos);
  return t;
}

// tokenizer_config.json's bos_token / eos_token: a string or {"content": ...}.
std::string special_token_text(const Json& config, const char* key) {
  if (!config.contains(key)) return "";
  const Json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

// A Hugging Face directory: chat_template.jinja, else tokenizer_config.json's chat_template
// (a string, or a list of named templates of which "default" is the one used).
ModelTemplate directory_template(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path config_path = fs::path(dir) / "tokenizer_config.json";
  const Json config = fs::exists(config_path) ? Json::parse(read_input_file(config_path.string())) : Json::object();
  ModelTemplate t{.bos_token = special_token_text(config, "bos_token"), .eos_token = special_token_text(config, "eos_token")};
  const fs::path jinja_path = fs::path(dir) / "chat_template.jinja";
  if (fs::exists(jinja_path)) {
    t.source = read_input_file(jinja_path.string());
  } else if (config.contains("chat_template") && config["chat_template"].is_string()) {
    t.source = config["chat_template"].get<std::string>();
  } else if (config.contains("chat_template") && config["chat_template"].is_array()) {
    for (const Json& named : config["chat_template"]) {
      if (named.value("name", "") == "default") t.source = named.value("template", "");
    }
  }
  if (t.source.empty()) throw CommandFailed(dir + ": the model carries no chat template (tokenizer_config.json)", 2);
  return t;
}

ModelTemplate model_template(const std::string& model) {
  try {
    return std::filesystem::is_directory(model) ? directory_template(model) : gguf_template(model);
  } catch (const CommandFailed&) {
    throw;
  } catch (const std::exception& e) {
    throw CommandFailed(e.what(), 2);
  }
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
  ModelTemplate t = o.model.empty() ? ModelTemplate{.source = read_input_file(o.template_file)} : model_template(o.model);
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
