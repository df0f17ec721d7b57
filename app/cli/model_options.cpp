#include "model_options.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "commands.h"
#include "compute/simd_level.h"
#include "decode/model_set.h"
#include "model/demo_models.h"

namespace specula::cli {

namespace {

std::string executable_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

// One line on the terminal for a load that takes seconds (a large model's weights read and
// repacked, the first measurement of what its forward costs): "reading model.gguf 42 %",
// rewritten in place and erased at the end. Nothing when stderr is not a terminal, so that
// pipes, logs and the tests read what they did before.
class LoadProgress {
 public:
  LoadProgress() : enabled_(isatty(STDERR_FILENO) == 1) {}
  ~LoadProgress() { erase(); }
  LoadProgress(const LoadProgress&) = delete;
  LoadProgress& operator=(const LoadProgress&) = delete;

  // A callback showing `what` at the fraction it is called with.
  auto stage(const std::string& what) {
    return [this, what](double fraction) {
      show(what, fraction);
      return true;
    };
  }
  void erase() {
    if (!shown_) return;
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  void show(const std::string& what, double fraction) {
    if (!enabled_) return;
    const int percent = std::clamp(static_cast<int>(fraction * 100.0), 0, 100);
    if (shown_ && what == what_ && percent == percent_) return;
    what_ = what;
    percent_ = percent;
    std::fprintf(stderr, "\r\033[K%s %d %%", what.c_str(), percent);
    std::fflush(stderr);
    shown_ = true;
  }

  bool enabled_;
  bool shown_ = false;
  std::string what_;
  int percent_ = -1;
};

}  // namespace

DeviceChoice device_choice(const std::string& name) {
  if (name == "cpu") return DeviceChoice::Cpu;
  if (name == "cuda") return DeviceChoice::Cuda;
  return DeviceChoice::Auto;
}

void require_cpu_for_simd(const std::string& simd, const std::string& device) {
  if (simd != "best" && device != "cpu") throw CommandFailed("--simd chooses the CPU's kernels: use it with --device cpu", 2);
}

std::unique_ptr<Backend> cpu_backend(const std::string& simd, int threads) {
  if (simd == "best") return create_cpu_backend(threads);
  const std::optional<SimdLevel> level = simd_level_from_name(simd);
  if (!level) throw CommandFailed("--simd " + simd + ": not a SIMD level (best, portable, avx2, avx512)", 2);
  try {
    return create_cpu_backend(threads, *level);
  } catch (const std::invalid_argument& e) {
    throw CommandFailed(std::string("--simd ") + simd + ": " + e.what(), 2);
  }
}

void add_model_options(CLI::App* command, ModelOptions& o) {
  command->add_option("-m,--model", o.model_path,
                      "Model: GGUF, llama2.c checkpoint or Hugging Face directory (default: the demo model pair)");
  command->add_option("--tokenizer", o.tokenizer_path,
                      "Tokenizer for model files without one (tokenizer.model, tokenizer.bin, tokenizer.json)");
  command->add_option("-d,--draft-model", o.draft_model_path, "Draft model file (implies --draft model)");
  command->add_option("--draft", o.draft, "Drafter: none, ngram, layers:K or model (default none, or model with a draft model)");
  command->add_option("--draft-policy", o.draft_policy, "Draft length: goodput (from the measured cost of a forward), fixed:K, bass or adaptive (default goodput)");
  command->add_option("--device", o.device, "cpu, cuda or auto (default auto)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  command->add_option("--threads", o.threads, "CPU threads with --device cpu (default 0: one per core)")
      ->check(CLI::NonNegativeNumber);
}

LoadedModels load_models(const ModelOptions& o) {
  std::string target_path = o.model_path;
  std::string draft_path = o.draft_model_path;
  if (target_path.empty()) {
    const auto demo = find_demo_models(executable_dir());
    if (!demo) throw CommandFailed("no model given (-m) and no demo model found", 2);
    target_path = demo->target;
    if (draft_path.empty() && (o.draft.empty() || o.draft == "model")) draft_path = demo->draft;
  }

  LoadedModels loaded;
  loaded.draft.kind = !o.draft.empty() ? o.draft : (draft_path.empty() ? "none" : "model");
  loaded.draft.policy = o.draft_policy;
  if (!draft_path.empty() && loaded.draft.kind != "model") {
    throw CommandFailed("-d names a draft model; use it with --draft model", 2);
  }
  if (o.threads > 0 && o.device != "cpu") throw CommandFailed("--threads chooses the CPU's threads: use it with --device cpu", 2);
  std::unique_ptr<Backend> backend;
  if (o.threads > 0) {
    backend = create_cpu_backend(o.threads);
    loaded.backend_note = "using " + backend->name();
  } else {
    backend = create_backend(device_choice(o.device), &loaded.backend_note);
  }
  // what a forward costs, which the goodput policy weighs drafts by, is measured now
  // (seconds, the first time a model file is used) rather than inside the first generation
  LoadProgress progress;
  ModelSet set = load_model_set(std::move(backend),
                                {.target = target_path,
                                 .tokenizer = o.tokenizer_path,
                                 .draft_model = draft_path,
                                 .drafter = loaded.draft.kind,
                                 .measure_cost = loaded.draft.kind != "none" && loaded.draft.policy == "goodput"},
                                [&progress](const std::string& what, double fraction, double) {
                                  return progress.stage(what)(fraction);
                                });
  loaded.target = std::move(set.target);
  loaded.draft.draft_model = std::move(set.draft);
  loaded.backend = std::move(set.backend);
  return loaded;
}

void add_remote_options(CLI::App* command, serve::RemoteOptions& o) {
  command->add_option("--remote", o.url,
                      "Generate on an OpenAI-compatible server (Specula's serve, vLLM, SGLang, llama.cpp) at this URL "
                      "instead of a local model");
  command->add_option("--api-key", o.api_key, "API key for --remote (sent as a bearer token)");
  command->add_option("--remote-model", o.model, "Model to ask --remote for (default: the first one it lists)");
  command->add_flag("--insecure", o.insecure, "Accept a TLS certificate of --remote that does not verify");
  const std::map<std::string, serve::RemoteApi> apis = {
      {"auto", serve::RemoteApi::Auto}, {"completions", serve::RemoteApi::Completions}, {"chat", serve::RemoteApi::Chat}};
  command
      ->add_option("--remote-api", o.api,
                   "Endpoint of --remote: completions (/v1/completions), chat (/v1/chat/completions: asks for the "
                   "function and continues the assistant's message opened with the code, else takes the function from "
                   "the answer's code block) or auto: completions, chat on a server without them (default auto)")
      ->transform(CLI::CheckedTransformer(apis));
}

OpenedGenerator open_generator(const ModelOptions& models, const serve::RemoteOptions& remote) {
  OpenedGenerator opened;
  if (remote.url.empty()) {
    LoadedModels loaded = load_models(models);
    opened.draft = loaded.draft;
    opened.target = loaded.target.get();
    opened.note = loaded.backend_note;
    try {
      opened.chat_template = model_chat_template(*loaded.target);
    } catch (const std::exception& e) {
      throw CommandFailed(e.what(), 2);
    }
    opened.generator = std::make_unique<LocalGenerator>(std::move(loaded.backend), std::move(loaded.target),
                                                        std::move(loaded.draft.draft_model));
    return opened;
  }
  if (!models.model_path.empty() || !models.tokenizer_path.empty() || !models.draft_model_path.empty() ||
      !models.draft.empty()) {
    throw CommandFailed("--remote generates on the server: -m, --tokenizer, -d and --draft do not apply", 2);
  }
  try {
    auto generator = std::make_unique<serve::RemoteGenerator>(remote);
    opened.note = "server: " + generator->probe().summary;
    opened.remote_chat = remote.api == serve::RemoteApi::Chat;
    opened.generator = std::move(generator);
  } catch (const std::invalid_argument& e) {
    throw CommandFailed(e.what(), 2);
  } catch (const serve::RemoteError& e) {
    throw CommandFailed(e.what(), kExitRemote);
  }
  return opened;
}

void add_prompt_style_option(CLI::App* command, std::string& style) {
  command->add_option("--prompt-style", style,
                      "How code is put to the model: raw (the code as it is), chat (a user turn asking to complete the "
                      "function, the assistant's turn opened with the code in a fence, stopping at the closing fence) "
                      "or auto: chat for a model with a chat template unless filling in the middle (default auto)")
      ->check(CLI::IsMember({"auto", "raw", "chat"}));
}

PromptStyle apply_prompt_style(GenerationRequest& request, const std::string& style, const OpenedGenerator& opened) {
  PromptStyle used = PromptStyle::Raw;
  try {
    const PromptStyle asked = parse_prompt_style(style);
    if (!opened.target) {  // a server is asked through the endpoint --remote-api names
      if (asked == PromptStyle::Chat && !opened.remote_chat) {
        throw std::invalid_argument("a server is asked in the chat style through its chat endpoint: --remote-api chat");
      }
      return opened.remote_chat ? PromptStyle::Chat : PromptStyle::Raw;
    }
    used = resolve_prompt_style(asked, opened.chat_template.has_value(), request.suffix.has_value());
    if (used == PromptStyle::Chat) use_chat_prompt(request, *opened.chat_template);
  } catch (const std::invalid_argument& e) {
    throw CommandFailed(e.what(), 2);
  } catch (const ChatTemplateError& e) {
    throw CommandFailed("the model's chat template failed: " + e.kind() + ": " + e.what(), 2);
  }
  return used;
}

}  // namespace specula::cli
