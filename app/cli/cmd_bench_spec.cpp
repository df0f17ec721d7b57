// specula-cli bench-spec: batched speculative decoding measured side by side.
//
// For every batch size N, drafter, draft policy and temperature it decodes the same prompt
// with the same settings and reports ms/token/sequence, total tokens/s, draft tokens
// proposed per generated token, acceptance rate, verification steps per generated token and the speed-up over `--draft none` at the same
// N. The configurations of one (mode, T, N) group run interleaved, repeat by repeat (each
// repeat in another order), so that a shared machine's changing load falls on all of them
// alike, and a speed-up is the median over repeats of the ratio between runs of the same
// repeat, printed with the lowest and highest such ratio; every timed run follows
// a short warm-up run of the same configuration; decoding is timed apart from the prompt's
// prefill, by the wall clock and by process CPU time (which other programs' turns on a
// shared machine do not inflate). Runs ignore EOS so that every sequence generates exactly --max-tokens tokens.
// With --control the baseline runs twice in every repeat: the second run's row, policy
// "control", is the baseline against itself, so its speed-up and range are what the machine's
// noise alone gives in that group, the band a configuration must leave to be faster or
// slower beyond noise.
// With --alpha, the same configurations also run in FORCED-ACCEPTANCE mode (benchmark only:
// each draft token is kept with probability alpha whatever the models say) to measure the
// system at known acceptance rates on models whose own acceptance means nothing (random
// weights). With --simulate it runs no forward: the forced-acceptance grid is priced by the
// measured cost model alone (decode/policy_simulation.h), greedy, what each policy's
// choices are predicted to gain, free of the machine's noise.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "compute/simd_level.h"
#include "decode/decoder.h"
#include "decode/drafter.h"
#include "decode/policy_simulation.h"
#include "model/model.h"
#include "model/random_model.h"
#include "model_options.h"
#include "common/statistics.h"

