#include "compute/cost_model.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "compute/backend.h"
#include "compute/expert_union.h"
#include "compute/sampler.h"
#include "model/model.h"
#include "common/statistics.h"

namespace specula {

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// Bumped whenever what a file holds or how it is measured changes: older files then miss.
constexpr const char* kFormat = "specula forward cost 8";
// Batch sizes measured, smallest first, while the budget lasts: dense where single
// sequences verify short drafts, sparser where batches of drafts land.
constexpr int kPoints[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
// 1 to 16 tokens whatever the budget: two sequences drafting 7 tokens, or four drafting 3,
// verify 16, and extrapolating there from 8 misjudged it both ways (a machine whose 16 tokens
// cost 1.6x its 8 was predicted at 2x, and its sequences drafted too little)
constexpr int kMinPoints = 8;
constexpr int kMinRounds = 3;        // runs of every probe whatever the budget: the median of three outvotes a load spike
constexpr int kMaxRounds = 5;        // runs of every probe at most; each keeps its median run
constexpr double kFirstRound = 0.35; // share of the budget after which the first round takes no larger point
constexpr int kContextProbe = 256;   // cached positions of the attention probe (at most)

// Linear interpolation through (xs, ys); before the first point the first value. Beyond
// the last point the cost grows at least in proportion to the batch (y_last / x_last per
// token): past the largest batch measured the kernels are compute-bound, and a last segment
// that happens to be flat (a tile boundary: 6 and 8 tokens cost the same) must not make
// 32 tokens look as cheap as 8.
double interpolate(const std::vector<int>& xs, const std::vector<double>& ys, double x) {
  if (x <= xs.front()) return ys.front();
  const size_t n = xs.size();
  if (n == 1) return ys.front() * x / xs.front();
  size_t hi = 1;
  while (hi + 1 < n && xs[hi] < x) ++hi;
  const double slope = std::max(0.0, (ys[hi] - ys[hi - 1]) / (xs[hi] - xs[hi - 1]));
  if (x > xs.back()) return ys.back() + std::max(slope, ys.back() / xs.back()) * (x - xs.back());
  return ys[hi - 1] + slope * (x - xs[hi - 1]);
}

size_t bytes_of(const LayerWeights& layer) {
  size_t bytes = 0;
  for (const TensorView* v : layer.tensors()) bytes += v->bytes();
  return bytes;
}

// The first layer's weights: what a one-layer probe reads besides the head.
size_t layer_bytes(const Model& model) { return model.weights.layers.empty() ? 0 : bytes_of(model.weights.layers.front()); }

size_t head_bytes(const Model& model) { return model.weights.output.bytes() + model.weights.final_norm.bytes(); }

// One expert's gate, up and down matrices (the first layer's first expert: all are alike); 0: dense.
size_t expert_bytes(const Model& model) {
  if (model.weights.layers.empty() || model.weights.layers.front().expert_gate.empty()) return 0;
  const LayerWeights& l = model.weights.layers.front();
  return l.expert_gate.front().bytes() + l.expert_up.front().bytes() + l.expert_down.front().bytes();
}

// What one token reads of a layer: all of a dense layer, the dense part and k experts of a
// mixture's (the other E - k are not touched).
size_t one_token_bytes(const Model& model, const LayerWeights& layer) {
  const ModelConfig& c = model.config;
  const size_t untouched = c.has_experts() ? static_cast<size_t>(c.n_experts - c.n_experts_used) * expert_bytes(model) : 0;
  return bytes_of(layer) - untouched;
}

size_t one_token_layer_bytes(const Model& model) {
  return model.weights.layers.empty() ? 0 : one_token_bytes(model, model.weights.layers.front());
}

// What a one-token forward reads: every layer's weights (of a mixture, the experts one token
// chooses) and the head (and one embedding row, which is nothing beside them).
size_t streamed_bytes(const Model& model) {
  size_t bytes = head_bytes(model);
  for (const LayerWeights& layer : model.weights.layers) bytes += one_token_bytes(model, layer);
  return bytes;
}


// Times single forwards of the first layer of a model, or of all its layers, over one cache
// sequence, which each probe leaves empty again. On a CPU backend a probe takes the smaller of its
// wall time and its CPU time per thread (Backend::cpu_seconds): on a machine shared with other programs
// the wall clock also counts their turns, the CPU time does not.
class Prober {
 public:
  // `max_tokens`: the most positions a probe fills (its context and its new tokens)
  Prober(Backend& backend, const Model& model, int max_tokens)
      : backend_(backend),
        model_(model),
        cache_(backend.create_cache(model, max_tokens + 32, 1)),
        seq_(cache_->create()),
        full_depth_cache_(backend.create_cache(model, max_tokens + 32, model.config.n_layers)),
        full_depth_seq_(full_depth_cache_->create()),
        routing_(backend.routing_counts(model)),
        fits_in_cache_(model.weight_bytes() <= last_level_cache_bytes()) {
    // Between two uses of a layer's weights a real forward reads all the others; reading a
    // buffer as large as what the probe leaves out (up to twice the last-level cache) puts
    // the probe in the same state. Models that fit in the cache stay in it, as they do.
    const size_t whole = std::min(model.weight_bytes(), 2 * last_level_cache_bytes());
    const size_t probed = layer_bytes(model) + head_bytes(model);
    evict_.assign(whole > probed ? (whole - probed) / sizeof(uint64_t) : 0, 1);
  }
  ~Prober() {
    cache_->release(seq_);
    full_depth_cache_->release(full_depth_seq_);
  }

  // Seconds of one forward of the first layer over `tokens` new tokens after `context`
  // cached positions, logits for all tokens or the last only.
  double time(int tokens, bool all_logits, int context = 0) {
    if (context > 0) cache_->extend(seq_, context);  // keys and values left as they are: timing only
    evict();
    const double seconds = run(*cache_, seq_, tokens, all_logits, 1);
    cache_->truncate(seq_, 0);
    return seconds;
  }

  // Seconds of a whole forward of `tokens` new tokens after `context` cached positions,
  // logits for the last: what decoding (one token) and verifying a draft (several) run.
  // Nothing is evicted first: a whole forward reads every layer between two uses of one,
  // as decoding does. A decoding step follows the previous one at once, so the forward
  // of a model that fits in the last-level cache is timed right after an untimed one of
  // the same size: after the one-layer probes its weights are partly evicted and the pool
  // asleep, which made the demo target's one-token forward look 1.5x and its attention 6x
  // what decoding pays. (A larger model's forward reads memory anyway, and lasts long
  // enough not to notice a wake-up.)
  double time_full_depth(int tokens, int context = 0) {
    if (context > 0) full_depth_cache_->extend(full_depth_seq_, context);  // keys and values as they are
    if (fits_in_cache_) {
      run(*full_depth_cache_, full_depth_seq_, tokens, false, model_.config.n_layers);
      full_depth_cache_->truncate(full_depth_seq_, context);
    }
    const double seconds = run(*full_depth_cache_, full_depth_seq_, tokens, false, model_.config.n_layers);
    full_depth_cache_->truncate(full_depth_seq_, 0);
    return seconds;
  }

  // The distinct experts per layer the last whole forward read, as the backend counted
  // them; 0 for a dense model or a backend that does not count.
  double last_union() const { return routing_ ? routing_->last_union() : 0.0; }

  // The last probe's logits: a real row of the model's, for timing the sampler on.
  std::span<const float> last_row() const {
    const size_t vocab = static_cast<size_t>(model_.config.vocab_size);
    return logits_.size() < vocab ? std::span<const float>() : std::span<const float>(logits_).last(vocab);
  }

  // The probes' time so far, as timed: on a busy machine the budget then buys the same
  // probes as on a quiet one (the wall clock runs longer).
  double spent() const { return spent_; }

 private:
  double run(KvCache& cache, int seq, int tokens, bool all_logits, int layers) {
    std::vector<int32_t> ids(static_cast<size_t>(tokens));
    for (int j = 0; j < tokens; ++j) ids[static_cast<size_t>(j)] = (17 * j + 5) % model_.config.vocab_size;
    RaggedBatch batch;
    batch.add(seq, ids, all_logits);
    const auto start = Clock::now();
    const double cpu_start = backend_.cpu_seconds();
    backend_.forward(model_, cache, batch, logits_, layers);
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (const int threads = backend_.cpu_threads(); threads > 0) {
      seconds = std::min(seconds, (backend_.cpu_seconds() - cpu_start) / threads);
    }
    spent_ += seconds;
    return seconds;
  }

  void evict() {
    uint64_t sum = 0;
    for (const uint64_t w : evict_) sum += w;
    sink_ = sink_ + sum;
  }

  Backend& backend_;
  const Model& model_;
  std::unique_ptr<KvCache> cache_;  // the first layer's keys and values
  int seq_;
  std::unique_ptr<KvCache> full_depth_cache_;  // every layer's
  int full_depth_seq_;
  std::vector<float> logits_;
  std::shared_ptr<const RoutingCounts> routing_;  // a mixture's routing as the backend counts it; may be null
  std::vector<uint64_t> evict_;  // read before every probe
  volatile uint64_t sink_ = 0;   // keeps the reads
  double spent_ = 0;
  bool fits_in_cache_;  // the model's weights fit in the last-level cache
};

// What each probe typically takes: the median of its runs. Not the fastest run: where other
// tenants share the memory, a memory-bound forward's time spreads (a 1.1B file's one-token
// forward ran 18 to 29 ms) while a compute-bound one's hardly does, so the fastest of a few
// runs favoured one token (that file's 4 tokens came out at 1.65x one, where the medians
// are 1.15x) and its drafts looked dearer than they are. A median is as deaf to a lone load
// spike as a minimum.
struct Typical {
  std::vector<double> last;  // (points) 1 layer, n tokens, logits for the last: layer(n) + head(1)
  std::vector<double> all;   // (points) 1 layer, n tokens, logits for all: layer(n) + head(n)
  std::vector<double> full;  // (points) all layers, n tokens, logits for the last: n_layers layer(n) + head(1)
  double context = 0;        // all layers (1 if the model has one), context_tokens tokens after kContextProbe positions, logits for the last
  std::vector<double> unions;  // (points) a mixture's distinct experts per layer in `full`'s forwards; 0: not counted
};

// Every run of every probe, per batch size.
struct Runs {
  std::vector<std::vector<double>> last, all, full;  // (points, runs) the probes of Typical
  std::vector<std::vector<double>> unions;           // (points, runs) experts per layer each whole forward read
  std::vector<double> context;                       // (runs)

  explicit Runs(size_t points) : last(points), all(points), full(points), unions(points) {}
  Typical typical(size_t points) const {
    Typical t;
    for (size_t p = 0; p < points; ++p) {
      t.last.push_back(median(last[p]));
      t.all.push_back(median(all[p]));
      t.full.push_back(median(full[p]));
      t.unions.push_back(unions[p].empty() ? 0.0 : median(unions[p]));
    }
    t.context = median(context);
    return t;
  }
};

// A mixture's layer(n) less its experts' part (cost_model.h): one expert's seconds are its
// bytes' share of a one-token layer's, and the experts the probes read are those the backend
// counted (`unions`, per batch size), else those uniform routing would touch. (Assumed
// uniform, the random 1.3B mixture's probes, whose routing keeps to about half the experts,
// left no dense part at all, and wide verifications were predicted at a third of their
// time.) What is left stays positive and nondecreasing, as layer(n) was.
void split_experts(const Model& model, double layer1, const std::vector<double>& unions, ForwardCost& cost) {
  const ModelConfig& c = model.config;
  cost.n_experts = c.n_experts;
  cost.n_experts_used = c.n_experts_used;
  cost.expert_bytes = static_cast<double>(expert_bytes(model));
  cost.expert_seconds = layer1 * cost.expert_bytes / static_cast<double>(one_token_layer_bytes(model));
  const double dense1 = layer1 - cost.expert_seconds * c.n_experts_used;
  for (size_t p = 0; p < cost.tokens.size(); ++p) {
    const double probed = p < unions.size() && unions[p] > 0
                              ? unions[p]
                              : expected_union_uniform(c.n_experts, c.n_experts_used, cost.tokens[p]);
    double dense = cost.layer_seconds[p] - cost.expert_seconds * probed;
    dense = std::max(dense, p > 0 ? cost.layer_seconds[p - 1] : dense1);
    cost.layer_seconds[p] = std::max(dense, 1e-3 * layer1);
  }
}

// Seconds are split into the model's terms; noise may make a difference negative, so each
// term is kept positive and nondecreasing in the batch size.
ForwardCost fit(const Model& model, const std::vector<int>& points, const Typical& f, int context_tokens,
                int context_positions, bool memory_bound) {
  ForwardCost cost;
  cost.n_layers = model.config.n_layers;
  cost.tokens = points;
  cost.streams_weights = memory_bound;
  const double one = f.last[0];
  const int depth = model.config.n_layers;
  // How a one-token forward splits between the layers and the head. A model larger than the
  // last-level cache streams its weights from memory at one token, so the forward's time
  // divides as the bytes it reads do. (From a lone layer's probe the 1.1B Q4_K_M file's head
  // came out at 0.3 to 1.2 ms where it costs about 1.1, as the memory's load from other
  // tenants came and went, and layers:2 drafts were predicted at half their cost.) A model in
  // the cache is bound by its arithmetic and the forward's overheads: there a lone layer's
  // probe says what the head adds, and a whole forward what the depth - 1 other layers do.
  double layer1 = 0, head1 = 0;
  if (memory_bound && depth >= 2) {
    head1 = f.full[0] * static_cast<double>(head_bytes(model)) / static_cast<double>(streamed_bytes(model));
    layer1 = (f.full[0] - head1) / depth;
  } else {
    layer1 = depth >= 2 ? (f.full[0] - one) / (depth - 1)
                        : one * static_cast<double>(one_token_layer_bytes(model)) /
                              static_cast<double>(one_token_layer_bytes(model) + head_bytes(model));
    layer1 = std::clamp(layer1, 0.02 * one, one);
    head1 = one - layer1;
  }
  const size_t c = static_cast<size_t>(std::find(points.begin(), points.end(), context_tokens) - points.begin());
  // the attention probe is a whole forward where there are whole forwards, like its baseline
  const double without_context = depth >= 2 ? f.full[c] : f.last[c];
  const double probed_layers = depth >= 2 ? depth : 1;
  cost.position_seconds = std::max(0.0, (f.context - without_context) /
                                            (probed_layers * static_cast<double>(context_tokens) * context_positions));
  for (size_t p = 0; p < points.size(); ++p) {
    const double n = points[p];
    const double own_positions = n * (n + 1) / 2;  // the probe's tokens attend to each other
    // A layer's cost at n tokens comes from whole forwards: one layer timed alone misjudged
    // it both ways (the 1.1B Q8_0 file's 4 tokens at 1.8x one token where whole forwards
    // take 1.3x; the demo target's 4 tokens at 1.1x where whole forwards take 1.7x).
    const double whole = depth >= 2 ? (f.full[p] - head1) / depth : f.last[p] - head1;
    double layer = whole - cost.position_seconds * own_positions;
    // logits for all of one token are the logits for the last: the two probes differ by noise
    double head = points[p] == 1 ? head1 : f.all[p] - f.last[p] + head1;
    if (p > 0) {
      layer = std::max(layer, cost.layer_seconds.back());
      head = std::max(head, cost.head_seconds.back());
    }
    cost.layer_seconds.push_back(std::max(layer, layer1));
    cost.head_seconds.push_back(std::max(head, 0.0));
  }
  if (model.config.has_experts()) split_experts(model, layer1, f.unions, cost);
  return cost;
}

bool finite_nonnegative(double x) { return std::isfinite(x) && x >= 0; }

// What a file must hold to be used: the shape fit() produces.
bool plausible(const ForwardCost& c) {
  if (c.n_layers < 1 || c.tokens.empty() || c.tokens[0] != 1) return false;
  if (c.layer_seconds.size() != c.tokens.size() || c.head_seconds.size() != c.tokens.size()) return false;
  for (size_t p = 0; p < c.tokens.size(); ++p) {
    if (!finite_nonnegative(c.layer_seconds[p]) || c.layer_seconds[p] <= 0 || !finite_nonnegative(c.head_seconds[p])) return false;
    if (p > 0 && (c.tokens[p] <= c.tokens[p - 1] || c.layer_seconds[p] < c.layer_seconds[p - 1] ||
                  c.head_seconds[p] < c.head_seconds[p - 1])) {
      return false;
    }
  }
  if (c.n_experts < 0 || c.n_experts_used < 0 || c.n_experts_used > c.n_experts || !finite_nonnegative(c.expert_bytes) ||
      !finite_nonnegative(c.expert_seconds) || (c.n_experts > 0 && (c.n_experts_used == 0 || c.expert_seconds <= 0))) {
    return false;
  }
  return finite_nonnegative(c.position_seconds) && finite_nonnegative(c.sample_row_seconds) &&
         finite_nonnegative(c.measure_seconds) && finite_nonnegative(c.load);
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("model name")) return line.substr(line.find(':') + 2);
  }
  return "unknown processor";
}

