#include "prompt_choice.h"

#include <QCoreApplication>

namespace specula::ui {

namespace {

QString tr(const char* text) { return QCoreApplication::translate("PromptStyle", text); }

}  // namespace

PromptStyle runPromptStyle(const QString& choice, const PromptContext& context) {
  const PromptStyle asked = parse_prompt_style(choice.toStdString());
  if (asked == PromptStyle::Chat) {
    // the engine refuses the same (resolve_prompt_style); these say what to change in the window
    if (context.server)
      throw std::invalid_argument(tr("Prompt style Chat is for model files: a server is prompted raw. "
                                     "Choose Auto or Raw.").toStdString());
    if (!context.chat_template)
      throw std::invalid_argument(tr("Prompt style Chat needs a model with a chat template, and this model has "
                                     "none. Choose Auto or Raw, or an instruct model.").toStdString());
    if (context.fill_in_middle)
      throw std::invalid_argument(tr("Prompt style Chat cannot fill in the middle: turn off Fill at cursor, "
                                     "or choose Auto or Raw.").toStdString());
  }
  // a server's template is not known here: Auto prompts it raw, as the remote client does
  return resolve_prompt_style(asked, context.chat_template && !context.server, context.fill_in_middle);
}

QString promptStyleSummary(PromptStyle used) {
  return used == PromptStyle::Chat ? tr("chat prompt (model's template)") : tr("raw prompt");
}

QString promptStyleReason(const QString& choice, PromptStyle used, const PromptContext& context) {
  if (used == PromptStyle::Chat)
    return tr("The model read a chat asking it to complete the function, through its own chat template, with "
              "the assistant's answer opened with the code; each candidate is still the code's completion.");
  if (choice == QLatin1String("raw")) return tr("Prompt style Raw: the code as it is.");
  if (context.server) return tr("Auto: a server is prompted with the code as it is.");
  if (context.fill_in_middle) return tr("Auto: filling in the middle gives the code as it is, around the hole.");
  return tr("Auto: the model has no chat template, so it was given the code as it is.");
}

}  // namespace specula::ui