namespace specula::cli {

namespace {

struct BenchArgs {
  std::string model_path;
  std::string tokenizer_path;
  std::string draft_model_path;
  std::string random_shape;
  std::string type = "q4_0";
  int threads = 0;
  std::string simd = "best";
  std::string prompt = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n";
  std::vector<int> batch_sizes{1, 2, 4, 8, 16};
  std::vector<std::string> drafters{"ngram", "layers:2"};
  std::vector<std::string> policies{"goodput", "fixed:4", "bass", "adaptive"};
  std::vector<float> temperatures{0.0f, 0.8f};
  std::vector<double> alphas;
  int max_tokens = 64;
  int warmup_tokens = 8;
  int repeats = 1;
  std::string device = "cpu";
  bool json = false;
  bool simulate = false;
  bool control = false;
};

struct Config {
  std::string drafter;  // "none" for the baseline and the control
  std::string policy;   // "-" for the baseline, "control" for its second run
};

// One decode: its decoding time apart from the prefill, and its counts.
struct RunTimes {
  double decode_s = 0, prefill_s = 0;
  double decode_cpu_s = 0;  // CPU time of the decoding (the backend's threads)
  long tokens = 0, accepted = 0, proposed = 0, steps = 0;
};

struct Row {
  std::string mode;  // "model" or "forced a=0.7"
  float temperature = 0;
  int n = 0;
  Config config;
  double decode_s = 0, prefill_s = 0, decode_cpu_s = 0;  // medians over the repeats
  std::vector<double> decode_s_runs;                      // (repeats) each repeat's decoding time
  std::vector<long> steps_runs;                           // (repeats) each repeat's verification steps
  double ms_per_token_per_seq = 0, tokens_per_s = 0, acceptance = 0, steps_per_token = 0;
  double drafted_per_token = 0;  // draft tokens proposed per generated token, mean over the repeats
  double cpu_ms_per_token_per_seq = 0;
  double speedup = 1.0, cpu_speedup = 1.0;  // medians of the repeats' ratios to the baseline
  double speedup_low = 1.0, speedup_high = 1.0;  // the lowest and highest of those ratios (wall clock)
};

struct Bench {
  Backend& backend;
  const Model& model;
  std::shared_ptr<const Model> draft_model;
  std::vector<int> prompt;
};

RunTimes run_once(const Bench& b, const Config& c, const DecodeOptions& options) {
  const int cache_tokens = decode_cache_tokens(static_cast<int>(b.prompt.size()), b.model.config.context_length, options);
  auto cache = b.backend.create_cache(b.model, cache_tokens);
  auto drafter = create_drafter(c.drafter, b.backend, b.model, b.draft_model, options.sampling, options.n_seqs, cache_tokens);
  const std::string policy_spec = c.drafter == "none" ? "fixed:1" : c.policy;  // none drafts nothing
  auto policy = create_draft_policy(policy_spec, options.n_seqs, b.backend, b.model, *drafter, options.sampling);
  // the prefill ends when the last sequence has its first token
  double prefill_end_cpu = 0;
  DecodeCallbacks marks;
  marks.on_tokens = [&](int seq, const SequenceOutput& out, std::span<const int>) {
    if (seq == options.n_seqs - 1 && out.tokens.size() == 1) prefill_end_cpu = b.backend.cpu_seconds();
    return false;
  };
  const DecodeResult r = decode(b.backend, b.model, *cache, *drafter, *policy, b.prompt, options, marks);
  RunTimes t;
  t.decode_cpu_s = b.backend.cpu_seconds() - prefill_end_cpu;
  t.prefill_s = r.stats.prefill_seconds;
  t.decode_s = r.stats.wall_seconds - r.stats.prefill_seconds;
  t.steps = r.stats.steps;
  for (const auto& s : r.seqs) {
    t.tokens += static_cast<long>(s.tokens.size());
    t.accepted += s.accepted;
    t.proposed += s.proposed;
  }
  return t;
}

// The row takes the median run, which a noisy shared machine disturbs least, and the
// counts over all runs. Each sequence's first token comes from the prefill; the decoding
// rate counts the others.
Row summarize(const std::vector<RunTimes>& runs, int n) {
  Row row;
  std::vector<double> decode, prefill, cpu;
  long accepted = 0, proposed = 0, steps = 0;
  for (const RunTimes& t : runs) {
    decode.push_back(t.decode_s);
    cpu.push_back(t.decode_cpu_s);
    prefill.push_back(t.prefill_s);
    accepted += t.accepted;
    proposed += t.proposed;
    steps += t.steps;
    row.steps_runs.push_back(t.steps);
  }
  row.n = n;
  row.decode_s_runs = decode;
  row.decode_s = median(decode);
  row.prefill_s = median(prefill);
  row.decode_cpu_s = median(cpu);
  const double decoded = static_cast<double>(runs.front().tokens - n);  // per run
  row.tokens_per_s = decoded / row.decode_s;
  row.ms_per_token_per_seq = 1000.0 * row.decode_s * n / decoded;
  row.cpu_ms_per_token_per_seq = 1000.0 * row.decode_cpu_s * n / decoded;
  row.acceptance = proposed > 0 ? static_cast<double>(accepted) / static_cast<double>(proposed) : 0.0;
  row.steps_per_token = static_cast<double>(steps) / static_cast<double>(runs.size()) * n / decoded;
  row.drafted_per_token = static_cast<double>(proposed) / static_cast<double>(runs.size()) / decoded;
  return row;
}

// A speed-up over the baseline, repeat by repeat: runs of one repeat ran minutes apart at
// most, where the medians of whole rows may come from different phases of a shared
// machine's load (on some machines a forward's time moves by half between phases lasting
// seconds to minutes), so the ratio of medians mixes phases that the ratios of pairs do not.
struct Ratios {
  double median = 1.0, low = 1.0, high = 1.0;
};
Ratios paired_ratios(const std::vector<RunTimes>& baseline, const std::vector<RunTimes>& runs, double RunTimes::*time) {
  std::vector<double> ratios;
  for (size_t rep = 0; rep < runs.size(); ++rep) ratios.push_back(baseline[rep].*time / (runs[rep].*time));
  const auto [low, high] = std::minmax_element(ratios.begin(), ratios.end());
  return {median(ratios), *low, *high};
}

// The configurations of one group, interleaved: repeat by repeat, each one's warm-up and
// timed run, each repeat starting one configuration later than the one before (so that no
// configuration always runs right after the same other one). Every configuration decodes
// the same number of tokens, so ratios of decoding times are ratios of ms per token.
// Returns one row per configuration, the baseline first.
std::vector<Row> measure_group(const Bench& b, const std::vector<Config>& configs, DecodeOptions options,
                               const BenchArgs& a) {
  std::vector<std::vector<RunTimes>> runs(configs.size(), std::vector<RunTimes>(static_cast<size_t>(a.repeats)));
  DecodeOptions warmup = options;
  warmup.max_new_tokens = std::min(a.warmup_tokens, options.max_new_tokens);
  for (int rep = 0; rep < a.repeats; ++rep) {
    // Forced acceptance draws which draft tokens are kept from the sequences' seeds: one
    // seed for every repeat would measure one draw of that luck, which two policies meet
    // differently, however many repeats. Each repeat draws anew (all configurations of a
    // repeat alike, so that its ratios still pair the same draw).
    DecodeOptions repeat = options;
    if (options.forced_acceptance >= 0) repeat.sampling.seed = options.sampling.seed + static_cast<uint64_t>(rep);
    for (size_t i = 0; i < configs.size(); ++i) {
      const size_t c = (i + static_cast<size_t>(rep)) % configs.size();
      if (a.warmup_tokens > 0) run_once(b, configs[c], warmup);
      runs[c][static_cast<size_t>(rep)] = run_once(b, configs[c], repeat);
      std::fprintf(stderr, ".");
    }
  }
  std::vector<Row> rows;
  for (size_t c = 0; c < configs.size(); ++c) {
    Row r = summarize(runs[c], options.n_seqs);
    r.config = configs[c];
    r.temperature = options.sampling.temperature;
    const Ratios wall = paired_ratios(runs.front(), runs[c], &RunTimes::decode_s);
    r.speedup = wall.median;
    r.speedup_low = wall.low;
    r.speedup_high = wall.high;
    r.cpu_speedup = paired_ratios(runs.front(), runs[c], &RunTimes::decode_cpu_s).median;
    rows.push_back(r);
  }
  return rows;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return in ? one + " " + five + " " + fifteen : "unknown";
}

// The SIMD level the rows ran with, as --simd names it.
std::string simd_label(const BenchArgs& a) {
  if (a.device != "cpu") return "-";
  if (a.simd != "best") return a.simd;
  return std::string(simd_name(best_simd_level()));
}

void print_rows(const std::vector<Row>& rows, const BenchArgs& a, const std::string& backend) {
  const std::string simd = simd_label(a);
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows) {
      out.push_back({{"mode", r.mode}, {"temperature", r.temperature}, {"n", r.n}, {"drafter", r.config.drafter},
                     {"policy", r.config.policy}, {"backend", backend}, {"simd", simd}, {"decode_s", r.decode_s},
                     {"prefill_s", r.prefill_s}, {"ms_per_token_per_seq", r.ms_per_token_per_seq},
                     {"tokens_per_s", r.tokens_per_s}, {"acceptance", r.acceptance},
                     {"drafted_per_token", r.drafted_per_token},
                     {"steps_per_token", r.steps_per_token}, {"speedup_over_none", r.speedup},
                     {"speedup_over_none_low", r.speedup_low}, {"speedup_over_none_high", r.speedup_high},
                     {"decode_s_runs", r.decode_s_runs}, {"steps_runs", r.steps_runs},
                     {"decode_cpu_s", r.decode_cpu_s}, {"cpu_ms_per_token_per_seq", r.cpu_ms_per_token_per_seq},
                     {"cpu_speedup_over_none", r.cpu_speedup}});
    }
    std::puts(out.dump(2).c_str());
    return;
  }
  std::printf("SIMD %s; decoding timed apart from the prefill; median of %d interleaved runs, each after a warm-up;\n"
              "speed-ups: median over the runs of the ratio to the baseline's run of the same repeat (lowest-highest)\n\n",
              simd.c_str(), a.repeats);
  if (a.control) {
    std::printf("control: the baseline run again in every repeat; its speed-up and range are the machine's noise in that group\n\n");
  }
  std::printf("| mode | T | N | drafter | policy | prefill ms | ms/token/seq | tokens/s | drafted/token | acceptance | steps/token "
              "| speed-up | range | cpu ms/token/seq | speed-up by cpu |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %.1f | %d | %s | %s | %.1f | %.3f | %.1f | %.3f | %.2f | %.3f | %.2fx | %.2f-%.2f | %.3f | %.2fx |\n",
                r.mode.c_str(), r.temperature, r.n, r.config.drafter.c_str(), r.config.policy.c_str(),
                r.prefill_s * 1e3, r.ms_per_token_per_seq, r.tokens_per_s, r.drafted_per_token, r.acceptance, r.steps_per_token, r.speedup,
                r.speedup_low, r.speedup_high, r.cpu_ms_per_token_per_seq, r.cpu_speedup);
  }
}

