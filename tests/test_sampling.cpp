// Sampling and the acceptance rules, checked against naive float64 computations and exact
// small-vocabulary distributions. No model involved.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "compute/acceptance.h"
#include "compute/sampler.h"
#include "stats.h"

using namespace specula;
using namespace specula::test;

namespace {

// The sampling law written the obvious way, in double: softmax at T, then top-k, top-p,
// min-p by sorting, renormalized.
std::vector<double> naive_distribution(const SamplingParams& s, const std::vector<float>& logits) {
  const size_t n = logits.size();
  std::vector<double> p(n, 0.0);
  if (s.temperature <= 0) {
    p[static_cast<size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin())] = 1.0;
    return p;
  }
  double z = 0;
  for (size_t i = 0; i < n; ++i) z += std::exp(logits[i] / static_cast<double>(s.temperature));
  for (size_t i = 0; i < n; ++i) p[i] = std::exp(logits[i] / static_cast<double>(s.temperature)) / z;
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  std::vector<bool> keep(n, true);
  for (size_t r = 0; r < n; ++r) {
    if (s.top_k > 0 && r >= static_cast<size_t>(s.top_k)) keep[idx[r]] = false;
  }
  double cum = 0;
  bool reached = false;
  for (size_t r = 0; r < n; ++r) {
    if (!keep[idx[r]]) continue;
    if (reached) keep[idx[r]] = false;
    cum += p[idx[r]];
    if (s.top_p < 1.0f && cum >= s.top_p) reached = true;
  }
  for (size_t r = 1; r < n; ++r) {
    if (s.min_p > 0 && p[idx[r]] < s.min_p * p[idx[0]]) keep[idx[r]] = false;
  }
  double kept = 0;
  for (size_t i = 0; i < n; ++i) kept += keep[i] ? p[i] : 0;
  for (size_t i = 0; i < n; ++i) p[i] = keep[i] ? p[i] / kept : 0;
  return p;
}

std::vector<float> random_logits(Rng& rng, int n, double scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>((rng.uniform() * 2 - 1) * scale);
  return v;
}

std::vector<float> as_float(const std::vector<double>& p) { return {p.begin(), p.end()}; }

}  // namespace

class TestSampling : public QObject {
  Q_OBJECT

 private slots:
  void rngIsReproducibleAndInRange() {
    Rng a(42), b(42), c(43);
    bool differs = false;
    for (int i = 0; i < 1000; ++i) {
      const double x = a.uniform();
      QCOMPARE(x, b.uniform());
      QVERIFY(x >= 0.0 && x < 1.0);
      differs |= x != c.uniform();
    }
    QVERIFY(differs);
  }

  void argmaxTakesLowestIndexOnTies() {
    const std::vector<float> v{1, 3, 2, 3};
    QCOMPARE(argmax(v), 1);
  }

