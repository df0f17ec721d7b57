// specula-cli bench-forward: speed of the forward pass against the machine's memory
// bandwidth. One-token decoding is bound by reading every weight once, so its weight
// GB/s over the read bandwidth (measured by a pass just before each timed decode, so that
// both meet the same phase of a shared machine's memory) says how close the kernels come
// to the limit;
// forwards of k tokens (one sequence of k, or k sequences of 1) show what batching and
// speculation buy, and their multiply-add rate against the core's peak for the kernels'
// instruction mix (a register-only loop) says how close many-token forwards come to the
// compute limit. The same kernels on one core with their weights in its cache (a slice of
// each matrix type, read over and over) tell the tiles' arithmetic apart from the memory:
// a tile near its peak there but not in a whole forward is waiting for weights, not
// computing slowly. Every figure names the SIMD level it ran at (--simd).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <nlohmann/json.hpp>
#include <map>
#include <numeric>
#include <thread>

#include "compute/backend.h"
#include "compute/cpu_kernels.h"
#include "commands.h"
#include "model/model_export.h"
#include "model/random_model.h"
#include "common/thread_pool.h"
#include "common/statistics.h"

namespace specula::cli {

namespace {

struct BenchOptions {
  std::string model_path;
  std::string random_shape;
  std::string type = "f32";
  std::string write_gguf;  // where to save the random model, if anywhere
  std::vector<int> tokens{1, 2, 4, 8, 16, 32, 64};
  int repeats = 5;
  int threads = 0;
  int prefix = 8;  // cached positions of every sequence before the timed forwards
  std::string simd;  // kernel level; empty: the best this processor has
  bool json = false;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Every value of `values` times `factor` (a change of units).
std::vector<double> scaled(std::vector<double> values, double factor) {
  for (double& v : values) v *= factor;
  return values;
}

struct Bandwidth {
  double wall;  // bytes per second of wall time
  double cpu;   // bytes per second of CPU time per thread: the rate while running
};

// Read bandwidth: a streaming sum over 1 GiB (far beyond any cache) on every thread of a
// pool of its own, one pass at a time.
class BandwidthProbe {
 public:
  explicit BandwidthProbe(int threads) : pool_(threads), buffer_(kWords, 1) {}  // pages mapped now

  Bandwidth pass() {
    std::vector<uint64_t> sums(static_cast<size_t>(pool_.size()), 0);
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = pool_.cpu_seconds();
    pool_.parallel_for(
        static_cast<int64_t>(kWords),
        [&](int64_t begin, int64_t end, int thread) {
          uint64_t sum = 0;
          for (int64_t i = begin; i < end; ++i) sum += buffer_[static_cast<size_t>(i)];
          sums[static_cast<size_t>(thread)] += sum;
        },
        4096);
    const double seconds = seconds_since(start);
    const double cpu = (pool_.cpu_seconds() - cpu_start) / pool_.size();
    if (std::accumulate(sums.begin(), sums.end(), uint64_t{0}) != kWords) {
      throw CommandFailed("bandwidth check summed the wrong value", 1);
    }
    const double bytes = static_cast<double>(kWords * sizeof(uint64_t));
    return {bytes / seconds, bytes / cpu};
  }