// One cell of --simulate: a policy's predicted speed-up over plain decoding, by the cost
// model alone, at a forced acceptance rate.
struct SimulatedRow {
  double alpha = 0;
  int n = 0;
  Config config;
  double speedup = 1, speedup_low = 1, speedup_high = 1;  // median, lowest and highest over the seeds
  double drafted_per_token = 0, acceptance = 0, steps_per_token = 0;  // over all seeds
};

// Every (alpha, N, drafter, policy) of the arguments, each over --repeats seeds: the
// drafter's forwards priced as the decoder's would be (ngram: none), proposing whatever
// the policy asks (the n-gram drafter, in a real run, only what follows a match). A model
// drafter's prefill and backlogs are not simulated: it is refused.
std::vector<SimulatedRow> simulate_grid(const Bench& b, const BenchArgs& a) {
  const SamplingParams greedy;
  std::vector<SimulatedRow> rows;
  for (const std::string& kind : a.drafters) {
    if (kind == "model") throw CommandFailed("--simulate prices ngram and layers:K; the drafter 'model' has a prefill it does not simulate", 2);
    const auto drafter = create_drafter(kind, b.backend, b.model, b.draft_model, greedy, 1, b.model.config.context_length);
    const StepCosts costs = step_costs(b.backend, b.model, *drafter, greedy);
    for (const double alpha : a.alphas) {
      for (const int n : a.batch_sizes) {
        SimulatedDecode d;
        d.n_seqs = n;
        d.prompt_tokens = static_cast<int>(b.prompt.size());
        d.max_new_tokens = a.max_tokens;
        d.alpha = alpha;
        const double plain = simulate_decode(nullptr, costs, d).seconds;
        for (const std::string& spec : a.policies) {
          SimulatedRow row{alpha, n, {kind, spec}};
          std::vector<double> ratios;
          long proposed = 0, accepted = 0, steps = 0;
          for (int seed = 1; seed <= a.repeats; ++seed) {
            d.seed = static_cast<uint64_t>(seed);
            const auto policy = create_draft_policy(spec, n, costs);
            const SimulatedRun r = simulate_decode(policy.get(), costs, d);
            ratios.push_back(plain / r.seconds);
            proposed += r.proposed;
            accepted += r.accepted;
            steps += r.steps;
          }
          const double decoded = static_cast<double>(a.repeats) * n * (a.max_tokens - 1);
          const auto [low, high] = std::minmax_element(ratios.begin(), ratios.end());
          row.speedup = median(ratios);
          row.speedup_low = *low;
          row.speedup_high = *high;
          row.drafted_per_token = static_cast<double>(proposed) / decoded;
          row.acceptance = proposed > 0 ? static_cast<double>(accepted) / static_cast<double>(proposed) : 0.0;
          row.steps_per_token = static_cast<double>(steps) * n / decoded;
          rows.push_back(row);
        }
      }
    }
  }
  return rows;
}