// Size and latest modification time of a model file, or of the files of a model directory.
std::string file_identity(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::absolute(path, ec);
  uintmax_t size = 0;
  // not {}: the clock's epoch lies in the future (2174 in libstdc++), so every real file's
  // time is negative and max() with it kept 0, and a rewritten file of the same size had
  // the same identity
  fs::file_time_type newest = fs::file_time_type::min();
  const auto add = [&](const fs::path& f) {
    size += fs::file_size(f, ec);
    newest = std::max(newest, fs::last_write_time(f, ec));
  };
  if (fs::is_directory(p, ec)) {
    for (const auto& entry : fs::directory_iterator(p, ec)) {
      if (entry.is_regular_file(ec)) add(entry.path());
    }
  } else {
    add(p);
  }
  return p.string() + ", " + std::to_string(size) + " bytes, modified " +
         std::to_string(newest.time_since_epoch().count());
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// Seconds the sampler takes to draw the distribution of `row` (the median of a few runs,
// on the calling thread, as decoding draws it) at a temperature without filters: the
// softmax over the whole vocabulary, which every sampled row pays whatever the row. The
// filters' partial sort comes on top and depends on how flat the row is (top-p 0.95 over
// a flat row of the demo target's 4096 words sorts them all and costs 4 times as much),
// which a probe on made-up tokens cannot tell; it is left out.
double time_sampling(std::span<const float> row) {
  SamplingParams params;
  params.temperature = 0.8f;
  std::vector<float> probs;
  std::vector<double> runs;
  for (int r = 0; r < 15; ++r) {
    const auto start = Clock::now();
    sampling_distribution(params, row, probs);
    runs.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return median(runs);
}

}  // namespace

size_t parse_cache_size(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end == text.data()) return 0;
  const std::string_view unit(end, static_cast<size_t>(text.data() + text.size() - end));
  if (unit.empty()) return value;
  if (unit == "K") return value << 10;
  if (unit == "M") return value << 20;
  if (unit == "G") return value << 30;
  return 0;
}

