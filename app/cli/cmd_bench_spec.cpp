// specula-cli bench-spec: batched speculative decoding measured side by side.
//
// For every batch size N, drafter, draft policy and temperature it decodes the same prompt
// with the same settings and reports ms/token/sequence, total tokens/s, acceptance rate,
// target forwards per generated token and the speed-up over `--draft none` at the same N.
// Runs ignore EOS so that every sequence generates exactly --max-tokens tokens. With
// --alpha, the same configurations also run in FORCED-ACCEPTANCE mode (benchmark only: each
// draft token is kept with probability alpha whatever the models say) to measure the system
// at known acceptance rates on models whose own acceptance means nothing (random weights).
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "decode/decoder.h"
#include "model/model.h"
#include "model/random_model.h"

namespace specula::cli {

namespace {

struct BenchArgs {
  std::string model_path;
  std::string tokenizer_path;
  std::string draft_model_path;
  std::string random_shape;
  std::string type = "q4_0";
  int threads = 0;
  std::string prompt = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n";
  std::vector<int> batch_sizes{1, 2, 4, 8, 16};
  std::vector<std::string> drafters{"ngram", "layers:2"};
  std::vector<std::string> policies{"fixed:4", "bass", "adaptive"};
  std::vector<float> temperatures{0.0f, 0.8f};
  std::vector<double> alphas;
  int max_tokens = 64;
  int repeats = 1;
  std::string device = "cpu";
  bool json = false;
};

struct Row {
  std::string mode;      // "model" or "forced a=0.7"
  float temperature = 0;
  int n = 0;
  std::string drafter, policy;
  double wall_s = 0, ms_per_token_per_seq = 0, tokens_per_s = 0, acceptance = 0, forwards_per_token = 0;
  double speedup = 1.0;
};

Row measure(Backend& backend, const Model& model, const std::shared_ptr<const Model>& draft_model, const std::vector<int>& prompt,
            const std::string& drafter_kind, const std::string& policy_spec, const DecodeOptions& options, int repeats) {
  Row row;
  row.n = options.n_seqs;
  row.drafter = drafter_kind;
  row.policy = drafter_kind == "none" ? "-" : policy_spec;
  // Every run decodes the same tokens (fixed seeds), so runs differ only in time: the row
  // takes the median run, which a noisy shared machine disturbs least.
  std::vector<double> walls;
  long tokens = 0, accepted = 0, proposed = 0, forwards = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    const int cache_tokens = decode_cache_tokens(static_cast<int>(prompt.size()), model.config.context_length, options);
    auto cache = backend.create_cache(model, cache_tokens);
    auto drafter = create_drafter(drafter_kind, backend, model, draft_model, options.sampling, options.n_seqs, cache_tokens);
    auto policy = create_draft_policy(policy_spec, options.n_seqs);
    const DecodeResult r = decode(backend, model, *cache, *drafter, *policy, prompt, options);
    walls.push_back(r.stats.wall_seconds);
    forwards += r.stats.target_forwards;
    for (const auto& s : r.seqs) {
      tokens += static_cast<long>(s.tokens.size());
      accepted += s.accepted;
      proposed += s.proposed;
    }
  }
  std::sort(walls.begin(), walls.end());
  const double median_wall = walls[walls.size() / 2];
  const double tokens_per_run = static_cast<double>(tokens) / repeats;
  row.wall_s = median_wall;
  row.tokens_per_s = tokens_per_run / median_wall;
  row.ms_per_token_per_seq = 1000.0 * median_wall * options.n_seqs / tokens_per_run;
  row.acceptance = proposed > 0 ? static_cast<double>(accepted) / static_cast<double>(proposed) : 0.0;
  row.forwards_per_token = static_cast<double>(forwards) * options.n_seqs / static_cast<double>(tokens);
  return row;
}

void run(const BenchArgs& a) {
  if (a.model_path.empty() == a.random_shape.empty()) throw CommandFailed("give either -m MODEL or --random SHAPE", 2);
  LoadOptions load;
  load.tokenizer_path = a.tokenizer_path;
  std::shared_ptr<const Model> model;
  if (!a.random_shape.empty()) {
    const auto type = tensor_type_from_name(a.type);
    if (!type) throw CommandFailed("unknown weight type '" + a.type + "'", 2);
    model = make_random_model(random_model_config(a.random_shape), *type, 1, a.threads);
  } else {
    model = load_model(a.model_path, load);
  }
  std::shared_ptr<const Model> draft_model;
  if (!a.draft_model_path.empty()) draft_model = load_model(a.draft_model_path, load);
  std::vector<int> prompt;
  if (model->tokenizer) {
    prompt = model->tokenizer->encode(a.prompt, true);
  } else {
    // a model without a vocabulary (random weights): a fixed, repetitive token prompt
    for (int i = 0; i < 48; ++i) prompt.push_back(1 + (i * 7) % 97 % std::max(1, model->config.vocab_size - 1));
  }
  std::string note;
  const auto backend = a.device == "cuda" ? create_backend(DeviceChoice::Cuda, &note)
                                          : (a.device == "auto" ? create_backend(DeviceChoice::Auto, &note) : create_cpu_backend(a.threads));
  if (note.empty()) note = backend->name();

  std::vector<Row> rows;
  // random weights make the models' own acceptance meaningless: only forced modes then
  std::vector<std::string> modes;
  std::vector<double> forced;
  if (a.random_shape.empty() || a.alphas.empty()) {
    modes.push_back("model");
    forced.push_back(-1.0);
  }
  for (const double alpha : a.alphas) {
    std::ostringstream s;
    s << "forced a=" << alpha;
    modes.push_back(s.str());
    forced.push_back(alpha);
  }
  for (size_t m = 0; m < modes.size(); ++m) {
    for (const float t : a.temperatures) {
      for (const int n : a.batch_sizes) {
        DecodeOptions o;
        o.n_seqs = n;
        o.max_new_tokens = a.max_tokens;
        o.sampling.temperature = t;
        o.sampling.seed = 1;
        o.eos = -1;
        o.forced_acceptance = forced[m];
        Row base = measure(*backend, *model, draft_model, prompt, "none", "fixed:1", o, a.repeats);
        base.mode = modes[m];
        base.temperature = t;
        rows.push_back(base);
        for (const auto& d : a.drafters) {
          for (const auto& p : a.policies) {
            Row r = measure(*backend, *model, draft_model, prompt, d, p, o, a.repeats);
            r.mode = modes[m];
            r.temperature = t;
            r.speedup = base.ms_per_token_per_seq / r.ms_per_token_per_seq;
            rows.push_back(r);
            std::fprintf(stderr, ".");
          }
        }
      }
    }
  }
  std::fprintf(stderr, "\n");

  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows) {
      out.push_back({{"mode", r.mode}, {"temperature", r.temperature}, {"n", r.n}, {"drafter", r.drafter},
                     {"policy", r.policy}, {"wall_s", r.wall_s}, {"ms_per_token_per_seq", r.ms_per_token_per_seq},
                     {"tokens_per_s", r.tokens_per_s}, {"acceptance", r.acceptance},
                     {"target_forwards_per_token", r.forwards_per_token}, {"speedup_over_none", r.speedup}});
    }
    std::puts(out.dump(2).c_str());
    return;
  }
  const std::string what = a.random_shape.empty() ? model->path : "random " + a.random_shape + " " + a.type;
  std::printf("model %s (%d layers, dim %d), %s, prompt %zu tokens, %d new tokens per sequence\n\n", what.c_str(),
              model->config.n_layers, model->config.dim, note.c_str(), prompt.size(), a.max_tokens);
  std::printf("| mode | T | N | drafter | policy | ms/token/seq | tokens/s | acceptance | target fwd/token | speed-up |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %.1f | %d | %s | %s | %.3f | %.1f | %.2f | %.3f | %.2fx |\n", r.mode.c_str(), r.temperature, r.n,
                r.drafter.c_str(), r.policy.c_str(), r.ms_per_token_per_seq, r.tokens_per_s, r.acceptance,
                r.forwards_per_token, r.speedup);
  }
}

}  // namespace