void print_simulated_rows(const std::vector<SimulatedRow>& rows, const BenchArgs& a) {
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const SimulatedRow& r : rows) {
      out.push_back({{"mode", "simulated"}, {"alpha", r.alpha}, {"n", r.n}, {"drafter", r.config.drafter},
                     {"policy", r.config.policy}, {"simd", simd_label(a)}, {"predicted_speedup_over_none", r.speedup},
                     {"predicted_speedup_over_none_low", r.speedup_low},
                     {"predicted_speedup_over_none_high", r.speedup_high}, {"drafted_per_token", r.drafted_per_token},
                     {"acceptance", r.acceptance}, {"steps_per_token", r.steps_per_token}});
    }
    std::puts(out.dump(2).c_str());
    return;
  }
  std::printf("SIMD %s; greedy, forced acceptance, priced by the cost model alone (no forward run); a drafter that\n"
              "always proposes what it is asked; median of %d seeds (lowest-highest)\n\n",
              simd_label(a).c_str(), a.repeats);
  std::printf("| α | N | drafter | policy | predicted speed-up | range | drafted/token | acceptance | steps/token |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const SimulatedRow& r : rows) {
    std::printf("| %.2g | %d | %s | %s | %.2fx | %.2f-%.2f | %.3f | %.2f | %.3f |\n", r.alpha, r.n,
                r.config.drafter.c_str(), r.config.policy.c_str(), r.speedup, r.speedup_low, r.speedup_high,
                r.drafted_per_token, r.acceptance, r.steps_per_token);
  }
}

