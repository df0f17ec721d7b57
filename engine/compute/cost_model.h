// What a forward pass costs, as a function of the batch: measured once per model and
// backend (a fraction of a second for small models, 1.5 s for the 1.1B shape on 2 cores: it
// runs a few whole forwards of each batch size), kept in a cache file, and read by the
// draft-length policies that weigh speculation against its price (decode/draft_policy.h,
// "goodput").
//
// A forward of `tokens` new tokens, of which `rows` want logits, through `layers` layers,
// the tokens attending to `positions` cached positions in all, costs
//
//     layers · (layer(tokens) + positions · position_seconds) + head(rows)
//
// layer(n): one transformer layer over n tokens at a short context (its matrices and
//           activations: flat while reading the weights dominates, then growing once the
//           kernels are compute-bound);
// head(n):  everything outside the layers: embedding, the final norm and the output matrix
//           over n logit rows, the forward's fixed overhead;
// position_seconds: attention's share, per token, cached position and layer. It matters
//           for small models at long contexts (stories260K), hardly for large ones.
//
// Apart from the forward, sampled decoding draws a distribution from each row it samples
// (the target's: one per token emitted; a model drafter's: one per token drafted):
// sample_row_seconds each, some 70 µs for the demo pair's 4096-word vocabulary, more than
// the demo draft's whole forward (about 50 µs).
//
// A mixture of experts (qwen3moe) reads, in each layer, only the experts its tokens chose,
// each once for all its tokens (compute/expert_union.h). Its layer splits into a dense part
// priced by tokens as above and the experts' part priced by the expected number of distinct
// experts the batch touches:
//
//     layer(n) = dense(n) + expert_seconds · U(n),   U(n) = Σ_e 1 - (1 - p_e)^n
//
// expert_seconds: one expert in one layer, its share of a one-token layer by the bytes it
//           reads (k experts of expert_bytes beside the dense part's weights);
// U(n):     the routing's expected union (uniform routing, E · (1 - (1 - k/E)^n), until
//           `routing` holds what the forwards have seen);
// dense(n): what whole forwards of n tokens took less expert_seconds times the experts
//           those forwards read (as the backend counted them; uniform routing's U(n) where
//           it does not count), so that the dense part does not depend on where the probes'
//           made-up tokens happened to route, and a routing that keeps to fewer experts makes
//           a wide verification cheaper, as it is.
//
// layer(n) comes from whole forwards of n tokens at a few batch sizes, interpolated linearly
// between them; beyond the last one it grows at least in proportion to the batch. A one-token
// forward splits into the layers' and the head's shares by the bytes they read when the model
// is larger than the last-level cache (it streams its weights), else by the first layer timed
// alone; that layer alone gives head(n) (logits for every token against logits for the
// last). Probing every layer
// costs a few of the forwards a decode runs anyway (1.5 s for the 1.1B Q8_0 shape on a 2-core
// machine, once per model file); one layer alone misjudged what a layer costs among the
// others, in both directions.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specula {

class Backend;
class RoutingCounts;
struct Model;

struct ForwardCost {
  std::string key;                    // what was measured: model file, backend, machine, program (cost_model_key)
  int n_layers = 0;                   // the model's layers: the default depth of seconds()
  std::vector<int> tokens;            // (points) batch sizes measured, ascending, the first 1
  std::vector<double> layer_seconds;  // (points) one layer over that many tokens, nondecreasing; with
                                      // experts, its dense part (dense(n) above)
  std::vector<double> head_seconds;   // (points) the rest of a forward for that many logit rows, nondecreasing
  double position_seconds = 0.0;      // attention per token, cached position and layer
  bool streams_weights = false;       // the model is larger than the last-level cache: a few tokens' forward
                                      // waits on memory, whose speed moves with what else the machine runs
                                      // (a model in the cache waits on its arithmetic and overheads)
  double sample_row_seconds = 0.0;    // drawing from one row of logits at a temperature (the softmax over
                                      // the vocabulary; filters not counted): what sampled decoding adds per
                                      // row it draws from, outside the forward; greedy rows take an argmax
  int n_experts = 0;                  // a mixture of experts' experts per layer (E); 0: dense
  int n_experts_used = 0;             // experts chosen per token (k)
  double expert_bytes = 0;            // one expert's gate, up and down matrices, in bytes
  double expert_seconds = 0;          // one expert in one layer of a forward of a few tokens
  std::shared_ptr<const RoutingCounts> routing;  // the routing seen so far (not stored); null: uniform
  double measure_seconds = 0.0;       // how long measuring took
  double load = 0.0;                  // the machine's load while measuring: 1-minute load average per logical core
  std::string file;                   // the cache file it was read from or stored in; empty: none
  bool from_file = false;             // read from `file` rather than measured now

