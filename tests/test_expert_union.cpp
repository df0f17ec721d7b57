// The expected number of distinct experts a batch touches (compute/expert_union.h), against
// counts on synthetic routings drawn here: uniform, skewed toward a few experts (Zipf
// weights, k distinct experts per token by Gumbel top-k as a softmax router picks them) and
// correlated (runs of tokens sharing their experts, where the formula must err on the dear side).
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "compute/expert_union.h"

using namespace specula;

namespace {

// One token's k distinct experts, drawn with probability proportional to `weights` without
// replacement (Gumbel top-k).
std::vector<int32_t> draw_token(const std::vector<double>& weights, int k, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(1e-300, 1.0);
  std::vector<std::pair<double, int32_t>> keys;
  for (size_t e = 0; e < weights.size(); ++e) keys.push_back({std::log(weights[e]) - std::log(-std::log(u(rng))), static_cast<int32_t>(e)});
  std::partial_sort(keys.begin(), keys.begin() + k, keys.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::vector<int32_t> out;
  for (int r = 0; r < k; ++r) out.push_back(keys[static_cast<size_t>(r)].second);
  return out;
}

struct Count {
  double mean, stderr_;
};

// Distinct experts among `tokens` tokens, over `trials` batches; `run` tokens in a row share
// one draw (1: independent tokens).
Count monte_carlo(const std::vector<double>& weights, int k, int tokens, int trials, std::mt19937_64& rng, int run = 1) {
  double sum = 0, sum2 = 0;
  std::vector<char> seen(weights.size());
  for (int t = 0; t < trials; ++t) {
    std::fill(seen.begin(), seen.end(), 0);
    std::vector<int32_t> pick;
    for (int i = 0; i < tokens; ++i) {
      if (i % run == 0) pick = draw_token(weights, k, rng);
      for (const int32_t e : pick) seen[static_cast<size_t>(e)] = 1;
    }
    const double n = static_cast<double>(std::count(seen.begin(), seen.end(), 1));
    sum += n;
    sum2 += n * n;
  }
  const double mean = sum / trials;
  return {mean, std::sqrt(std::max(0.0, sum2 / trials - mean * mean) / trials)};
}

std::vector<double> zipf(int n, double s) {
  std::vector<double> w;
  for (int e = 1; e <= n; ++e) w.push_back(1.0 / std::pow(e, s));
  return w;
}

// Routing counts of one layer fed with `tokens` independent tokens.
RoutingCounts observe(const std::vector<double>& weights, int k, int tokens, std::mt19937_64& rng) {
  RoutingCounts counts(1, static_cast<int>(weights.size()), k);
  for (int i = 0; i < tokens; ++i) counts.add(0, draw_token(weights, k, rng), 1);
  return counts;
}

}  // namespace

class TestExpertUnion : public QObject {
  Q_OBJECT

 private slots:
  void uniform_closed_form() {
    QCOMPARE(expected_union_uniform(128, 8, 0), 0.0);
    QVERIFY(std::abs(expected_union_uniform(128, 8, 1) - 8.0) < 1e-12);
    QVERIFY(std::abs(expected_union_uniform(4, 4, 3) - 4.0) < 1e-12);  // every expert every token
    // two tokens: 8 + 8 · (1 - 8/128) = 15.5
    QVERIFY(std::abs(expected_union_uniform(128, 8, 2) - 15.5) < 1e-12);
    const std::vector<double> p(128, 8.0 / 128);
    for (const int t : {1, 3, 7, 32}) QVERIFY(std::abs(expected_union(p, t) - expected_union_uniform(128, 8, t)) < 1e-9);
  }

  void uniform_against_monte_carlo() {
    std::mt19937_64 rng(1);
    const std::vector<double> flat(128, 1.0);
    for (const int t : {1, 2, 4, 8, 16, 32}) {
      const Count mc = monte_carlo(flat, 8, t, 3000, rng);
      const double predicted = expected_union_uniform(128, 8, t);
      QVERIFY2(std::abs(mc.mean - predicted) < 4 * mc.stderr_ + 1e-9,
               qPrintable(QString("T=%1: counted %2 ± %3, formula %4").arg(t).arg(mc.mean).arg(mc.stderr_).arg(predicted)));
    }
  }

