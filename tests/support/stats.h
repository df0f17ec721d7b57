// Small statistics for distribution tests: chi-square goodness of fit and homogeneity with
// a critical value for a chosen false-alarm probability.
#pragma once

#include <cmath>
#include <map>
#include <vector>

namespace specula::test {

// Upper critical value of chi-square with `df` degrees of freedom at tail probability
// alpha, from the Wilson-Hilferty approximation (z is the normal quantile of 1 - alpha).
inline double chi2_critical(int df, double z) {
  const double k = df;
  const double c = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
  return k * c * c * c;
}
constexpr double kZ1e4 = 3.719;  // normal quantile for a 1e-4 false alarm per test

// Goodness of fit of `counts` (n samples) to exact probabilities `p`: cells with expected
// count under 5 are pooled into one. Returns {statistic, degrees of freedom}.
inline std::pair<double, int> chi2_fit(const std::vector<double>& counts, const std::vector<double>& p) {
  double n = 0;
  for (double c : counts) n += c;
  double stat = 0, pooled_obs = 0, pooled_exp = 0;
  int cells = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = n * p[i];
    if (e < 5) {
      pooled_obs += counts[i];
      pooled_exp += e;
      continue;
    }
    stat += (counts[i] - e) * (counts[i] - e) / e;
    ++cells;
  }
  if (pooled_exp >= 5) {
    stat += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / pooled_exp;
    ++cells;
  } else if (pooled_obs > 0 && pooled_exp == 0) {
    stat = INFINITY;  // a sample where the law has no mass at all
  }
  return {stat, cells - 1};
}

// Homogeneity of two samples over the same keys; keys with fewer than 10 pooled
// observations are merged into one cell.
template <typename Key>
std::pair<double, int> chi2_two_sample(const std::map<Key, double>& a, const std::map<Key, double>& b) {
  double na = 0, nb = 0;
  for (auto& [k, v] : a) na += v;
  for (auto& [k, v] : b) nb += v;
  std::map<Key, std::pair<double, double>> both;
  for (auto& [k, v] : a) both[k].first += v;
  for (auto& [k, v] : b) both[k].second += v;
  std::vector<std::pair<double, double>> cells;
  std::pair<double, double> rare{0, 0};
  for (auto& [k, ab] : both) {
    if (ab.first + ab.second < 10) {
      rare.first += ab.first;
      rare.second += ab.second;
    } else {
      cells.push_back(ab);
    }
  }
  if (rare.first + rare.second > 0) cells.push_back(rare);
  double stat = 0;
  for (auto& [oa, ob] : cells) {
    const double total = oa + ob;
    const double ea = total * na / (na + nb), eb = total * nb / (na + nb);
    stat += (oa - ea) * (oa - ea) / ea + (ob - eb) * (ob - eb) / eb;
  }
  return {stat, static_cast<int>(cells.size()) - 1};
}

}  // namespace specula::test