  // Predicted seconds of one forward (layers -1: all of the model's).
  double seconds(int tokens, int rows, double positions, int layers = -1) const;
  // One sequence of `tokens` new tokens after `context` cached ones, logits for all.
  double verify_seconds(int tokens, int context = 0) const;
  // The distinct experts a layer's forward of `tokens` tokens is expected to read (0: dense).
  double experts_touched(double tokens) const;
  // One layer over `tokens` tokens without attention: dense(n) + expert_seconds · U(n).
  double layer_at(int tokens) const;
};

// Called with the fraction of a measurement done, in (0, 1], ending at 1: a large model's
// takes seconds (1.5 s for a 1.1B one on 2 cores), which a window shows as progress.
using CostProgress = std::function<void(double)>;

// Measures `model` on `backend` with about `budget_seconds` of probes (batch sizes beyond 16
// are left out when the budget runs short, and extrapolated; a busy machine stretches the
// wall time, not the probes). The result has cost_model_key's key.
inline constexpr double kCostBudgetSeconds = 0.4;  // probes' time beyond the rounds every measurement runs
ForwardCost measure_forward_cost(Backend& backend, const Model& model, double budget_seconds = kCostBudgetSeconds,
                                 const CostProgress& progress = {});

// The identity of a measurement: the model file (absolute path, size, modification time)
// with the model's shape, the backend's name (SIMD level and threads included), the
// machine (processor model, logical cores) and the running program's file (a rebuilt
// program has other kernels). Empty for a model without a file (random or in-memory
// weights), which is then never cached.
std::string cost_model_key(const Backend& backend, const Model& model);

// $XDG_CACHE_HOME/specula, else $HOME/.cache/specula; empty when neither is set.
std::string default_cost_cache_dir();

// The cache file of a key inside `dir`.
std::string cost_cache_path(const std::string& dir, const std::string& key);

// The cost stored for `key` in `dir`, or nothing when the file is missing, unreadable,
// malformed, of another format, or holds another key (a stale or corrupt file is never
// trusted).
std::optional<ForwardCost> read_cost_cache(const std::string& dir, const std::string& key);

// Stores `cost` under cost.key in `dir` (created if needed), atomically: a reader sees the
// old file or the new one, never half of one. Returns false, storing nothing, when the
// directory cannot be written.
bool write_cost_cache(const std::string& dir, const ForwardCost& cost);

// The last-level cache of the cores this process runs on, in bytes: a model larger than it
// streams its weights from memory, and a one-layer probe must not find it warm with weights
// a whole forward would have pushed out. The highest level among cpu0's caches in sysfs,
// else sysconf's figure, else 32 MiB. (glibc's sysconf said 320 MiB on a 2-core Zen 4
// virtual machine whose sysfs and lscpu say 32: the probes then read 640 MB before each
// one-layer probe, 1.5 s of a 1.1B model's 4.2 s measurement went into allocating that
// buffer, and models up to 320 MB counted as cache-resident.)
size_t last_level_cache_bytes();
// The highest level's size among the cache directories (index0, index1, ...) under `dir`,
// each with a `level` and a `size` file; 0 when there are none.
size_t last_level_cache_bytes_in(const std::string& dir);
// The bytes a sysfs cache `size` file states ("32768K", "2M", "512"); 0 when malformed.
size_t parse_cache_size(std::string_view text);

// The 1-minute load average per logical core (0 when unknown).
double machine_load();

// Whether a file measured at `measured_load` still describes the machine now at
// `current_load`: figures taken while other programs crowded the cores (load above 1 per
// core) hold only while it is about as busy; a quieter machine measures again.
bool cost_still_representative(double measured_load, double current_load);

// The cached cost when the file holds a valid one for this model and backend that is
// still representative of the machine's load (`current_load`), else a fresh measurement
// (reporting to `progress`), which is then stored. `dir` empty: no file at all.
ForwardCost load_or_measure_forward_cost(Backend& backend, const Model& model, const std::string& dir,
                                         double current_load = machine_load(), const CostProgress& progress = {});

// A table of the cost at typical batch sizes, for people: ms per forward, ms per token and
// the ratio to one token, with the attention term and where the figures come from.
std::string format_forward_cost(const ForwardCost& cost);
// A mixture of experts' terms (part of format_forward_cost): E, k, one expert's bytes and
// seconds, and at 1 to 32 tokens the expected union U(n), the dense and expert milliseconds
// of all layers and the predicted forward.
std::string format_expert_cost(const ForwardCost& cost);

}  // namespace specula