size_t last_level_cache_bytes_in(const std::string& dir) {
  int best_level = 0;
  size_t best = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    std::ifstream level_file(entry.path() / "level"), size_file(entry.path() / "size");
    int level = 0;
    std::string size;
    if (!(level_file >> level) || !(size_file >> size)) continue;
    const size_t bytes = parse_cache_size(size);
    if (bytes > 0 && (level > best_level || (level == best_level && bytes > best))) best_level = level, best = bytes;
  }
  return best;
}

size_t last_level_cache_bytes() {
  static const size_t bytes = [] {
    if (const size_t sysfs = last_level_cache_bytes_in("/sys/devices/system/cpu/cpu0/cache"); sysfs > 0) return sysfs;
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return l3 > 0 ? static_cast<size_t>(l3) : size_t{32} << 20;
  }();
  return bytes;
}

double ForwardCost::experts_touched(double n_tokens) const {
  if (n_experts <= 0) return 0.0;
  return routing && !routing->empty() ? routing->expected_union(n_tokens)
                                      : expected_union_uniform(n_experts, n_experts_used, n_tokens);
}

double ForwardCost::layer_at(int n_tokens) const {
  const double dense = interpolate(tokens, layer_seconds, n_tokens);
  return n_experts > 0 ? dense + expert_seconds * experts_touched(n_tokens) : dense;
}