  void distributionMatchesNaiveReference_data() {
    QTest::addColumn<float>("temperature");
    QTest::addColumn<int>("topK");
    QTest::addColumn<float>("topP");
    QTest::addColumn<float>("minP");
    QTest::newRow("greedy") << 0.0f << 0 << 1.0f << 0.0f;
    QTest::newRow("T=1") << 1.0f << 0 << 1.0f << 0.0f;
    QTest::newRow("T=0.7") << 0.7f << 0 << 1.0f << 0.0f;
    QTest::newRow("T=1.5 top-k 5") << 1.5f << 5 << 1.0f << 0.0f;
    QTest::newRow("T=0.7 top-p 0.9") << 0.7f << 0 << 0.9f << 0.0f;
    QTest::newRow("T=1 min-p 0.1") << 1.0f << 0 << 1.0f << 0.1f;
    QTest::newRow("all filters") << 0.8f << 10 << 0.8f << 0.05f;
  }
  void distributionMatchesNaiveReference() {
    QFETCH(float, temperature);
    QFETCH(int, topK);
    QFETCH(float, topP);
    QFETCH(float, minP);
    const SamplingParams s{temperature, topK, topP, minP, 0};
    Rng rng(7);
    // small vocabularies, and a large flat one where top-p needs hundreds of tokens
    for (int trial = 0; trial < 56; ++trial) {
      const auto logits = trial < 50 ? random_logits(rng, 37, 4.0) : random_logits(rng, 1000, 1.0);
      std::vector<float> got;
      sampling_distribution(s, logits, got);
      const auto want = naive_distribution(s, logits);
      double sum = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        QVERIFY2(std::abs(got[i] - want[i]) < 1e-6, qPrintable(QString("id %1: %2 vs %3").arg(i).arg(got[i]).arg(want[i])));
        QCOMPARE(got[i] == 0.0f, want[i] == 0.0);
        sum += got[i];
      }
      QVERIFY(std::abs(sum - 1.0) < 1e-5);
    }
  }

  void tokenLogprobMatchesLogSoftmax() {
    Rng rng(3);
    const auto logits = random_logits(rng, 50, 10.0);
    double z = 0;
    for (float x : logits) z += std::exp(static_cast<double>(x));
    for (int t = 0; t < 50; t += 7) QVERIFY(std::abs(token_logprob(logits, t) - (logits[t] - std::log(z))) < 1e-5);
  }

  void sampleFromFollowsTheDistribution() {
    const std::vector<double> p{0.5, 0.2, 0.15, 0.1, 0.05, 0.0};
    const auto pf = as_float(p);
    std::vector<double> counts(p.size(), 0);
    Rng rng(11);
    for (int i = 0; i < 20000; ++i) counts[static_cast<size_t>(sample_from(pf, rng))] += 1;
    QCOMPARE(counts[5], 0.0);
    const auto [stat, df] = chi2_fit(counts, p);
    QVERIFY2(stat < chi2_critical(df, kZ1e4), qPrintable(QString::number(stat)));
  }

  void sameSeedSameSamples() {
    Rng rng(5);
    const auto logits = random_logits(rng, 100, 3.0);
    const SamplingParams s{0.9f, 40, 0.95f, 0.0f, 0};
    Rng a(99), b(99);
    for (int i = 0; i < 100; ++i) QCOMPARE(sample(s, logits, a), sample(s, logits, b));
  }

  // Greedy acceptance against hand-computed cases.
  void greedyAcceptance() {
    const int V = 4;
    // argmax of each row: 2, 0, 3
    const std::vector<float> rows{0, 1, 5, 2, /**/ 9, 1, 1, 1, /**/ 0, 0, 0, 1};
    const std::vector<int> all_right{2, 0};
    Acceptance v = accept_greedy(all_right, rows, V);
    QCOMPARE(v.accepted, 2);
    QCOMPARE(v.next, 3);  // bonus
    const std::vector<int> second_wrong{2, 1};
    v = accept_greedy(second_wrong, rows, V);
    QCOMPARE(v.accepted, 1);
    QCOMPARE(v.next, 0);  // the target's correction
    const std::vector<int> first_wrong{3, 0};
    v = accept_greedy(first_wrong, rows, V);
    QCOMPARE(v.accepted, 0);
    QCOMPARE(v.next, 2);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, accept_greedy(first_wrong, std::span(rows).first(8), V));
  }

  // Rejection sampling: the emitted token follows p whatever q is, the acceptance rate
  // equals sum_x min(p(x), q(x)), and after an accepted token the next follows p's next
  // row. Checked for sampled (q) and deterministic (one-hot) drafts, with and without filters.
  void rejectionSamplingPreservesTheTarget_data() {
    QTest::addColumn<float>("temperature");
    QTest::addColumn<float>("topP");
    QTest::addColumn<bool>("oneHot");
    QTest::newRow("T=1 sampled draft") << 1.0f << 1.0f << false;
    QTest::newRow("T=0.7 top-p 0.9 sampled draft") << 0.7f << 0.9f << false;
    QTest::newRow("T=1 deterministic draft") << 1.0f << 1.0f << true;
  }
  void rejectionSamplingPreservesTheTarget() {
    QFETCH(float, temperature);
    QFETCH(float, topP);
    QFETCH(bool, oneHot);
    const SamplingParams s{temperature, 0, topP, 0.0f, 0};
    const int V = 6;
    Rng setup(21);
    // target rows 0 and 1, and a deliberately different (poor) draft law for both positions
    const auto t0 = random_logits(setup, V, 2.0), t1 = random_logits(setup, V, 2.0), t2 = random_logits(setup, V, 2.0);
    std::vector<float> target(t0);
    target.insert(target.end(), t1.begin(), t1.end());
    target.insert(target.end(), t2.begin(), t2.end());
    const std::vector<double> q0{0.05, 0.05, 0.1, 0.1, 0.3, 0.4}, q1{0.4, 0.3, 0.1, 0.1, 0.05, 0.05};
    const auto p0 = naive_distribution(s, t0), p1 = naive_distribution(s, t1);

    std::vector<double> first(V, 0), second(V, 0);
    double accepted_first = 0;
    const int n = 40000;
    Rng draw(1), rng(2);
    for (int i = 0; i < n; ++i) {
      std::vector<int> draft;
      std::vector<float> probs;
      if (oneHot) {
        draft = {4, 0};
      } else {
        draft = {sample_from(as_float(q0), draw), sample_from(as_float(q1), draw)};
        probs = as_float(q0);
        const auto q1f = as_float(q1);
        probs.insert(probs.end(), q1f.begin(), q1f.end());
      }
      const Acceptance v = accept_sampled(s, draft, probs, target, V, rng);
      const int tok0 = v.accepted >= 1 ? draft[0] : v.next;
      first[static_cast<size_t>(tok0)] += 1;
      if (v.accepted >= 1) {
        accepted_first += 1;
        second[static_cast<size_t>(v.accepted >= 2 ? draft[1] : v.next)] += 1;
      }
    }
    const double bonf = kZ1e4;
    const auto [s0, df0] = chi2_fit(first, p0);
    QVERIFY2(s0 < chi2_critical(df0, bonf), qPrintable(QString("first token chi2 %1 df %2").arg(s0).arg(df0)));
    const auto [s1, df1] = chi2_fit(second, p1);
    QVERIFY2(s1 < chi2_critical(df1, bonf), qPrintable(QString("second token chi2 %1 df %2").arg(s1).arg(df1)));

    // acceptance rate of the first draft token: sum_x min(p0, q0) (one-hot: p0(4))
    double alpha = 0;
    for (int x = 0; x < V; ++x) alpha += oneHot ? (x == 4 ? p0[x] : 0.0) : std::min(p0[x], q0[x]);
    const double sd = std::sqrt(alpha * (1 - alpha) / n);
    QVERIFY2(std::abs(accepted_first / n - alpha) < 4.5 * sd + 1e-12,
             qPrintable(QString("acceptance %1, expected %2").arg(accepted_first / n).arg(alpha)));
  }

  // The residual law normalize(max(p - q, 0)) itself, exactly: with q = p shifted, count
  // the rejection tokens.
  void rejectionDrawsFromTheResidual() {
    const int V = 4;
    const SamplingParams s{1.0f, 0, 1.0f, 0.0f, 0};
    const std::vector<float> logits{std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f)};
    const std::vector<double> q{0.7, 0.1, 0.1, 0.1};
    // residual: max(p - q, 0) = {0, 0.1, 0.2, 0.3} / 0.6
    const std::vector<double> residual{0, 0.1 / 0.6, 0.2 / 0.6, 0.3 / 0.6};
    std::vector<float> probs = as_float(q);
    std::vector<double> counts(V, 0);
    Rng rng(8);
    int rejections = 0;
    std::vector<float> target(logits);
    target.insert(target.end(), logits.begin(), logits.end());
    for (int i = 0; i < 40000; ++i) {
      const std::vector<int> draft{0};  // p(0)/q(0) = 1/7
      const Acceptance v = accept_sampled(s, draft, probs, target, V, rng);
      if (v.accepted == 0) {
        counts[static_cast<size_t>(v.next)] += 1;
        ++rejections;
      }
    }
    QCOMPARE(counts[0], 0.0);
    const auto [stat, df] = chi2_fit(counts, residual);
    QVERIFY2(stat < chi2_critical(df, kZ1e4), qPrintable(QString::number(stat)));
    const double reject_p = 6.0 / 7.0, sd = std::sqrt(reject_p * (1 - reject_p) / 40000);
    QVERIFY(std::abs(rejections / 40000.0 - reject_p) < 4.5 * sd);
  }

  void forcedAcceptanceKeepsAlphaOfTheDraft() {
    const int V = 3;
    const std::vector<int> draft{0, 0, 0, 0};
    const std::vector<float> target(static_cast<size_t>(5 * V), 0.0f);
    Rng rng(4);
    double kept = 0, geometric = 0;
    const double alpha = 0.7;
    for (int i = 0; i < 20000; ++i) kept += accept_forced(alpha, SamplingParams{}, draft, target, V, rng).accepted;
    for (int j = 1; j <= 4; ++j) geometric += std::pow(alpha, j);  // E[accepted] = sum_j alpha^j
    QVERIFY2(std::abs(kept / 20000 - geometric) < 0.05, qPrintable(QString::number(kept / 20000)));
  }
};

QTEST_GUILESS_MAIN(TestSampling)
#include "test_sampling.moc"