void add_bench_spec_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench-spec", "Benchmark batched speculative decoding against plain batched decoding");
  cmd->add_option("-m,--model", args->model_path, "Model file");
  cmd->add_option("--random", args->random_shape, "Random weights of a named shape instead of a file: tiny, 110m, 1.1b, 7b");
  cmd->add_option("--type", args->type, "Weight type of a random model (default q4_0)");
  cmd->add_option("--threads", args->threads, "CPU threads (0: one per core)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--tokenizer", args->tokenizer_path, "Tokenizer for model files without one");
  cmd->add_option("-d,--draft-model", args->draft_model_path, "Draft model file, for the drafter 'model'");
  cmd->add_option("-p,--prompt", args->prompt, "Prompt text");
  cmd->add_option("--n", args->batch_sizes, "Batch sizes (default 1 2 4 8 16)")->delimiter(',');
  cmd->add_option("--drafters", args->drafters, "Drafters besides none (default ngram,layers:2)")->delimiter(',');
  cmd->add_option("--policies", args->policies, "Draft policies (default fixed:4,bass,adaptive)")->delimiter(',');
  cmd->add_option("--temps", args->temperatures, "Temperatures (default 0,0.8)")->delimiter(',');
  cmd->add_option("--alpha", args->alphas, "Also run in forced-acceptance mode at these rates (benchmark only)")->delimiter(',');
  cmd->add_option("--max-tokens", args->max_tokens, "New tokens per sequence (default 64)")->check(CLI::PositiveNumber);
  cmd->add_option("--repeats", args->repeats, "Runs per configuration; a row shows the median run (default 1)")->check(CLI::PositiveNumber);
  cmd->add_option("--device", args->device, "cpu, cuda or auto (default cpu)")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->add_flag("--json", args->json, "Print the rows as JSON");
  cmd->callback([args] { run(*args); });
}

}  // namespace specula::cli