double ForwardCost::seconds(int n_tokens, int rows, double positions, int layers) const {
  if (n_tokens <= 0) return 0.0;
  const int depth = layers < 0 ? n_layers : layers;
  return depth * (layer_at(n_tokens) + positions * position_seconds) + interpolate(tokens, head_seconds, rows);
}

double ForwardCost::verify_seconds(int n_tokens, int context) const {
  const double positions = static_cast<double>(n_tokens) * context + n_tokens * (n_tokens + 1) / 2.0;
  return seconds(n_tokens, n_tokens, positions);
}

ForwardCost measure_forward_cost(Backend& backend, const Model& model, double budget_seconds,
                                 const CostProgress& progress) {
  backend.prepare(model);  // the weights repacked or uploaded before any probe, or a clear refusal
  const double load_at_start = machine_load();
  const auto start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const int context_limit = model.config.context_length > 0 ? model.config.context_length : 1 << 20;
  std::vector<int> points;
  for (const int n : kPoints) {
    if (n < context_limit) points.push_back(n);
  }
  // the attention probe runs a few tokens, a size every points list holds
  const int context_tokens = points[std::min<size_t>(3, points.size()) - 1];
  const int context_positions = std::max(1, std::min(kContextProbe, context_limit / 2 - context_tokens));
  Prober probe(backend, model, std::max(points.back(), context_tokens + context_positions));
  probe.time_full_depth(1);  // warm-up: pages, threads, allocations, repacked weights

  const bool whole_forwards = model.config.n_layers >= 2;
  Runs runs(points.size());
  for (int round = 0; round < kMaxRounds && (round < kMinRounds || probe.spent() < budget_seconds); ++round) {
    for (size_t p = 0; p < points.size(); ++p) {
      if (whole_forwards) {
        runs.full[p].push_back(probe.time_full_depth(points[p]));
        runs.unions[p].push_back(probe.last_union());
      }
      runs.last[p].push_back(probe.time(points[p], false));
      runs.all[p].push_back(probe.time(points[p], true));
      // the rounds every measurement runs are the work to show; later ones fit in the budget
      if (progress && round < kMinRounds) {
        progress(0.99 * (round + static_cast<double>(p + 1) / static_cast<double>(points.size())) / kMinRounds);
      }
      // the first round decides how far the budget reaches; later rounds only repeat
      if (round == 0 && static_cast<int>(p) + 1 >= kMinPoints && probe.spent() > kFirstRound * budget_seconds) {
        points.resize(p + 1);
        break;
      }
    }
    runs.context.push_back(whole_forwards ? probe.time_full_depth(context_tokens, context_positions)
                                          : probe.time(context_tokens, false, context_positions));
  }
  const Typical f = runs.typical(points.size());
  ForwardCost cost = fit(model, points, f, context_tokens, context_positions,
                         model.weight_bytes() > last_level_cache_bytes());
  if (const std::span<const float> row = probe.last_row(); !row.empty()) cost.sample_row_seconds = time_sampling(row);
  cost.key = cost_model_key(backend, model);
  cost.measure_seconds = elapsed();
  cost.load = std::max(load_at_start, machine_load());
  if (progress) progress(1.0);
  return cost;
}

