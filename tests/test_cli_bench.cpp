// specula-cli bench-spec and bench-forward, run as a user would on a tiny random model:
// bench-spec's rows, printed as JSON, say what they ran, and a speed-up is the median over
// repeats of the ratio between the baseline's and the configuration's runs of the same
// repeat, with the lowest and highest ratio beside it (the whole rows' medians may come from
// different phases of a shared machine's load); bench-forward pairs its decodes with
// bandwidth passes the same way.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include <algorithm>
#include <vector>

#include "cli_run.h"

using namespace specula::test;

class TestCliBench : public QObject {
  Q_OBJECT

 private slots:
  // bench-forward sets each timed decode against the bandwidth pass run just before it: its
  // fraction of the bandwidth is the median of those pairs' ratios, not a ratio of medians
  // taken in different phases of a shared machine.
  void forwardBenchPairsEachDecodeWithABandwidthPass() {
    constexpr int kRepeats = 5;
    const CliRun run = run_cli({"bench-forward", "--random", "tiny", "--type", "q8_0", "--tokens", "1,2", "--threads",
                                "1", "--repeats", QString::number(kRepeats), "--json"});
    QVERIFY2(run.code == 0, run.err.constData());
    const QJsonObject report = QJsonDocument::fromJson(run.out).object();
    QVERIFY(!report["simd"].toString().isEmpty());
    const double weight_bytes = report["weight_bytes_per_forward"].toDouble();
    QVERIFY(weight_bytes > 0);
    const QJsonObject decode = report["decode"].toObject();
    const QJsonArray runs = decode["runs_ms"].toArray(), passes = decode["bandwidth_runs_gb_s"].toArray();
    QCOMPARE(runs.size(), kRepeats);
    QCOMPARE(passes.size(), kRepeats);
    std::vector<double> fractions, rates;
    for (int r = 0; r < kRepeats; ++r) {
      QVERIFY(runs[r].toDouble() > 0 && passes[r].toDouble() > 0);
      fractions.push_back(weight_bytes / (runs[r].toDouble() / 1e3) / (passes[r].toDouble() * 1e9));
      rates.push_back(passes[r].toDouble());
    }
    std::sort(fractions.begin(), fractions.end());
    std::sort(rates.begin(), rates.end());
    QCOMPARE(decode["fraction_of_bandwidth"].toDouble(), fractions[kRepeats / 2]);
    QCOMPARE(report["read_bandwidth_gb_s"].toDouble(), rates[kRepeats / 2]);
    const QJsonArray forwards = report["forwards"].toArray();
    QCOMPARE(forwards.size(), 2);
    QCOMPARE(forwards[1].toObject()["tokens"].toInt(), 2);
  }