 private:
  static constexpr size_t kWords = (size_t{1} << 30) / sizeof(uint64_t);
  ThreadPool pool_;
  std::vector<uint64_t> buffer_;
};

// Bytes a forward pass streams: every layer matrix and the output matrix (the embedding
// table is only indexed).
double streamed_weight_bytes(const Model& model) {
  double bytes = static_cast<double>(model.weights.output.bytes());
  for (const LayerWeights& l : model.weights.layers) {
    for (const TensorView* v : l.tensors()) bytes += static_cast<double>(v->bytes());
  }
  return bytes;
}

// The weight matrices a forward multiplies (every layer matrix and the output matrix).
std::vector<const TensorView*> streamed_matrices(const Model& model) {
  std::vector<const TensorView*> matrices{&model.weights.output};
  for (const LayerWeights& l : model.weights.layers) {
    const auto layer = l.matrices();
    matrices.insert(matrices.end(), layer.begin(), layer.end());
  }
  return matrices;
}

// The model's multiply-adds over the time they take when every matrix runs at its type's
// rate, `rate_of(type)` (called once per type): one rate for the model's mix of kernels.
template <class RateOf>
double blended_rate(const Model& model, RateOf&& rate_of) {
  std::map<TensorType, double> rate;
  double macs = 0.0, seconds = 0.0;
  for (const TensorView* v : streamed_matrices(model)) {
    if (!rate.count(v->type)) rate[v->type] = rate_of(*v);
    const double m = static_cast<double>(v->rows) * static_cast<double>(v->cols);
    macs += m;
    seconds += m / rate[v->type];
  }
  return macs / seconds;
}

// The peak multiply-add rate of one core for each weight type of the model, and for the
// model's mix: its multiply-adds over the time they take when every matrix runs at its
// type's peak.
struct Peak {
  std::map<std::string, double> per_type;  // type name → multiply-adds per second
  double mix = 0.0;                        // the model's blend, multiply-adds per second
};
Peak measure_peak(const Model& model, SimdLevel level) {
  Peak peak;
  peak.mix = blended_rate(model, [&](const TensorView& w) {
    const double rate = peak_multiply_adds_per_second(w.type, level);
    peak.per_type[std::string(type_traits(w.type).name)] = rate;
    return rate;
  });
  return peak;
}

// The multiply-add rate of one core for the model's mix of kernels at `tokens` tokens with
// each type's weights in its cache (a slice of the type's first matrix: cpu_kernels.h's
// in_cache_multiply_adds_per_second), blended as measure_peak blends.
double in_cache_rate(const Model& model, SimdLevel level, int tokens) {
  return blended_rate(model, [&](const TensorView& w) { return in_cache_multiply_adds_per_second(w, level, tokens); });
}

struct Timing {
  double seconds;  // median time of one forward
  double best;     // fastest run: on a shared machine, the least disturbed one
  double cpu;      // median CPU time of one forward (the backend's threads, spinning included;
                   // the cost of the work itself even when other programs take turns on the cores)
  std::vector<double> runs, cpu_runs;  // (repeats) each timed run's wall and CPU seconds
};

// Median time of forwards that add `per_seq` tokens to each of `n_seqs` forks of a
// prefilled sequence (logits for all tokens); the forks are cut back after each run so
// every repeat sees the same context. `before_each` (if any) runs before every run, the
// untimed warm-up included.
Timing time_forward(Backend& backend, const Model& model, KvCache& cache, int prefilled, int n_seqs,
                    int per_seq, int repeats, const std::function<void()>& before_each = {}) {
  std::vector<int> forks;
  for (int i = 0; i < n_seqs; ++i) forks.push_back(cache.fork(prefilled));
  RaggedBatch batch;
  for (int i = 0; i < n_seqs; ++i) {
    std::vector<int32_t> tokens(static_cast<size_t>(per_seq));
    for (int j = 0; j < per_seq; ++j) tokens[j] = (17 * i + 31 * j + 5) % model.config.vocab_size;
    batch.add(forks[i], tokens, true);
  }
  const int prefix = cache.length(prefilled);
  std::vector<float> logits;
  std::vector<double> times, cpu_times;
  for (int r = 0; r <= repeats; ++r) {  // the first run warms up and is not counted
    if (before_each) before_each();
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = backend.cpu_seconds();
    backend.forward(model, cache, batch, logits);
    if (r > 0) {
      times.push_back(seconds_since(start));
      cpu_times.push_back(backend.cpu_seconds() - cpu_start);
    }
    for (int f : forks) cache.truncate(f, prefix);
  }
  for (int f : forks) cache.release(f);
  return {.seconds = median(times),
          .best = *std::min_element(times.begin(), times.end()),
          .cpu = median(cpu_times),
          .runs = times,
          .cpu_runs = cpu_times};
}

void run_bench(const BenchOptions& o) {
  if (o.model_path.empty() == o.random_shape.empty()) {
    throw CommandFailed("give either -m MODEL or --random SHAPE", 2);
  }
  if (o.repeats < 1) throw CommandFailed("--repeats must be at least 1", 2);
  std::shared_ptr<const Model> model;
  std::string type_name = o.type;
  if (!o.model_path.empty()) {
    if (!o.write_gguf.empty()) throw CommandFailed("--write-gguf saves random models only", 2);
    model = load_model(o.model_path);
    type_name = std::string(type_traits(model->weights.layers.at(0).wq.type).name);
  } else {
    const std::optional<TensorType> type = tensor_type_from_name(o.type);
    if (!type || !random_model_type(*type)) {
      throw CommandFailed("random models are made of " + random_model_type_names() + ", not '" + o.type + "'", 2);
    }
    model = make_random_model(random_model_config(o.random_shape), *type, 1, o.threads);
    if (!o.write_gguf.empty()) write_gguf_model(*model, o.write_gguf, *type);
  }
  const ModelConfig& c = model->config;
  const int max_k = *std::max_element(o.tokens.begin(), o.tokens.end());
  if (max_k < 1) throw CommandFailed("--tokens must be positive", 2);

  SimdLevel level = best_simd_level();
  if (!o.simd.empty()) {
    const std::optional<SimdLevel> chosen = simd_level_from_name(o.simd);
    if (!chosen) throw CommandFailed("unknown SIMD level '" + o.simd + "' (portable, avx2, avx512)", 2);
    if (!simd_supported(*chosen)) {
      throw CommandFailed("this processor cannot run the " + o.simd + " kernels", 2);
    }
    level = *chosen;
  }
  std::unique_ptr<Backend> backend = create_cpu_backend(o.threads, level);
  backend->prepare(*model);  // repacks the weights, or says they do not fit in memory
  const double weight_bytes = streamed_weight_bytes(*model);

  std::unique_ptr<KvCache> cache =
      backend->create_cache(*model, (o.prefix + max_k) * (max_k + 2) + 64);
  const int prefilled = cache->create();
  {
    std::vector<int32_t> prompt(static_cast<size_t>(o.prefix));
    std::iota(prompt.begin(), prompt.end(), 1);
    RaggedBatch batch;
    batch.add(prefilled, prompt, false);
    std::vector<float> logits;
    backend->forward(*model, *cache, batch, logits);
  }

  const double backend_threads =
      o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  // The memory's rate moves with a shared machine's phases (by half, within minutes, on
  // the development machines): each timed decode is set against a bandwidth pass run just
  // before it, and the fraction of the bandwidth is the median of those pairs' ratios. The
  // medians of the passes and of the decodes alone, taken in different phases, gave 72 % to
  // 160 % for one build.
  std::vector<Bandwidth> passes;
  Timing one;
  {
    BandwidthProbe probe(o.threads);
    one = time_forward(*backend, *model, *cache, prefilled, 1, 1, o.repeats, [&] {
      passes.push_back(probe.pass());
      // the probe's workers spin a little before they sleep: not on the decode's cores
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
  }
  passes.erase(passes.begin());  // the pass before the warm-up run
  std::vector<double> wall_rates, cpu_rates, fractions, cpu_fractions;
  for (size_t r = 0; r < passes.size(); ++r) {
    wall_rates.push_back(passes[r].wall);
    cpu_rates.push_back(passes[r].cpu);
    fractions.push_back(weight_bytes / one.runs[r] / passes[r].wall);
    cpu_fractions.push_back(weight_bytes / (one.cpu_runs[r] / backend_threads) / passes[r].cpu);
  }
  const Bandwidth bandwidth{median(wall_rates), median(cpu_rates)};
  const Peak peak = measure_peak(*model, level);
  double macs_per_token = 0.0;
  for (const TensorView* v : streamed_matrices(*model)) {
    macs_per_token += static_cast<double>(v->rows) * static_cast<double>(v->cols);
  }
  // Multiply-adds per second of one thread against one core's peak: by wall time (each
  // thread's share of the forward) and by process CPU time (unaffected by other programs'
  // turns on the cores; spinning workers count, so it errs low).
  const auto fraction_of_peak = [&](double macs, const Timing& t) {
    return std::pair{macs / (t.seconds * backend_threads) / peak.mix, macs / t.cpu / peak.mix};
  };
  nlohmann::json report{
      {"model", model->config.name.empty() ? model->path : model->config.name},
      {"type", type_name},
      {"backend", backend->name()},
      {"simd", simd_name(level)},
      {"peak_multiply_adds_per_s", {{"per_type", peak.per_type}, {"mix", peak.mix}}},
      {"layers", c.n_layers},
      {"dim", c.dim},
      {"weight_bytes_per_forward", weight_bytes},
      {"read_bandwidth_gb_s", bandwidth.wall / 1e9},
      {"read_bandwidth_cpu_gb_s", bandwidth.cpu / 1e9},
      {"context", o.prefix},
      {"repeats", o.repeats},
      {"decode",
       {{"ms", one.seconds * 1e3},
        {"best_ms", one.best * 1e3},
        {"cpu_ms", one.cpu * 1e3},
        {"tokens_per_s", 1.0 / one.seconds},
        {"weight_gb_s", weight_bytes / one.seconds / 1e9},
        {"runs_ms", scaled(one.runs, 1e3)},
        {"bandwidth_runs_gb_s", scaled(wall_rates, 1e-9)},  // the pass before each run
        {"fraction_of_bandwidth", median(fractions)},
        {"cpu_weight_gb_s", weight_bytes / (one.cpu / backend_threads) / 1e9},
        {"cpu_fraction_of_bandwidth", median(cpu_fractions)}}},
  };
  // a mixture of experts: the cost model's price of each verification, and the experts it
  // expects against those the timed forwards read
  std::shared_ptr<const ForwardCost> cost;
  std::shared_ptr<const RoutingCounts> routing = backend->routing_counts(*model);
  if (c.has_experts()) cost = backend->forward_cost(*model);
  nlohmann::json rows = nlohmann::json::array();
  for (int k : o.tokens) {
    const Timing seq = time_forward(*backend, *model, *cache, prefilled, 1, k, o.repeats);
    const double touched = routing ? routing->last_union() : 0.0;
    const Timing seqs = time_forward(*backend, *model, *cache, prefilled, k, 1, o.repeats);
    const auto [seq_peak, seq_peak_cpu] = fraction_of_peak(k * macs_per_token, seq);
    const double cached = in_cache_rate(*model, level, k);
    rows.push_back({{"tokens", k},
                    {"one_core_in_cache_multiply_adds_per_s", cached},
                    {"one_core_in_cache_fraction_of_peak", cached / peak.mix},
                    {"one_sequence_ms", seq.seconds * 1e3},
                    {"one_sequence_best_ms", seq.best * 1e3},
                    {"one_sequence_cpu_ms", seq.cpu * 1e3},
                    {"one_sequence_tokens_per_s", k / seq.seconds},
                    {"one_sequence_cost_vs_1", seq.seconds / one.seconds},
                    {"one_sequence_fraction_of_peak", seq_peak},
                    {"one_sequence_cpu_fraction_of_peak", seq_peak_cpu},
                    {"k_sequences_ms", seqs.seconds * 1e3},
                    {"k_sequences_best_ms", seqs.best * 1e3},
                    {"k_sequences_cpu_ms", seqs.cpu * 1e3},
                    {"k_sequences_tokens_per_s", k / seqs.seconds},
                    {"k_sequences_cost_vs_1", seqs.seconds / one.seconds}});
    if (cost) {
      rows.back()["one_sequence_predicted_ms"] = cost->verify_seconds(k, o.prefix) * 1e3;
      rows.back()["experts_touched"] = touched;  // per layer, the last timed run's
      rows.back()["experts_expected"] = cost->experts_touched(k);
    }
  }
  report["forwards"] = rows;

  if (o.json) {
    std::printf("%s\n", report.dump(2).c_str());
    return;
  }
  std::printf("model %s (%s), %s, SIMD %s\n", report["model"].get<std::string>().c_str(),
              type_name.c_str(), backend->name().c_str(), std::string(simd_name(level)).c_str());
  std::printf(
      "weights read per forward: %.3f GB; read bandwidth between the decodes: %.2f GB/s (%.2f GB/s of CPU time)\n",
      weight_bytes / 1e9, bandwidth.wall / 1e9, bandwidth.cpu / 1e9);
  std::printf(
      "one-token decode: %.2f ms (best %.2f, cpu %.2f), %.2f tokens/s, weights at %.2f GB/s "
      "= %.0f%% of bandwidth (each run against the pass before it)\n",
      one.seconds * 1e3, one.best * 1e3, one.cpu * 1e3, 1.0 / one.seconds,
      weight_bytes / one.seconds / 1e9, 100.0 * report["decode"]["fraction_of_bandwidth"].get<double>());
  std::printf("  by CPU time: weights at %.2f GB/s = %.0f%% of bandwidth\n",
              report["decode"]["cpu_weight_gb_s"].get<double>(),
              100.0 * report["decode"]["cpu_fraction_of_bandwidth"].get<double>());
  std::printf("peak multiply-adds of one core (%s, register-only loop of each kernel's mix):",
              std::string(simd_name(level)).c_str());
  for (const auto& [name, rate] : peak.per_type) std::printf(" %s %.1f G/s", name.c_str(), rate / 1e9);
  std::printf("; this model's mix %.1f G/s\n", peak.mix / 1e9);
  std::printf("%6s | %65s | %38s\n", "k", "one sequence of k tokens", "k sequences of 1 token");
  std::printf("%6s | %9s %9s %9s %8s %8s %8s %8s | %9s %9s %9s %8s\n", "", "ms", "best ms", "tok/s",
              "x 1 tok", "% peak", "cpu %pk", "cache %pk", "ms", "best ms", "tok/s", "x 1 tok");
  for (const nlohmann::json& r : rows) {
    std::printf("%6d | %9.2f %9.2f %9.1f %8.2f %7.0f%% %7.0f%% %8.0f%% | %9.2f %9.2f %9.1f %8.2f\n",
                r["tokens"].get<int>(), r["one_sequence_ms"].get<double>(),
                r["one_sequence_best_ms"].get<double>(), r["one_sequence_tokens_per_s"].get<double>(),
                r["one_sequence_cost_vs_1"].get<double>(),
                100.0 * r["one_sequence_fraction_of_peak"].get<double>(),
                100.0 * r["one_sequence_cpu_fraction_of_peak"].get<double>(),
                100.0 * r["one_core_in_cache_fraction_of_peak"].get<double>(),
                r["k_sequences_ms"].get<double>(), r["k_sequences_best_ms"].get<double>(),
                r["k_sequences_tokens_per_s"].get<double>(), r["k_sequences_cost_vs_1"].get<double>());
  }
  if (!cost) return;
  std::printf("\nmixture of experts, one sequence of k tokens: the cost model against the timed forwards\n%s",
              format_expert_cost(*cost).c_str());
  // the cost model times a probe by the smaller of its wall time and its CPU time per thread
  // (other programs' turns on the cores not counted): the same measure here
  std::printf("(timed: the smaller of the median wall ms and CPU ms per thread, as the cost model times its probes)\n");
  std::printf("%6s | %9s | %9s | %12s | %9s | %15s | %15s\n", "k", "wall ms", "timed ms", "predicted ms", "ratio",
              "experts/layer", "expected");
  for (const nlohmann::json& r : rows) {
    const double ms = r["one_sequence_ms"].get<double>(), predicted = r["one_sequence_predicted_ms"].get<double>();
    const double timed = std::min(ms, r["one_sequence_cpu_ms"].get<double>() / backend_threads);
    std::printf("%6d | %9.2f | %9.2f | %12.2f | %9.3f | %15.2f | %15.2f\n", r["tokens"].get<int>(), ms, timed, predicted,
                predicted / timed, r["experts_touched"].get<double>(), r["experts_expected"].get<double>());
  }
}

}  // namespace

void add_bench_forward_command(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd =
      app.add_subcommand("bench-forward", "Time the CPU forward pass against memory bandwidth");
  cmd->add_option("-m,--model", options->model_path,
                  "Model file (GGUF, llama2.c, Hugging Face directory)");
  cmd->add_option("--random", options->random_shape,
                  "Random weights of a named shape: tiny, tiny-qwen2, tiny-qwen3, tiny-qwen3moe, qwen3moe-1.3b, 110m, 1.1b, 7b");
  cmd->add_option("--type", options->type,
                  "Weight type of a random model: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs, iq4_nl, mxfp4");
  cmd->add_option("--write-gguf", options->write_gguf,
                  "Also save the random model as this GGUF file");
  cmd->add_option("--tokens", options->tokens, "Forward sizes to time, e.g. 1,2,4,8")
      ->delimiter(',');
  cmd->add_option("--repeats", options->repeats,
                  "Timed runs per measurement (the median is reported)");
  cmd->add_option("--threads", options->threads, "Threads (0: one per core)");
  cmd->add_option("--context", options->prefix, "Cached positions before the timed forwards");
  cmd->add_option("--simd", options->simd,
                  "Kernel level: portable, avx2 or avx512 (default: the best available)");
  cmd->add_flag("--json", options->json, "Print the results as JSON");
  cmd->callback([options] { run_bench(*options); });
}

}  // namespace specula::cli
