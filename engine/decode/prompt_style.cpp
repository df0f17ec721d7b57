#include "decode/prompt_style.h"

#include <stdexcept>
#include <string_view>
#include <utility>

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

namespace {

constexpr const char* kOpenFence = "```python\n";

// The code ends with its newline (code_prompt), so the fence closes on a line of its own.
std::string code_request(const std::string& prompt) {
  return "Complete the following Python function:\n" + std::string(kOpenFence) + prompt + "```";
}

bool starts_with(std::string_view text, std::string_view start) { return text.substr(0, start.size()) == start; }

std::string_view trimmed(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// The code of the answer's first fenced block (to its closing fence or the answer's end);
// the whole answer when it has no fence.
std::string_view first_code_block(std::string_view answer) {
  const size_t open = answer.find("```");
  if (open == std::string_view::npos) return answer;
  const size_t line_end = answer.find('\n', open);
  if (line_end == std::string_view::npos) return {};
  std::string_view code = answer.substr(line_end + 1);
  if (starts_with(code, "```")) return {};
  const size_t close = code.find("\n```");
  return close == std::string_view::npos ? code : code.substr(0, close + 1);
}

// The line of `text` starting at `pos`, without its newline, and where the next one starts.
std::pair<std::string_view, size_t> line_at(std::string_view text, size_t pos) {
  const size_t end = text.find('\n', pos);
  if (end == std::string_view::npos) return {text.substr(pos), text.size()};
  return {text.substr(pos, end - pos), end + 1};
}

// The prompt's last "def " line, trimmed; empty when it has none.
std::string_view signature_of(std::string_view prompt) {
  std::string_view found;
  for (size_t pos = 0; pos < prompt.size();) {
    const auto [line, next] = line_at(prompt, pos);
    const std::string_view t = trimmed(line);
    if (starts_with(t, "def ") || starts_with(t, "async def ")) found = t;
    pos = next;
  }
  return found;
}

// Where `code` goes on after the function `signature` names (its header may span lines, up
// to the one ending in ':') and, with `skip_docstring`, the docstring right after it; npos
// when the function is not there.
size_t after_header(std::string_view code, std::string_view signature, bool skip_docstring) {
  const std::string_view head = signature.substr(0, signature.find('(') + 1);  // "def name("
  size_t pos = 0;
  while (pos < code.size() && !starts_with(trimmed(line_at(code, pos).first), head)) pos = line_at(code, pos).second;
  if (pos >= code.size()) return std::string_view::npos;
  for (;;) {  // to the line that ends the header
    const auto [line, next] = line_at(code, pos);
    pos = next;
    const std::string_view t = trimmed(line);
    if (pos >= code.size() || (!t.empty() && t.back() == ':')) break;
  }
  if (!skip_docstring) return pos;
  const std::string_view first = trimmed(line_at(code, pos).first);
  for (const std::string_view quote : {std::string_view("\"\"\""), std::string_view("'''")}) {
    if (!starts_with(first, quote)) continue;
    const size_t close = code.find(quote, code.find(quote, pos) + quote.size());
    return close == std::string_view::npos ? code.size() : line_at(code, close).second;
  }
  return pos;
}

bool has_docstring_after(const std::string& prompt, size_t pos) {
  return prompt.find("\"\"\"", pos) != std::string::npos || prompt.find("'''", pos) != std::string::npos;
}

}  // namespace

std::string chat_code_prefix(const ModelChatTemplate& chat, const std::string& prompt) {
  const nlohmann::ordered_json user = nlohmann::ordered_json::array({chat_code_messages(prompt)[0]});
  return render_chat(chat, user, /*add_generation_prompt=*/true) + kOpenFence;
}

nlohmann::ordered_json chat_code_messages(const std::string& prompt) {
  return nlohmann::ordered_json::array({{{"role", "user"}, {"content", code_request(prompt)}},
                                        {{"role", "assistant"}, {"content", kOpenFence + prompt}}});
}

std::optional<bool> chat_answer_continues(const std::string& prompt, const std::string& start, bool complete) {
  const bool at_line_start = prompt.empty() || prompt.back() == '\n';
  const std::string_view text(start);
  size_t pos = 0;
  if (at_line_start) {  // the first line that is not blank
    const size_t ink = text.find_first_not_of(" \t\r\n");
    if (ink == std::string_view::npos) return complete ? std::optional<bool>(true) : std::nullopt;
    const size_t newline = text.rfind('\n', ink);
    pos = newline == std::string_view::npos ? 0 : newline + 1;
  }
  const auto [line, next] = line_at(text, pos);
  if (next >= text.size() && (text.empty() || text.back() != '\n') && !complete) return std::nullopt;
  if (starts_with(trimmed(line), "```")) return false;
  return !at_line_start || line.empty() || line[0] == ' ' || line[0] == '\t';
}

std::string completion_from_chat_answer(const std::string& prompt, const std::string& answer) {
  std::string_view code = first_code_block(answer);
  if (starts_with(code, prompt)) return std::string(code.substr(prompt.size()));
  const std::string_view signature = signature_of(prompt);
  if (signature.empty()) return std::string(code);
  const size_t body = after_header(code, signature, has_docstring_after(prompt, prompt.rfind(signature)));
  return std::string(body == std::string_view::npos ? code : code.substr(body));
}

void use_chat_prompt(GenerationRequest& request, const ModelChatTemplate& chat) {
  request.chat_prefix = chat_code_prefix(chat, request.prompt);
  request.stop.push_back(kChatCodeStop);
}

}  // namespace specula