void run(const BenchArgs& a) {
  if (a.model_path.empty() == a.random_shape.empty()) throw CommandFailed("give either -m MODEL or --random SHAPE", 2);
  require_cpu_for_simd(a.simd, a.device);
  if (a.simulate && a.alphas.empty()) throw CommandFailed("--simulate prices forced acceptance: give the rates with --alpha", 2);
  if (a.simulate && a.control) throw CommandFailed("--control measures the machine's noise; --simulate runs no forward", 2);
  LoadOptions load;
  load.tokenizer_path = a.tokenizer_path;
  std::shared_ptr<const Model> model;
  if (!a.random_shape.empty()) {
    const auto type = tensor_type_from_name(a.type);
    if (!type || !random_model_type(*type)) {
      throw CommandFailed("random models are made of " + random_model_type_names() + ", not '" + a.type + "'", 2);
    }
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
                                          : (a.device == "auto" ? create_backend(DeviceChoice::Auto, &note) : cpu_backend(a.simd, a.threads));
  backend->prepare(*model);  // uploads or repacks the weights, or says they do not fit
  if (draft_model) backend->prepare(*draft_model);
  const std::string load_at_start = load_average();
  const std::shared_ptr<const ForwardCost> cost = backend->forward_cost(*model);
  // each layers:K draft's own weights where the target's are narrowed for it: repacked and
  // measured now, before anything is timed
  std::vector<std::pair<std::string, std::shared_ptr<const ForwardCost>>> draft_costs;
  for (const std::string& kind : a.drafters) {
    if (const Model* narrowed = self_draft_weights(*backend, *model, kind)) {
      backend->prepare(*narrowed);
      draft_costs.emplace_back(kind, backend->forward_cost(*narrowed));
    }
  }
  const auto print_costs = [&] {
    std::printf("target forward cost, %s\n", format_forward_cost(*cost).c_str());
    for (const auto& [kind, draft_cost] : draft_costs) {
      std::printf("%s draft forward cost (its matrices narrowed to q4_0), %s\n", kind.c_str(),
                  format_forward_cost(*draft_cost).c_str());
    }
  };

  const Bench bench{*backend, *model, draft_model, prompt};
  if (a.simulate) {
    const std::vector<SimulatedRow> simulated = simulate_grid(bench, a);
    if (!a.json) print_costs();
    print_simulated_rows(simulated, a);
    return;
  }

  std::vector<Config> configs{{"none", "-"}};
  if (a.control) configs.push_back({"none", "control"});
  for (const auto& d : a.drafters) {
    for (const auto& p : a.policies) configs.push_back({d, p});
  }
  // random weights make the models' own acceptance meaningless: only forced modes then
  std::vector<std::pair<std::string, double>> modes;
  if (a.random_shape.empty() || a.alphas.empty()) modes.emplace_back("model", -1.0);
  for (const double alpha : a.alphas) {
    std::ostringstream s;
    s << "forced a=" << alpha;
    modes.emplace_back(s.str(), alpha);
  }
  std::vector<Row> rows;
  for (const auto& [mode, alpha] : modes) {
    for (const float t : a.temperatures) {
      for (const int n : a.batch_sizes) {
        DecodeOptions o;
        o.n_seqs = n;
        o.max_new_tokens = a.max_tokens;
        o.sampling.temperature = t;
        o.sampling.seed = 1;
        o.eos.clear();
        o.forced_acceptance = alpha;
        for (Row& r : measure_group(bench, configs, o, a)) {
          r.mode = mode;
          rows.push_back(r);
        }
      }
    }
  }
  std::fprintf(stderr, "\n");

  if (!a.json) {
    const std::string what = a.random_shape.empty() ? model->path : "random " + a.random_shape + " " + a.type;
    std::printf("model %s (%d layers, dim %d), %s, prompt %zu tokens, %d new tokens per sequence\n", what.c_str(),
                model->config.n_layers, model->config.dim, backend->name().c_str(), prompt.size(), a.max_tokens);
    std::printf("load average %s at the start, %s at the end\n", load_at_start.c_str(), load_average().c_str());
    print_costs();
  }
  print_rows(rows, a, backend->name());
}

}  // namespace

