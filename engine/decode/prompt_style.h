// How a code prompt is put to a model. A base model continues the code as it is (raw); an
// instruct model is asked for the function the way evaluation harnesses ask (chat): a user
// turn "Complete the following Python function:" with the code in a fence, then the
// assistant's turn opened with a fence and the same code, so that the model continues the
// function body and closes the fence when it is done. The candidates stay completions of
// the code itself: the prompt is unchanged, the chat is a prefix only the model reads.
#pragma once

#include <optional>
#include <string>

#include "decode/session.h"
#include "model/model_chat.h"

namespace specula {

enum class PromptStyle {
  Auto,  // chat for a model with a chat template, unless the request fills in the middle
  Raw,   // the code as it is
  Chat,  // the code inside a chat, through the model's template
};
const char* prompt_style_name(PromptStyle style);  // "auto", "raw", "chat"
// Throws std::invalid_argument for a name other than those.
PromptStyle parse_prompt_style(const std::string& name);

// Raw or Chat: what `style` means for a model with or without a chat template and a request
// that does or does not fill in the middle. Throws std::invalid_argument for Chat where it
// cannot be (no template, or a suffix).
PromptStyle resolve_prompt_style(PromptStyle style, bool has_chat_template, bool fill_in_middle);

// The chat the code `prompt` follows: the user's request and the assistant's turn opened,
// ending with "```python\n". Throws ChatTemplateError when the template raises.
std::string chat_code_prefix(const ModelChatTemplate& chat, const std::string& prompt);

// The same chat as messages, for a server that renders them itself: the user's request, then
// an assistant message "```python\n" + prompt for the server to continue (its prefill).
nlohmann::ordered_json chat_code_messages(const std::string& prompt);

// A chat model's answer to chat_code_messages(prompt) as a completion of `prompt`: the answer
// itself when it continues the prefill; when it starts over (restating the function in a
// code block, perhaps after a sentence), the code of its first block (or the answer from the
// prompt's signature on) after the prompt's own lines: after the prompt when the block
// starts with it, else after the signature and, if the prompt has one, the docstring.
std::string completion_from_chat_answer(const std::string& prompt, const std::string& answer);

// Whether a chat answer that begins with `start` continues `prompt` (true) or starts over
// (false), judged on its first line that is not blank: one opening a fence starts over; after
// a prompt that ends at a line's end, so does one that is not indented. Nullopt while that
// line is not complete and `complete` (the whole answer is there) is false.
std::optional<bool> chat_answer_continues(const std::string& prompt, const std::string& start, bool complete);

// The closing fence, where a chat-style candidate ends.
constexpr const char* kChatCodeStop = "```";

// Makes `request` chat-style: its chat_prefix for its prompt, and the closing fence among
// its stops.
void use_chat_prompt(GenerationRequest& request, const ModelChatTemplate& chat);

}  // namespace specula
