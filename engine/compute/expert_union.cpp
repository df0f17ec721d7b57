#include "compute/expert_union.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace specula {

double expected_union_uniform(int n_experts, int n_used, double tokens) {
  if (n_experts <= 0 || tokens <= 0) return 0.0;
  const double p = static_cast<double>(std::clamp(n_used, 0, n_experts)) / n_experts;
  return n_experts * -std::expm1(tokens * std::log1p(-p));  // E · (1 - (1 - p)^T), exact near p = 0 and p = 1
}

double expected_union(std::span<const double> p, double tokens) {
  if (tokens <= 0) return 0.0;
  double sum = 0;
  for (const double pe : p) {
    const double q = std::clamp(pe, 0.0, 1.0);
    sum += q >= 1.0 ? 1.0 : -std::expm1(tokens * std::log1p(-q));
  }
  return sum;
}

RoutingCounts::RoutingCounts(int n_layers, int n_experts, int n_used)
    : n_layers_(n_layers),
      n_experts_(n_experts),
      n_used_(n_used),
      picks_(static_cast<size_t>(n_layers) * static_cast<size_t>(n_experts), 0),
      tokens_(static_cast<size_t>(n_layers), 0),
      last_union_(static_cast<size_t>(n_layers), -1),
      seen_(static_cast<size_t>(n_experts), 0) {
  if (n_layers < 0 || n_experts <= 0 || n_used <= 0 || n_used > n_experts) {
    throw std::invalid_argument("routing counts need 1 <= experts used <= experts");
  }
}

void RoutingCounts::add(int layer, std::span<const int32_t> chosen, int tokens) {
  if (layer < 0 || layer >= n_layers_) return;
  uint64_t* row = picks_.data() + static_cast<size_t>(layer) * static_cast<size_t>(n_experts_);
  std::fill(seen_.begin(), seen_.end(), 0);
  int distinct = 0;
  for (const int32_t e : chosen) {
    if (e < 0 || e >= n_experts_) continue;
    ++row[e];
    if (!seen_[static_cast<size_t>(e)]) seen_[static_cast<size_t>(e)] = 1, ++distinct;
  }
  tokens_[static_cast<size_t>(layer)] += static_cast<uint64_t>(std::max(0, tokens));
  last_union_[static_cast<size_t>(layer)] = distinct;
  ++version_;
}

double RoutingCounts::last_union() const {
  double sum = 0;
  int layers = 0;
  for (const int u : last_union_) {
    if (u >= 0) sum += u, ++layers;
  }
  return layers > 0 ? sum / layers : 0.0;
}

uint64_t RoutingCounts::picks(int layer, int expert) const {
  return picks_[static_cast<size_t>(layer) * static_cast<size_t>(n_experts_) + static_cast<size_t>(expert)];
}

std::vector<double> RoutingCounts::probabilities(int layer) const {
  const double uniform = static_cast<double>(n_used_) / n_experts_;
  const double seen = static_cast<double>(tokens(layer));
  std::vector<double> p(static_cast<size_t>(n_experts_));
  for (int e = 0; e < n_experts_; ++e) {
    p[static_cast<size_t>(e)] = (static_cast<double>(picks(layer, e)) + kPriorTokens * uniform) / (seen + kPriorTokens);
  }
  return p;
}

double RoutingCounts::expected_union(double t) const {
  if (n_layers_ == 0) return 0.0;
  if (t <= 0) return 0.0;
  std::lock_guard lock(memo_.mutex);
  if (memo_.version != version_) {
    memo_.log_keep.clear();
    for (int l = 0; l < n_layers_; ++l) {
      // an expert read by every token has log1p(-1) = -inf, and -expm1(t · -inf) = 1 exactly
      for (const double p : probabilities(l)) memo_.log_keep.push_back(std::log1p(-std::clamp(p, 0.0, 1.0)));
    }
    memo_.unions.clear();
    memo_.version = version_;
  }
  for (const auto& [tokens, value] : memo_.unions) {
    if (tokens == t) return value;
  }
  // specula::expected_union of each layer's probabilities, term for term and in its order
  double sum = 0;
  for (size_t l = 0; l < static_cast<size_t>(n_layers_); ++l) {
    double layer = 0;
    for (size_t cell = l * static_cast<size_t>(n_experts_); cell < (l + 1) * static_cast<size_t>(n_experts_); ++cell) {
      layer += -std::expm1(t * memo_.log_keep[cell]);
    }
    sum += layer;
  }
  const double value = sum / n_layers_;
  if (memo_.unions.size() >= kRememberedUnions) memo_.unions.clear();
  memo_.unions.emplace_back(t, value);
  return value;
}

}  // namespace specula
