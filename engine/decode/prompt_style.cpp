#include "decode/prompt_style.h"

#include <stdexcept>

namespace specula {

const char* prompt_style_name(PromptStyle style) {
  switch (style) {
    case PromptStyle::Auto: return "auto";
    case PromptStyle::Raw: return "raw";
    case PromptStyle::Chat: return "chat";
  }
  return "auto";
}

PromptStyle parse_prompt_style(const std::string& name) {
  for (PromptStyle s : {PromptStyle::Auto, PromptStyle::Raw, PromptStyle::Chat}) {
    if (name == prompt_style_name(s)) return s;
  }
  throw std::invalid_argument("unknown prompt style '" + name + "': auto, raw or chat");
}

PromptStyle resolve_prompt_style(PromptStyle style, bool has_chat_template, bool fill_in_middle) {
  if (style == PromptStyle::Chat && !has_chat_template) {
    throw std::invalid_argument("the chat prompt style needs a model with a chat template, and this one has none");
  }
  if (style == PromptStyle::Chat && fill_in_middle) {
    throw std::invalid_argument("the chat prompt style cannot fill in the middle: use the raw style with a suffix");
  }
  if (style == PromptStyle::Auto) return has_chat_template && !fill_in_middle ? PromptStyle::Chat : PromptStyle::Raw;
  return style;
}

std::string chat_code_prefix(const ModelChatTemplate& chat, const std::string& prompt) {
  // The code ends with its newline (code_prompt), so the fence closes on a line of its own.
  const std::string ask = "Complete the following Python function:\n```python\n" + prompt + "```";
  const nlohmann::ordered_json messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", ask}}});
  return render_chat(chat, messages, /*add_generation_prompt=*/true) + "```python\n";
}

void use_chat_prompt(GenerationRequest& request, const ModelChatTemplate& chat) {
  request.chat_prefix = chat_code_prefix(chat, request.prompt);
  request.stop.push_back(kChatCodeStop);
}

}  // namespace specula
