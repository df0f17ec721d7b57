// How many distinct experts a batch of routed tokens touches: what a mixture of experts'
// forward reads (each chosen expert's weights once, whatever number of the batch's tokens
// chose it), and so what the cost model prices a verification by (compute/cost_model.h).
//
// With E experts, k chosen per token and tokens routed independently of each other, expert e
// is left out by all T tokens with probability (1 - p_e)^T, p_e being the chance that one
// token chooses it (its share of the picks times k, Σ_e p_e = k). The expected union is
//
//     U(T) = Σ_e 1 - (1 - p_e)^T,      under uniform routing (p_e = k/E): E · (1 - (1 - k/E)^T).
//
// The formula is exact for independent tokens whatever the router does within a token (a
// token's k picks are without replacement, which only p_e's marginal sees). What it leaves
// out is dependence between tokens: the tokens of one draft, or of one sequence's recent
// past, tend to share experts, so the real union is at most what independent tokens with the
// same frequencies give — the price errs toward dear, never toward a cheap verification
// that then disappoints.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

namespace specula {

// E · (1 - (1 - k/E)^T): uniform routing. 0 for T <= 0; n_used is clamped to n_experts.
double expected_union_uniform(int n_experts, int n_used, double tokens);

// Σ_e 1 - (1 - p_e)^T for per-token selection probabilities p (each clamped to [0, 1]).
double expected_union(std::span<const double> p, double tokens);

// The routing seen so far, per layer: how often each expert was picked out of how many
// tokens. The CPU forward counts it as it routes (a few additions per token and layer).
class RoutingCounts {
 public:
  RoutingCounts() = default;
  RoutingCounts(int n_layers, int n_experts, int n_used);

  int n_layers() const { return n_layers_; }
  int n_experts() const { return n_experts_; }
  int n_used() const { return n_used_; }
  bool empty() const { return n_layers_ == 0; }

  // One layer's picks for `tokens` tokens: `chosen` holds tokens × n_used expert ids.
  void add(int layer, std::span<const int32_t> chosen, int tokens);
  uint64_t tokens(int layer) const { return tokens_[static_cast<size_t>(layer)]; }
  uint64_t picks(int layer, int expert) const;

  // p_e of one layer, shrunk toward uniform routing by kPriorTokens tokens of it: after a
  // handful of tokens the raw frequencies would say the other experts are never used, and a
  // wide batch would be priced at the few experts those tokens happened to pick.
  static constexpr double kPriorTokens = 64;
  std::vector<double> probabilities(int layer) const;

  // The expected union at T tokens, averaged over the layers (uniform when nothing was seen).
  // Remembered per T until the next add(): a policy prices dozens of candidate steps
  // between two forwards, and each evaluation is n_layers × n_experts exponentials (0.45 ms
  // of a 10.9 ms step of qwen3moe-1.3b at N = 8 before it was remembered).
  double expected_union(double tokens) const;

  // The distinct experts of the last add() of each layer, averaged over the layers added to:
  // what the last forward read (benchmarks set it against expected_union).
  double last_union() const;

 private:
  static constexpr size_t kRememberedUnions = 256;  // token counts remembered at one version
  // expected_union's memory for the counts as they are (a copy starts without one).
  struct UnionMemo {
    std::mutex mutex;                             // the counts are read by whoever prices a step
    uint64_t version = ~uint64_t{0};              // the counts' version it was made for
    std::vector<double> log_keep;                 // (n_layers, n_experts) log1p(-p_e): -inf where p_e = 1
    std::vector<std::pair<double, double>> unions;  // (T, expected union) asked since
    UnionMemo() = default;
    UnionMemo(const UnionMemo&) {}
    UnionMemo& operator=(const UnionMemo&) {
      version = ~uint64_t{0};
      return *this;
    }
  };

  int n_layers_ = 0, n_experts_ = 0, n_used_ = 0;
  uint64_t version_ = 0;          // add() calls so far
  mutable UnionMemo memo_;
  std::vector<uint64_t> picks_;   // (n_layers, n_experts)
  std::vector<uint64_t> tokens_;  // (n_layers)
  std::vector<int> last_union_;   // (n_layers) distinct experts of the layer's last add; -1: none yet
  std::vector<char> seen_;        // (n_experts) scratch of add()
};

}  // namespace specula
