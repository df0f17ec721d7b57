// Options that name the models, drafter and device, shared by the commands that generate.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "compute/backend.h"
#include "model/model.h"
#include "decode/generator.h"
#include "decode/prompt_style.h"
#include "decode/session.h"
#include "model/model_chat.h"
#include "serve/remote_generator.h"

namespace specula::cli {

struct ModelOptions {
  std::string model_path;        // empty: the demo model pair
  std::string tokenizer_path;
  std::string draft_model_path;
  std::string draft;             // empty: none, or model with a draft model
  std::string draft_policy = "goodput";
  std::string device = "auto";
  int threads = 0;               // CPU threads with --device cpu; 0: one per core
};

void add_model_options(CLI::App* command, ModelOptions& options);

// "cpu", "cuda" or "auto" (anything else) as a DeviceChoice.
DeviceChoice device_choice(const std::string& name);

// --simd chooses the CPU's kernels: throws CommandFailed (exit 2) when it names a level
// (anything but "best") for a `device` other than "cpu".
void require_cpu_for_simd(const std::string& simd, const std::string& device);
// The CPU backend with `threads` threads (0: one per core) and the kernels `simd` names:
// "best" (the best this processor runs), "portable", "avx2" or "avx512". Throws
// CommandFailed (exit 2) for a name of no level, or of one this processor cannot run.
std::unique_ptr<Backend> cpu_backend(const std::string& simd, int threads);

struct LoadedModels {
  std::shared_ptr<const Model> target;
  DraftOptions draft;             // kind, policy and draft model, ready for a request
  std::unique_ptr<Backend> backend;
  std::string backend_note;       // which backend was taken, and why
};

// Loads the target (the demo pair when no model is named), the draft model if any, and the
// backend. Throws CommandFailed (exit 2) for inconsistent options.
LoadedModels load_models(const ModelOptions& options);

constexpr int kExitRemote = 6;  // the server could not be reached, or failed

// --remote URL, --api-key, --remote-model, --insecure and --remote-api: generation on an
// OpenAI-compatible server.
void add_remote_options(CLI::App* command, serve::RemoteOptions& options);

struct OpenedGenerator {
  std::unique_ptr<Generator> generator;
  DraftOptions draft;             // kind and policy for a request (a server chooses its own)
  const Model* target = nullptr;  // the local target model; null for a server
  std::optional<ModelChatTemplate> chat_template;  // the local target's; none for a server
  bool remote_chat = false;       // a server asked through /v1/chat/completions (--remote-api chat)
  std::string note;               // where generation runs, and why there
};

// A server's generator when remote.url is set (local model options are then an error, exit
// 2), else the local models loaded as load_models() does.
OpenedGenerator open_generator(const ModelOptions& models, const serve::RemoteOptions& remote);

// --prompt-style auto|raw|chat, of the commands that complete code (generate, eval).
void add_prompt_style_option(CLI::App* command, std::string& style);

// Puts a code request (its prompt the code before the body, code_prompt's) to the model in
// `style` (decode/prompt_style.h): chat adds the chat prefix of the model's template and the
// closing fence as a stop. Returns the style used, Raw or Chat: for a server, Chat when it is
// asked through chat (--remote-api chat; the request is left as it is, RemoteGenerator asks
// in the chat style). Throws CommandFailed (exit 2) for a style that cannot be: chat without
// a template, with a suffix, or with a server asked for completions.
PromptStyle apply_prompt_style(GenerationRequest& request, const std::string& style, const OpenedGenerator& opened);

}  // namespace specula::cli
