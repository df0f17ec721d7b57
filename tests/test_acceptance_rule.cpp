// The acceptance decision a device takes (kernels/acceptance_rule.h) from uniforms drawn in
// advance, checked on the host against compute/acceptance.h: the same verdict as
// accept_greedy, accept_sampled and accept_forced given the same distributions, and the
// generator advanced by exactly the draws those functions consume.
#include <QtTest>

#include <random>
#include <span>
#include <vector>

#include "acceptance_rule.h"
#include "compute/acceptance.h"
#include "compute/sampler.h"

using namespace specula;
namespace rule = specula::acceptance;

namespace {

// Verification rows answered the way the device answers them, from host logits.
struct HostRows {
  const SamplingParams& params;
  std::span<const float> logits;  // (d + 1, vocab)
  std::span<const float> q_rows;  // (d, vocab), empty: one-hot
  std::span<const int> draft;
  int vocab;

  std::span<const float> row(int j) const { return logits.subspan(static_cast<size_t>(j) * vocab, static_cast<size_t>(vocab)); }
  std::vector<float> p_row(int j) const {
    std::vector<float> p;
    sampling_distribution(params, row(j), p);
    return p;
  }
  int argmax(int j) const { return specula::argmax(row(j)); }
  float p(int j, int t) const { return p_row(j)[static_cast<size_t>(t)]; }
  float q(int j, int t) const {
    return q_rows.empty() ? (t == draft[static_cast<size_t>(j)] ? 1.0f : 0.0f) : q_rows[static_cast<size_t>(j) * vocab + t];
  }
  int draw(int j, double u) const { return sample_at(p_row(j), u); }
  int draw_residual(int j, double u) const {
    std::vector<float> r = p_row(j);
    double mass = 0.0;
    for (int t = 0; t < vocab; ++t) mass += (r[static_cast<size_t>(t)] = std::max(r[static_cast<size_t>(t)] - q(j, t), 0.0f));
    return mass > 0.0 ? sample_at(r, u) : draw(j, u);
  }
};

// How many uniforms `g` moved past `before`.
int consumed(const Rng& before, const Rng& g) {
  Rng probe = before;
  for (int n = 0; n < 64; ++n) {
    Rng ahead = probe, after = g;
    if (ahead.next() == after.next()) return n;
    probe.uniform();
  }
  return -1;
}

}  // namespace

class TestAcceptanceRule : public QObject {
  Q_OBJECT

 private slots:
  void uniformsDrawnAheadGiveTheHostsVerdict() {
    std::mt19937 rng(1);
    const int vocab = 40;
    std::normal_distribution<float> normal(0.0f, 1.5f);
    std::uniform_int_distribution<int> token(0, vocab - 1);
    int rejected = 0, bonus = 0;
    for (int trial = 0; trial < 600; ++trial) {
      const int d = trial % 6;
      const int which = trial % 3;  // greedy, sampled, forced
      SamplingParams params;
      params.temperature = which == 0 ? 0.0f : (trial % 5 == 0 ? 0.0f : 0.8f);
      params.top_k = trial % 4 == 1 ? 10 : 0;
      std::vector<float> logits(static_cast<size_t>(d + 1) * vocab);
      for (float& v : logits) v = normal(rng);
      std::vector<int> draft(static_cast<size_t>(d));
      std::vector<float> q_rows;
      const bool with_q = which == 1 && trial % 2 == 0;
      for (int j = 0; j < d; ++j) {
        // drafts that often agree with the target, so acceptances of every length occur
        const std::span<const float> row = std::span<const float>(logits).subspan(static_cast<size_t>(j) * vocab, vocab);
        draft[static_cast<size_t>(j)] = rng() % 10 < 7 ? specula::argmax(row) : token(rng);
        if (with_q) {
          std::vector<float> q(static_cast<size_t>(vocab));
          for (float& v : q) v = std::abs(normal(rng));
          float sum = 0.0f;
          for (float v : q) sum += v;
          for (float& v : q) v /= sum;
          q_rows.insert(q_rows.end(), q.begin(), q.end());
        }
      }
      const double alpha = 0.7;
      const rule::Rule kind = which == 0 ? rule::Rule::Greedy : which == 1 && !params.greedy() ? rule::Rule::Sampled : rule::Rule::Forced;
      if (kind == rule::Rule::Sampled && params.greedy()) continue;

      Rng host(static_cast<uint64_t>(trial)), start = host;
      Acceptance want;
      if (kind == rule::Rule::Greedy) {
        want = accept_greedy(draft, logits, vocab);
      } else if (kind == rule::Rule::Sampled) {
        want = accept_sampled(params, draft, q_rows, logits, vocab, host);
      } else {
        want = accept_forced(alpha, params, draft, logits, vocab, host);
      }

      Rng peek = start;
      std::vector<double> u(static_cast<size_t>(d + 1));
      for (double& x : u) x = peek.uniform();
      HostRows rows{params, logits, q_rows, draft, vocab};
      const rule::Decision got = rule::decide(kind, params.greedy(), alpha, d, draft.data(), u.data(), rows);
      QCOMPARE(got.accepted, want.accepted);
      QCOMPARE(got.next, want.next);
      const int used = rule::draws(kind, params.greedy(), d, got.accepted);
      QVERIFY(used <= d + 1);
      QCOMPARE(consumed(start, host), kind == rule::Rule::Greedy ? 0 : used);
      rejected += got.accepted < d ? 1 : 0;
      bonus += got.accepted == d && d > 0 ? 1 : 0;
    }
    QVERIFY(rejected > 50 && bonus > 50);  // both endings exercised
  }
};

QTEST_GUILESS_MAIN(TestAcceptanceRule)
#include "test_acceptance_rule.moc"