std::string cost_model_key(const Backend& backend, const Model& model) {
  if (model.path.empty()) return {};
  const ModelConfig& c = model.config;
  std::ostringstream key;
  key << kFormat << "; model " << file_identity(model.path) << ", " << c.n_layers << " layers, dim " << c.dim
      << ", hidden " << c.hidden_dim << ", vocab " << c.vocab_size;
  if (!model.weights.layers.empty()) {
    key << ", " << type_traits(model.weights.layers.front().wq.type).name << "/"
        << type_traits(model.weights.output.type).name;
  }
  key << "; backend " << backend.name() << "; machine " << cpu_model_name() << ", "
      << std::thread::hardware_concurrency() << " logical cores";
  // the program that measured: a rebuilt one has other kernels, whose costs were never taken
  std::error_code ec;
  const fs::path program = fs::read_symlink("/proc/self/exe", ec);
  key << "; program " << (ec ? std::string("unknown") : file_identity(program.string()));
  return key.str();
}

std::string default_cost_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return (fs::path(xdg) / "specula").string();
  if (const char* home = std::getenv("HOME"); home && *home) return (fs::path(home) / ".cache" / "specula").string();
  return {};
}

std::string cost_cache_path(const std::string& dir, const std::string& key) {
  char name[48];
  std::snprintf(name, sizeof name, "forward-cost-%016llx.json", static_cast<unsigned long long>(fnv1a(key)));
  return (fs::path(dir) / name).string();
}