void add_bench_spec_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench-spec", "Benchmark batched speculative decoding against plain batched decoding");
  cmd->add_option("-m,--model", args->model_path, "Model file");
  cmd->add_option("--random", args->random_shape, "Random weights of a named shape instead of a file: tiny, tiny-qwen3moe, qwen3moe-1.3b, 110m, 1.1b, 7b");
  cmd->add_option("--type", args->type, "Weight type of a random model (default q4_0)");
  cmd->add_option("--threads", args->threads, "CPU threads (0: one per core)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--simd", args->simd, "CPU kernels: best, portable, avx2 or avx512 (default best)")
      ->check(CLI::IsMember({"best", "portable", "avx2", "avx512"}));
  cmd->add_option("--tokenizer", args->tokenizer_path, "Tokenizer for model files without one");
  cmd->add_option("-d,--draft-model", args->draft_model_path, "Draft model file, for the drafter 'model'");
  cmd->add_option("-p,--prompt", args->prompt, "Prompt text");
  cmd->add_option("--n", args->batch_sizes, "Batch sizes (default 1 2 4 8 16)")->delimiter(',');
  cmd->add_option("--drafters", args->drafters, "Drafters besides none (default ngram,layers:2)")->delimiter(',');
  cmd->add_option("--policies", args->policies, "Draft policies (default goodput,fixed:4,bass,adaptive)")->delimiter(',');
  cmd->add_option("--temps", args->temperatures, "Temperatures (default 0,0.8)")->delimiter(',');
  cmd->add_option("--alpha", args->alphas,
                  "Also run in forced-acceptance mode at these rates (benchmark only). Each sequence draws its own "
                  "verdicts: at T = 0 and N > 1 that puts copies of one greedy text out of step, as real decoding "
                  "never does, and a mixture of experts then reads experts the copies shared; compare a mixture at a "
                  "temperature")
      ->delimiter(',');
  cmd->add_option("--max-tokens", args->max_tokens, "New tokens per sequence, at least 2 (default 64)")
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--warmup-tokens", args->warmup_tokens,
                  "New tokens per sequence of the warm-up run before every timed run (default 8; 0: none)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--repeats", args->repeats, "Runs per configuration; a row shows the median run and the median paired speed-up (default 1)")->check(CLI::PositiveNumber);
  cmd->add_option("--device", args->device, "cpu, cuda or auto (default cpu)")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->add_flag("--json", args->json, "Print the rows as JSON");
  cmd->add_flag("--control", args->control,
                "Also run the baseline a second time in every repeat: its row (policy control) is the machine's noise");
  cmd->add_flag("--simulate", args->simulate,
                "Run no forward: price the --alpha grid by the measured cost model alone (greedy, --repeats seeds)");
  cmd->callback([args] { run(*args); });
}

}  // namespace specula::cli
