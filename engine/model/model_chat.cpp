#include "model/model_chat.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/gguf.h"

namespace specula {

namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

std::string piece_or_empty(const Vocabulary& vocab, int id) {
  return id >= 0 && id < vocab.size() ? vocab.pieces[static_cast<size_t>(id)] : std::string();
}

std::optional<ModelChatTemplate> gguf_chat_template(const std::string& path) {
  const GgufFile gguf = GgufFile::read_header(path, GgufPart::Metadata);
  ModelChatTemplate t{.source = gguf.get_string("tokenizer.chat_template", "")};
  if (t.source.empty()) return std::nullopt;
  const Vocabulary vocab = gguf_vocabulary(gguf);
  t.bos_token = piece_or_empty(vocab, vocab.bos);
  t.eos_token = piece_or_empty(vocab, vocab.eos);
  return t;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelError(path.string() + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// tokenizer_config.json's bos_token / eos_token: a string or {"content": ...}.
std::string special_token_text(const Json& config, const char* key) {
  if (!config.contains(key)) return "";
  const Json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

std::optional<ModelChatTemplate> directory_chat_template(const std::string& dir) {
  const fs::path config_path = fs::path(dir) / "tokenizer_config.json";
  Json config = Json::object();
  if (fs::exists(config_path)) {
    config = Json::parse(read_text(config_path), nullptr, false);
    if (config.is_discarded() || !config.is_object()) throw ModelError(config_path.string() + ": not a JSON object");
  }
  ModelChatTemplate t{.bos_token = special_token_text(config, "bos_token"),
                      .eos_token = special_token_text(config, "eos_token")};
  const fs::path jinja_path = fs::path(dir) / "chat_template.jinja";
  if (fs::exists(jinja_path)) {
    t.source = read_text(jinja_path);
  } else if (config.contains("chat_template") && config["chat_template"].is_string()) {
    t.source = config["chat_template"].get<std::string>();
  } else if (config.contains("chat_template") && config["chat_template"].is_array()) {
    for (const Json& named : config["chat_template"]) {
      if (named.is_object() && named.value("name", "") == "default") t.source = named.value("template", "");
    }
  }
  if (t.source.empty()) return std::nullopt;
  return t;
}

}  // namespace

std::optional<ModelChatTemplate> read_model_chat_template(const std::string& path) {
  return fs::is_directory(path) ? directory_chat_template(path) : gguf_chat_template(path);
}

std::optional<ModelChatTemplate> model_chat_template(const Model& model) {
  if (model.format == "gguf") return gguf_chat_template(model.path);
  if (model.format != "safetensors") return std::nullopt;
  // a directory, or one .safetensors file of it
  return directory_chat_template(fs::is_directory(model.path) ? model.path : fs::path(model.path).parent_path().string());
}

std::string render_chat(const ModelChatTemplate& chat, const nlohmann::ordered_json& messages,
                        bool add_generation_prompt, const ChatTemplateLimits& limits) {
  const ChatTemplateInput input{.messages = messages,
                                .add_generation_prompt = add_generation_prompt,
                                .bos_token = chat.bos_token,
                                .eos_token = chat.eos_token};
  return ChatTemplate(chat.source, limits).apply(input);
}

std::vector<int> encode_chat(const Tokenizer& tokenizer, std::string_view rendered) {
  return tokenizer.encode(rendered, /*add_special=*/false, /*parse_special=*/true);
}

}  // namespace specula
