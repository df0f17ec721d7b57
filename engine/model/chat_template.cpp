// The chat-template renderer's entry points: parse once, render many times.
#include "model/chat_template.h"

#include "model/chat_template_ast.h"
#include "model/chat_template_eval.h"

namespace specula {

ChatTemplate::ChatTemplate(const std::string& source, ChatTemplateLimits limits)
    : program_(std::make_unique<const Program>(Program{.body = jinja::parse_template(jinja::lex_template(source), limits.max_nesting)})),
      limits_(limits) {}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& variables) const {
  if (!variables.is_object()) throw ChatTemplateError("TypeError", "the template's variables must be a JSON object");
  jinja::Evaluator evaluator(limits_, jinja::Value::from_json(variables));
  return evaluator.render(program_->body);
}

std::string ChatTemplate::apply(const ChatTemplateInput& input) const {
  nlohmann::ordered_json variables = input.extra.is_object() ? input.extra : nlohmann::ordered_json::object();
  variables["messages"] = input.messages;
  variables["add_generation_prompt"] = input.add_generation_prompt;
  variables["bos_token"] = input.bos_token;
  variables["eos_token"] = input.eos_token;
  return render(variables);
}

}  // namespace specula