  void speedUpsPairTheRunsOfOneRepeat() {
    constexpr int kRepeats = 5;
    const CliRun run = run_cli({"bench-spec", "--random", "tiny", "--threads", "1", "--n", "1,2", "--drafters", "ngram",
                                "--policies", "fixed:2,goodput", "--temps", "0", "--alpha", "0.7", "--max-tokens", "12",
                                "--repeats", QString::number(kRepeats), "--json"});
    QVERIFY2(run.code == 0, run.err.constData());
    const QJsonArray rows = QJsonDocument::fromJson(run.out).array();
    QCOMPARE(rows.size(), 2 * 3);  // per N: the baseline, then ngram with each policy

    std::vector<double> baseline;
    for (const QJsonValue& value : rows) {
      const QJsonObject row = value.toObject();
      QCOMPARE(row["mode"].toString(), QString("forced a=0.7"));
      QVERIFY(!row["simd"].toString().isEmpty());
      const QJsonArray runs = row["decode_s_runs"].toArray();
      QCOMPARE(runs.size(), kRepeats);
      std::vector<double> times;
      for (const QJsonValue& t : runs) {
        QVERIFY(t.toDouble() > 0);
        times.push_back(t.toDouble());
      }
      std::vector<double> sorted = times;
      std::sort(sorted.begin(), sorted.end());
      QCOMPARE(row["decode_s"].toDouble(), sorted[kRepeats / 2]);

      if (row["drafter"].toString() == "none") {
        baseline = times;
        QCOMPARE(row["speedup_over_none"].toDouble(), 1.0);
        QCOMPARE(row["speedup_over_none_low"].toDouble(), 1.0);
        QCOMPARE(row["speedup_over_none_high"].toDouble(), 1.0);
        QCOMPARE(row["steps_per_token"].toDouble(), 1.0);
        QCOMPARE(row["drafted_per_token"].toDouble(), 0.0);
        continue;
      }
      QCOMPARE(baseline.size(), times.size());
      std::vector<double> ratios;
      for (size_t rep = 0; rep < times.size(); ++rep) ratios.push_back(baseline[rep] / times[rep]);
      std::sort(ratios.begin(), ratios.end());
      QCOMPARE(row["speedup_over_none"].toDouble(), ratios[kRepeats / 2]);
      QCOMPARE(row["speedup_over_none_low"].toDouble(), ratios.front());
      QCOMPARE(row["speedup_over_none_high"].toDouble(), ratios.back());
      if (row["policy"].toString() == "fixed:2") {
        // forced acceptance 0.7 with two-token drafts: fewer verification steps than tokens,
        // and each repeat draws which tokens are kept anew
        QVERIFY(row["steps_per_token"].toDouble() < 1.0);
        const QJsonArray steps = row["steps_runs"].toArray();
        QCOMPARE(steps.size(), kRepeats);
        QVERIFY2(std::any_of(steps.begin(), steps.end(), [&](const QJsonValue& s) { return s != steps.first(); }),
                 "every repeat kept the same draft tokens");
        QVERIFY(row["acceptance"].toDouble() > 0.0);
        // at most two proposed per sequence and step, and some in every step but the last few
        const double drafted = row["drafted_per_token"].toDouble();
        QVERIFY(drafted > 0.0);
        QVERIFY(drafted <= 2.0 * row["steps_per_token"].toDouble());
      }
    }
  }

  // --control runs the baseline twice in every repeat: its second row (policy "control")
  // decodes as plain decoding does and its speed-up pairs the two baseline runs of each
  // repeat, the band of the machine's noise the other rows are read against.
  void theControlIsTheBaselineAgainstItself() {
    constexpr int kRepeats = 5;
    const CliRun run = run_cli({"bench-spec", "--random", "tiny", "--threads", "1", "--n", "1,2", "--drafters", "ngram",
                                "--policies", "fixed:2", "--temps", "0", "--alpha", "0.7", "--max-tokens", "12",
                                "--repeats", QString::number(kRepeats), "--control", "--json"});
    QVERIFY2(run.code == 0, run.err.constData());
    const QJsonArray rows = QJsonDocument::fromJson(run.out).array();
    QCOMPARE(rows.size(), 2 * 3);  // per N: the baseline, the control, ngram with fixed:2
    for (int n = 0; n < 2; ++n) {
      const QJsonObject baseline = rows[3 * n].toObject(), control = rows[3 * n + 1].toObject();
      QCOMPARE(baseline["policy"].toString(), QString("-"));
      QCOMPARE(control["drafter"].toString(), QString("none"));
      QCOMPARE(control["policy"].toString(), QString("control"));
      QCOMPARE(control["n"].toInt(), baseline["n"].toInt());
      QCOMPARE(control["steps_per_token"].toDouble(), 1.0);
      QCOMPARE(control["drafted_per_token"].toDouble(), 0.0);
      const QJsonArray first = baseline["decode_s_runs"].toArray(), second = control["decode_s_runs"].toArray();
      QCOMPARE(second.size(), kRepeats);
      std::vector<double> ratios;
      for (int rep = 0; rep < kRepeats; ++rep) {
        QVERIFY(second[rep].toDouble() > 0);
        ratios.push_back(first[rep].toDouble() / second[rep].toDouble());
      }
      std::sort(ratios.begin(), ratios.end());
      QCOMPARE(control["speedup_over_none"].toDouble(), ratios[kRepeats / 2]);
      QCOMPARE(control["speedup_over_none_low"].toDouble(), ratios.front());
      QCOMPARE(control["speedup_over_none_high"].toDouble(), ratios.back());
      QCOMPARE(rows[3 * n + 2].toObject()["policy"].toString(), QString("fixed:2"));
    }
  }

