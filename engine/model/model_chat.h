// A model's chat template as Hugging Face's apply_chat_template uses it: the template a
// model file carries with the BOS and EOS texts it sees, rendered by chat_template.h, and
// the rendered text turned into ids the way transformers does (the texts of special tokens
// parsed as those tokens, no BOS added: the template writes its own).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/chat_template.h"
#include "model/model.h"

namespace specula {

struct ModelChatTemplate {
  std::string source;     // the Jinja text
  std::string bos_token;  // the BOS text the template sees ("" when the model has none)
  std::string eos_token;  // the EOS text the template sees
};

// The chat template of a model file: GGUF's tokenizer.chat_template, or a Hugging Face
// directory's chat_template.jinja, else tokenizer_config.json's chat_template (a string, or
// the list entry named "default"). nullopt when it carries none. Reads metadata only.
// Throws std::runtime_error (ModelError) for a file that cannot be read.
std::optional<ModelChatTemplate> read_model_chat_template(const std::string& path);
// The same for a loaded model, from the file it was loaded from; nullopt for formats that
// carry no template (llama2.c checkpoints, models built in memory such as the demo pair).
std::optional<ModelChatTemplate> model_chat_template(const Model& model);

// The text of `messages` (a JSON array of {"role", "content", ...}) through the template.
// Throws ChatTemplateError (the template's own errors, and `limits`).
std::string render_chat(const ModelChatTemplate& chat, const nlohmann::ordered_json& messages,
                        bool add_generation_prompt, const ChatTemplateLimits& limits = {});

// The ids of a rendered chat, as apply_chat_template(tokenize=True) gives them.
std::vector<int> encode_chat(const Tokenizer& tokenizer, std::string_view rendered);

}  // namespace specula
