// Chat templates: the Jinja templates that model files carry (GGUF's tokenizer.chat_template,
// Hugging Face's tokenizer_config.json) to turn a conversation into the text a model reads.
//
// Our own renderer of the part of Jinja that real templates use, rendering as Hugging Face
// transformers renders them with Python's jinja2 (an immutable sandbox, trim_blocks and
// lstrip_blocks on, the loopcontrols extension, `tojson` without ASCII escaping, a
// `raise_exception` global). What it supports and its limits: docs/chat.md.
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace specula {

// A template that cannot be parsed or fails while rendering. `kind` is the name jinja2 gives
// the same failure ("TemplateSyntaxError", "UndefinedError", "TemplateError" for the
// template's own raise_exception, "TypeError", "SecurityError", "OverflowError"), or
// "TemplateLimitError" when a limit below stopped the render; what() is the message alone.
class ChatTemplateError : public std::runtime_error {
 public:
  ChatTemplateError(std::string kind, const std::string& message)
      : std::runtime_error(message), kind_(std::move(kind)) {}
  const std::string& kind() const { return kind_; }

 private:
  std::string kind_;
};

// Bounds that keep a hostile template from exhausting the stack, the CPU or memory.
struct ChatTemplateLimits {
  int max_call_depth = 100;                // macro calls inside macro calls
  int max_nesting = 200;                   // brackets, operators and blocks nested in the source
  int max_render_depth = 1000;             // expressions and statements evaluating inside each other,
                                           // across macro calls: what the C++ stack holds at once
                                           // (under 1 MiB of stack at this default)
  size_t max_loop_iterations = 1'000'000;  // all loop iterations of one render together
  size_t max_output_bytes = 64u << 20;     // the output, and any one string or list built on the way
};

// What a conversation gives the template: the variables Hugging Face passes.
struct ChatTemplateInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // [{"role", "content"}, ...]
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more variables (tools, documents, ...)
};

class ChatTemplate {
 public:
  // Parses `source`; throws ChatTemplateError (TemplateSyntaxError) naming the line.
  explicit ChatTemplate(const std::string& source, ChatTemplateLimits limits = {});
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Renders with `variables` (a JSON object; key order is kept, as Python dicts keep it).
  // Throws ChatTemplateError. Safe to call from several threads at once.
  std::string render(const nlohmann::ordered_json& variables) const;
  // Renders a conversation: messages, add_generation_prompt, bos_token, eos_token and `extra`.
  std::string apply(const ChatTemplateInput& input) const;

  struct Program;  // the parsed template (chat_template_ast.h)

 private:
  std::unique_ptr<const Program> program_;
  ChatTemplateLimits limits_;
};

}  // namespace specula