  // --simulate runs no forward: one row per (alpha, N, drafter, policy), the predicted
  // speed-up the median of the seeds' and between their lowest and highest; with every
  // draft token kept, fixed:3 takes a step for every 4 tokens (the last steps fewer) and
  // drafts 3 per step; with none kept every policy takes a step per token, as plain
  // decoding does, and gains nothing (fixed:3 drafting 3 until the length limit leaves room
  // for fewer). A model drafter's prefill is not simulated: --simulate refuses it.
  void simulateRunsTheGridOnTheCostModel() {
    const CliRun run = run_cli({"bench-spec", "--random", "tiny", "--threads", "1", "--n", "1,4", "--drafters",
                                "ngram,layers:1", "--policies", "fixed:3,goodput", "--alpha", "1,0", "--max-tokens",
                                "33", "--repeats", "3", "--simulate", "--json"});
    QVERIFY2(run.code == 0, run.err.constData());
    const QJsonArray rows = QJsonDocument::fromJson(run.out).array();
    QCOMPARE(rows.size(), 2 * 2 * 2 * 2);
    for (const QJsonValue& value : rows) {
      const QJsonObject row = value.toObject();
      QCOMPARE(row["mode"].toString(), QString("simulated"));
      const double speedup = row["predicted_speedup_over_none"].toDouble();
      QVERIFY(row["predicted_speedup_over_none_low"].toDouble() <= speedup);
      QVERIFY(speedup <= row["predicted_speedup_over_none_high"].toDouble());
      const bool all_kept = row["alpha"].toDouble() == 1.0;
      if (!all_kept) {  // nothing kept: no step saved, whatever the policy drafted
        QCOMPARE(row["steps_per_token"].toDouble(), 1.0);
        QCOMPARE(row["acceptance"].toDouble(), 0.0);
        QVERIFY(speedup <= 1.0);
      }
      if (row["policy"].toString() != "fixed:3") continue;
      QCOMPARE(row["steps_per_token"].toDouble(), all_kept ? 8.0 / 32 : 1.0);  // 32 tokens after the prefill's
      QCOMPARE(row["acceptance"].toDouble(), all_kept ? 1.0 : 0.0);
      QCOMPARE(row["drafted_per_token"].toDouble(), all_kept ? 24.0 / 32 : (29 * 3 + 2 + 1) / 32.0);
    }
  }

  void badArgumentsFailCleanly() {
    const CliRun none = run_cli({"bench-spec"});
    QCOMPARE(none.code, 2);
    QVERIFY(none.err.contains("-m MODEL or --random SHAPE"));
    const CliRun simd = run_cli({"bench-spec", "--random", "tiny", "--simd", "avx512", "--device", "cuda"});
    QCOMPARE(simd.code, 2);
    QVERIFY(simd.err.contains("--simd"));
    const CliRun simulate = run_cli({"bench-spec", "--random", "tiny", "--simulate"});
    QCOMPARE(simulate.code, 2);
    QVERIFY(simulate.err.contains("--alpha"));
    const CliRun model = run_cli({"bench-spec", "--random", "tiny", "--simulate", "--alpha", "0.7", "--drafters", "model"});
    QCOMPARE(model.code, 2);
    QVERIFY(model.err.contains("'model'"));
    const CliRun control = run_cli({"bench-spec", "--random", "tiny", "--simulate", "--alpha", "0.7", "--control"});
    QCOMPARE(control.code, 2);
    QVERIFY(control.err.contains("--control"));
  }
};

QTEST_GUILESS_MAIN(TestCliBench)
#include "test_cli_bench.moc"
