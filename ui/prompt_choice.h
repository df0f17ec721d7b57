// The Models panel's "Prompt style" (decode/prompt_style.h) for one run: what Auto, Raw or
// Chat means for the model in use and the request, and how the window says which style a
// run used. The window asks before a run starts and the worker again for each run, so a
// choice that cannot be is one message, never a run of candidates that all fail.
#pragma once

#include <QString>
#include <stdexcept>

#include "decode/prompt_style.h"

namespace specula::ui {

// What the window knows of the model in use and the next request.
struct PromptContext {
  bool chat_template = false;   // the model in use carries a chat template
  bool server = false;          // generation runs on a server, which is prompted raw
  bool fill_in_middle = false;  // the request has a suffix (Fill at cursor)
};

// The style a run uses, Raw or Chat. Throws std::invalid_argument with the window's message
// for a choice that cannot be (Chat without a template, on a server, or filling in the
// middle), and for a name other than "auto", "raw", "chat".
PromptStyle runPromptStyle(const QString& choice, const PromptContext& context);

// The status bar's words for the style a run used: "chat prompt (model's template)" or
// "raw prompt".
QString promptStyleSummary(PromptStyle used);

// Why `used` was the style for `choice` (the status bar's tooltip).
QString promptStyleReason(const QString& choice, PromptStyle used, const PromptContext& context);

}  // namespace specula::ui