  // The union a policy asks for again and again is remembered until the counts change: what
  // it answers is, bit for bit, the sum over the layers of expected_union of their
  // probabilities, before and after more tokens are counted, and in a copy.
  void rememberedUnionIsTheComputedOne() {
    std::mt19937_64 rng(3);
    const std::vector<double> w = zipf(32, 1.1);
    RoutingCounts counts(3, 32, 4);
    const auto direct = [&](const RoutingCounts& c, double t) {
      double sum = 0;
      for (int l = 0; l < c.n_layers(); ++l) sum += expected_union(c.probabilities(l), t);
      return sum / c.n_layers();
    };
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < 50; ++i) counts.add(i % 3, draw_token(w, 4, rng), 1);
      for (const double t : {1.0, 2.0, 5.0, 2.0, 17.0, 1.0}) QCOMPARE(counts.expected_union(t), direct(counts, t));
      const RoutingCounts copy = counts;
      QCOMPARE(copy.expected_union(5.0), direct(counts, 5.0));
    }
    QCOMPARE(counts.expected_union(0.0), 0.0);
    // every expert read by every token (p_e = 1): each counts once, whatever T
    RoutingCounts all(2, 4, 4);
    for (int i = 0; i < 5; ++i) all.add(i % 2, std::vector<int32_t>{0, 1, 2, 3}, 1);
    for (const double t : {1.0, 3.0, 40.0}) {
      QCOMPARE(all.expected_union(t), direct(all, t));
      QCOMPARE(all.expected_union(t), 4.0);
    }
  }

  // Skewed routing: the union from observed frequencies matches the count, and is well
  // below what uniform routing would say (else the test could not tell the two apart).
  void skewed_against_monte_carlo() {
    std::mt19937_64 rng(2);
    const std::vector<double> w = zipf(64, 1.2);
    const RoutingCounts counts = observe(w, 4, 40000, rng);
    for (const int t : {1, 2, 4, 8, 16, 32}) {
      const Count mc = monte_carlo(w, 4, t, 3000, rng);
      const double predicted = counts.expected_union(t);
      QVERIFY2(std::abs(mc.mean - predicted) < 4 * mc.stderr_ + 0.01 * mc.mean,
               qPrintable(QString("T=%1: counted %2 ± %3, formula %4").arg(t).arg(mc.mean).arg(mc.stderr_).arg(predicted)));
      if (t >= 8) QVERIFY(predicted < 0.8 * expected_union_uniform(64, 4, t));
    }
  }

  // Tokens that share experts (runs of 4 alike) touch fewer than independent ones would:
  // the formula, which assumes independence, prices them dear, never cheap.
  void correlated_tokens_are_overestimated() {
    std::mt19937_64 rng(3);
    const std::vector<double> flat(128, 1.0);
    for (const int t : {8, 16, 32}) {
      const Count mc = monte_carlo(flat, 8, t, 2000, rng, 4);
      QVERIFY(mc.mean + 4 * mc.stderr_ < expected_union_uniform(128, 8, t));
    }
  }

  void counts_and_shrinkage() {
    RoutingCounts counts(2, 8, 2);
    QVERIFY(std::abs(counts.expected_union(3) - expected_union_uniform(8, 2, 3)) < 1e-12);  // nothing seen: uniform
    const std::vector<int32_t> picks = {0, 1, 0, 1, 0, 1};                              // three tokens, experts 0 and 1
    counts.add(0, picks, 3);
    QCOMPARE(counts.tokens(0), uint64_t{3});
    QCOMPARE(counts.picks(0, 0), uint64_t{3});
    QCOMPARE(counts.picks(0, 2), uint64_t{0});
    QCOMPARE(counts.last_union(), 2.0);  // layer 0 only: experts 0 and 1
    counts.add(1, std::vector<int32_t>{3, 4, 5, 4}, 2);
    QCOMPARE(counts.last_union(), (2.0 + 3.0) / 2);
    const std::vector<double> p = counts.probabilities(0);
    double sum = 0;
    for (const double x : p) sum += x;
    QVERIFY(std::abs(sum - 2.0) < 1e-12);  // still k per token
    // three tokens on two experts: the union of many tokens stays far above 2 (the prior)
    QVERIFY(counts.expected_union(32) > 0.5 * (2 + 8));
    QVERIFY(counts.expected_union(32) < expected_union_uniform(8, 2, 32) + 1e-12);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, RoutingCounts(1, 4, 5));
  }
};

QTEST_APPLESS_MAIN(TestExpertUnion)
#include "test_expert_union.moc"