std::optional<ForwardCost> read_cost_cache(const std::string& dir, const std::string& key) {
  if (dir.empty() || key.empty()) return std::nullopt;
  const std::string path = cost_cache_path(dir, key);
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    ForwardCost c;
    c.key = j.at("key").get<std::string>();
    c.n_layers = j.at("n_layers").get<int>();
    c.tokens = j.at("tokens").get<std::vector<int>>();
    c.layer_seconds = j.at("layer_seconds").get<std::vector<double>>();
    c.head_seconds = j.at("head_seconds").get<std::vector<double>>();
    c.position_seconds = j.at("position_seconds").get<double>();
    c.streams_weights = j.at("streams_weights").get<bool>();
    c.sample_row_seconds = j.at("sample_row_seconds").get<double>();
    c.n_experts = j.at("n_experts").get<int>();
    c.n_experts_used = j.at("n_experts_used").get<int>();
    c.expert_bytes = j.at("expert_bytes").get<double>();
    c.expert_seconds = j.at("expert_seconds").get<double>();
    c.measure_seconds = j.at("measure_seconds").get<double>();
    c.load = j.at("load").get<double>();
    if (c.key != key || !plausible(c)) return std::nullopt;
    c.file = path;
    c.from_file = true;
    return c;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

bool write_cost_cache(const std::string& dir, const ForwardCost& cost) {
  if (dir.empty() || cost.key.empty()) return false;
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string path = cost_cache_path(dir, cost.key);
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << nlohmann::json{{"key", cost.key},
                          {"n_layers", cost.n_layers},
                          {"tokens", cost.tokens},
                          {"layer_seconds", cost.layer_seconds},
                          {"head_seconds", cost.head_seconds},
                          {"position_seconds", cost.position_seconds},
                          {"streams_weights", cost.streams_weights},
                          {"sample_row_seconds", cost.sample_row_seconds},
                          {"n_experts", cost.n_experts},
                          {"n_experts_used", cost.n_experts_used},
                          {"expert_bytes", cost.expert_bytes},
                          {"expert_seconds", cost.expert_seconds},
                          {"measure_seconds", cost.measure_seconds},
                          {"load", cost.load}}
               .dump(1)
        << "\n";
    if (!out.flush()) {
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

double machine_load() {
  double one_minute = 0;
  std::ifstream in("/proc/loadavg");
  if (!(in >> one_minute)) return 0.0;
  return one_minute / std::max(1u, std::thread::hardware_concurrency());
}

bool cost_still_representative(double measured_load, double current_load) {
  return measured_load <= 1.0 || current_load >= 0.75 * measured_load;
}

ForwardCost load_or_measure_forward_cost(Backend& backend, const Model& model, const std::string& dir,
                                         double current_load, const CostProgress& progress) {
  const std::string key = cost_model_key(backend, model);
  std::optional<ForwardCost> cached = read_cost_cache(dir, key);
  if (cached && cost_still_representative(cached->load, current_load)) return *cached;
  ForwardCost cost = measure_forward_cost(backend, model, kCostBudgetSeconds, progress);
  if (write_cost_cache(dir, cost)) cost.file = cost_cache_path(dir, cost.key);
  return cost;
}

std::string format_forward_cost(const ForwardCost& cost) {
  std::ostringstream out;
  char line[256];
  out << (cost.from_file ? "read from " + cost.file
                         : "measured in " + std::to_string(static_cast<int>(std::lround(cost.measure_seconds * 1e3))) +
                               " ms" + (cost.file.empty() ? std::string() : ", stored in " + cost.file))
      << "\n";
  const double one = cost.verify_seconds(1);
  std::snprintf(line, sizeof line, "%8s | %10s | %9s | %9s | %9s | %8s\n", "tokens", "forward ms", "ms/token",
                "x 1 token", "layer ms", "head ms");
  out << line;
  for (size_t p = 0; p < cost.tokens.size(); ++p) {
    const int n = cost.tokens[p];
    const double t = cost.verify_seconds(n);
    std::snprintf(line, sizeof line, "%8d | %10.3f | %9.3f | %9.2f | %9.4f | %8.4f\n", n, t * 1e3, t * 1e3 / n,
                  t / one, cost.layer_seconds[p] * 1e3, cost.head_seconds[p] * 1e3);
    out << line;
  }
  std::snprintf(line, sizeof line,
                "(%d layers; %s; beyond %d tokens extrapolated; attention adds %.4f ms per token per 100 cached"
                " positions; sampling a row at a temperature %.4f ms; measured at a load of %.2f per core)\n",
                cost.n_layers, cost.streams_weights ? "weights streamed from memory" : "weights in the last-level cache",
                cost.tokens.back(), cost.position_seconds * cost.n_layers * 100 * 1e3, cost.sample_row_seconds * 1e3,
                cost.load);
  out << line;
  if (cost.n_experts > 0) out << format_expert_cost(cost);
  return out.str();
}

std::string format_expert_cost(const ForwardCost& cost) {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line,
                "mixture of experts: %d experts, %d per token, one expert %.2f MB read in %.4f ms per layer;\n"
                "layer(n) = dense(n) + %.4f ms x U(n), U(n) = %s\n",
                cost.n_experts, cost.n_experts_used, cost.expert_bytes / 1e6, cost.expert_seconds * 1e3,
                cost.expert_seconds * 1e3,
                cost.routing && !cost.routing->empty() ? "sum_e 1 - (1 - p_e)^n (routing seen)" : "E (1 - (1 - k/E)^n) (uniform routing)");
  out << line;
  std::snprintf(line, sizeof line, "%8s | %10s | %9s | %10s | %10s\n", "tokens", "U(n)", "dense ms", "experts ms",
                "forward ms");
  out << line;
  for (const int n : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32}) {
    const double u = cost.experts_touched(n);
    const double dense = interpolate(cost.tokens, cost.layer_seconds, n);
    std::snprintf(line, sizeof line, "%8d | %10.2f | %9.3f | %10.3f | %10.3f\n", n, u, dense * cost.n_layers * 1e3,
                  cost.expert_seconds * u * cost.n_layers * 1e3, cost.verify_seconds(n) * 1e3);
    out << line;
  }
  return out.str();
}

}  // namespace specula
