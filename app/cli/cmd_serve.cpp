// specula-cli serve: an OpenAI-compatible HTTP server (POST /v1/completions, GET /v1/models,
// GET /health), plus llama.cpp's POST /completion and POST /infill for editor plugins, over
// the local models; the n choices of a request are one batched
// speculative decode. Stops on SIGINT or SIGTERM. See docs/scale-out.md.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "eval/sandbox.h"
#include "eval/test_runner.h"
#include "model_options.h"
#include "serve/completion_server.h"
#include "serve/suggestions.h"

namespace specula::cli {

namespace {

struct ServeArgs {
  ModelOptions models;
  serve::ServerOptions server;
  std::string name;
  std::string chat_template_file;  // empty: the model's own template
  int suggestions = 0;             // --suggestions; 0: chosen for the device (default_suggestions)
  std::string python;              // the sandbox's interpreter for the suggestions' checks ("" = python3)
  std::string prompt_style = "raw";  // of /v1/completions: as before the chat style existed
};

// --suggestions' default: kGpuSuggestions on a GPU; on a CPU the largest batch whose decoding
// step the cost model prices at most kSuggestionCostRatio times one sequence's. `why` says
// which, with the price of the next larger batch.
int default_suggestions(Backend& backend, const LoadedModels& loaded, std::string& why) {
  if (backend.name().rfind("cuda", 0) == 0) {
    why = "the default on a GPU";
    return serve::kGpuSuggestions;
  }
  const std::shared_ptr<const ForwardCost> target = backend.forward_cost(*loaded.target);
  std::shared_ptr<const ForwardCost> draft;
  if (loaded.draft.kind == "model" && loaded.draft.draft_model) draft = backend.forward_cost(*loaded.draft.draft_model);
  const int n = serve::suggestions_for_cost(*target, draft.get());
  const auto step = [&](int k) {
    return serve::suggestion_step_seconds(*target, draft.get(), k, serve::kSuggestionDraftTokens,
                                          serve::kSuggestionContext);
  };
  char text[160];
  std::snprintf(text, sizeof text, "by the cost model: a step of %d sequences costs %.2f times one's", n + 1,
                step(n + 1) / step(1));
  why = text;
  return n;
}

// The sandbox and the runner of the suggestions' checks; none (with a note) where Python
// does not run: the suggestions are then ranked by likelihood.
struct SuggestionChecks {
  std::unique_ptr<Sandbox> sandbox;
  std::unique_ptr<TestRunner> runner;
};
SuggestionChecks open_suggestion_checks(const std::string& python, int suggestions) {
  SuggestionChecks checks;
  try {
    checks.sandbox = std::make_unique<Sandbox>(SandboxOptions{.python = python, .use_namespaces = true});
  } catch (const SandboxError& e) {
    std::fprintf(stderr, "no sandbox for the suggestions' checks (%s): they are ranked by likelihood\n", e.what());
    return checks;
  }
  SandboxLimits limits;
  limits.wall_seconds = serve::kUntimedCheckSeconds;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  checks.runner = std::make_unique<TestRunner>(*checks.sandbox, limits, std::min(suggestions, cores));
  // The warm interpreters start now rather than within the first request's time limit.
  const TestProgram nothing = make_test_program("", "pass\n", "", "", "");
  checks.runner->run_all(std::vector<TestProgram>(static_cast<size_t>(checks.runner->jobs()), nothing));
  return checks;
}

// The id clients ask for: --name, else the model file's name without its extension.
std::string model_name(const ServeArgs& a) {
  if (!a.name.empty()) return a.name;
  if (a.models.model_path.empty()) return "specula-demo";
  std::filesystem::path path(a.models.model_path);
  while (!path.empty() && !path.has_filename()) path = path.parent_path();  // a directory given with a trailing '/'
  return path.stem().string();
}

void run(ServeArgs& a) {
  // Signals go to one thread, which stops the server; every other thread blocks them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not end the server

  LoadedModels loaded = load_models(a.models);
  a.server.model_name = model_name(a);
  if (!a.chat_template_file.empty()) a.server.chat_template = read_input_file(a.chat_template_file);
  a.server.prompt_style = parse_prompt_style(a.prompt_style);
  if (a.server.prompt_style == PromptStyle::Chat && a.chat_template_file.empty() && !model_chat_template(*loaded.target)) {
    throw CommandFailed("--prompt-style chat needs a chat template, and this model has none (name one: --chat-template)", 2);
  }
  a.server.draft = loaded.draft;
  std::string why = "--suggestions";
  a.server.suggestions = a.suggestions > 0 ? a.suggestions : default_suggestions(*loaded.backend, loaded, why);
  const SuggestionChecks checks =
      a.server.suggestions > 1 ? open_suggestion_checks(a.python, a.server.suggestions) : SuggestionChecks{};
  a.server.checks = checks.runner.get();
  LocalGenerator generator(std::move(loaded.backend), std::move(loaded.target), std::move(loaded.draft.draft_model));
  serve::CompletionServer server(generator, a.server);
  const int port = server.listen();
  std::fprintf(stderr, "%s; drafter %s, policy %s; %d suggestions per editor request (%s)\n",
               loaded.backend_note.c_str(), a.server.draft.kind.c_str(), a.server.draft.policy.c_str(),
               a.server.suggestions, why.c_str());
  std::printf("specula-cli serve: model %s listening on http://%s:%d\n", a.server.model_name.c_str(),
              a.server.host.c_str(), port);
  std::fflush(stdout);

  std::atomic<bool> signalled{false};
  std::thread waiter([&] {
    int received = 0;
    sigwait(&signals, &received);
    signalled = true;
    server.stop();
  });
  server.serve();
  if (!signalled) kill(getpid(), SIGTERM);  // wakes the waiter: serve() ended on its own
  waiter.join();
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the model over OpenAI's completions and chat completions API (HTTP)");
  add_model_options(cmd, a->models);
  cmd->add_option("--host", a->server.host, "Address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", a->server.port, "Port (default 8080; 0: any free port, printed on stdout)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", a->server.api_key, "Require this key as \"Authorization: Bearer KEY\" on /v1/");
  cmd->add_option("--max-queue", a->server.max_queue,
                  "Requests that may wait behind the one generating; more get 503 (default 16)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-body", a->server.max_body_bytes, "Largest request body in bytes, after transfer decoding; larger get 413 (default 1 MiB)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--allow-compressed", a->server.allow_compressed,
               "Accept gzip and deflate request bodies (Content-Encoding), inflated within --max-body and at most "
               "100 times their compressed size; without it they get 415");
  cmd->add_option("--request-timeout", a->server.request_timeout_seconds,
                  "Seconds a request may take to arrive whole, its headers at most 10; slower get 408 (default 30)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-connections", a->server.max_connections,
                  "HTTP connections open at once; beyond, idle ones close first, then 503 (default 512)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-connections-per-client", a->server.max_connections_per_client,
                  "HTTP connections open at once from one address; beyond, 503 (default 128)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--allowed-host", a->server.allowed_hosts,
                  "A host name clients may reach the server by, beyond IP addresses, localhost and --host "
                  "(repeatable; '*': any). Other names are refused, against DNS rebinding");
  cmd->add_option("--allowed-origin", a->server.allowed_origins,
                  "A web page origin (https://app.example) allowed to call the server from a browser, with CORS "
                  "(repeatable; '*': any). Browser requests from other origins are refused");
  cmd->add_option("--max-kv-tokens", a->server.max_kv_tokens,
                  "KV positions one request may need (n, prompt and max_tokens); more get 400 (default 131072)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--chat-template", a->chat_template_file,
                  "Jinja chat template file for /v1/chat/completions instead of the model's own");
  cmd->add_option("--prompt-cache-blocks", a->server.prompt_cache_blocks,
                  "KV blocks (16 positions each) of recent prompts kept across requests, so that a request "
                  "whose prompt starts as an earlier one prefills only the rest; least recently used go first "
                  "(0: no prompt cache; default: four contexts, at most 8192 positions)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--prompt-style", a->prompt_style,
                  "How /v1/completions puts a prompt without a suffix to the model: raw (as it is; the default), chat "
                  "(a user turn asking to complete the function, the assistant's turn opened with the prompt in a fence, "
                  "ending at the closing fence) or auto: chat for a model with a chat template")
      ->check(CLI::IsMember({"auto", "raw", "chat"}));
  cmd->add_flag("--spm-infill", a->server.spm_infill,
               "POST /infill lays the prompt out suffix first (Suffix/Prefix/Middle), as llama.cpp's --spm-infill, for "
               "models trained so whose file does not say it (specula.fim.order)");
  cmd->add_flag("--infill-fallback", a->server.infill_fallback,
               "POST /infill on a model without fill-in-the-middle tokens: complete the code before the hole as a "
               "plain prompt, cut at the first line that dedents below the hole (without it: 501, as llama.cpp)");
  cmd->add_option("--suggestions", a->suggestions,
                  "Candidates decoded together for each whole /infill and /completion answer; the best by checks "
                  "that need no tests (Python: the filled code compiles and runs, in the sandbox), agreement and "
                  "likelihood is `content`, all are in `candidates` (default: 4 on a GPU; on a CPU the most whose "
                  "decoding step costs at most 1.3 times one's, by the cost model; 1: no ranking)")
      ->check(CLI::Range(1, kMaxCandidates));
  cmd->add_option("--python", a->python, "Python interpreter of the suggestions' checks (default: python3 on PATH)");
  cmd->add_option("--name", a->name, "Model id the server lists and answers to (default: the model file's name)");
  cmd->callback([a] {
    try {
      run(*a);
    } catch (const std::invalid_argument& e) {
      throw CommandFailed(e.what(), 2);
    } catch (const ModelError& e) {
      throw CommandFailed(e.what(), 2);
    }
  });
}

}  // namespace specula::cli
