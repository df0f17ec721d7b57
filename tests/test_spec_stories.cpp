// Batched speculative decoding on a real model (stories260K, llama2.c checkpoint) and the
// real CPU backend: every candidate of every drafter and policy (goodput on the cost model
// measured here) reproduces the reference C implementation's greedy text
// (shared/oracles/stories260K.md); sampled speculation keeps the distribution of sampling
// without it; prefix sharing; an incompatible draft model.
#include <QtTest>

#include <map>
#include <tuple>

#include "compute/backend.h"
#include "oracle_text.h"
#include "decode/session.h"
#include "shared_data.h"
#include "stats.h"
#include "model/tokenizer.h"

using namespace specula;
using namespace specula::test;

namespace {

struct Stories {
  std::shared_ptr<const Model> model;
  std::unique_ptr<Backend> backend = create_cpu_backend(1);  // one thread: exact and calm on a shared machine
};

// llama2.c's --steps: positions run, BOS and prompt included; steps + 1 tokens in all.
int new_tokens_for_steps(const Model& model, const std::string& prompt, int steps) {
  return steps + 1 - static_cast<int>(model.tokenizer->encode(prompt, true).size());
}

}  // namespace

class TestSpecStories : public QObject {
  Q_OBJECT

  Stories s;
  std::vector<std::string> oracle;

 private slots:
  void initTestCase() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    SPECULA_SHARED_FILE(md, "oracles/stories260K.md");
    LoadOptions o;
    o.tokenizer_path = tok;
    s.model = load_model(bin, o);
    oracle = oracle_text_blocks(md);
    QCOMPARE(oracle.size(), size_t{2});
  }

  // N = 8 candidates with greedy + layers:2 reproduce the reference output in every one.
  void eightCandidatesReproduceTheOracle() {
    if (!s.model) QSKIP("no model");
    struct Case { std::string prompt; int steps; const std::string& text; };
    for (const Case& c : {Case{"", 200, oracle[0]}, Case{"Zoo", 60, oracle[1]}}) {
      GenerationRequest r;
      r.prompt = c.prompt;
      r.allow_empty_prompt = true;
      r.n_candidates = 8;
      r.max_new_tokens = new_tokens_for_steps(*s.model, c.prompt, c.steps);
      r.draft.kind = "layers:2";
      r.draft.policy = "bass";
      const auto result = run_session(*s.backend, *s.model, r);
      for (const Candidate& cand : result.candidates) {
        QCOMPARE(QString::fromStdString(c.prompt + cand.text), QString::fromStdString(c.text));
        QCOMPARE(cand.finish, FinishReason::Length);
      }
      QVERIFY(result.totals.proposed > 0);
    }
  }

  // Greedy equivalence for every drafter and policy, N in {1, 3, 8, 16}, prompts of
  // several lengths: each candidate equals plain greedy decoding (N = 1, no draft), whose
  // text the oracle test above anchors to the reference implementation.
  void greedyEquivalenceEveryDrafterAndPolicy() {
    if (!s.model) QSKIP("no model");
    const std::vector<std::string> prompts{"Zoo", "Once upon a time, there was a", "The little dog saw a big red ball in the park. He wanted to"};
    const std::vector<std::pair<std::string, std::string>> configs{
        {"ngram", "fixed:3"}, {"ngram", "bass"}, {"layers:1", "adaptive"}, {"layers:2", "fixed:5"},
        {"layers:4", "bass"}, {"layers:5", "adaptive"}, {"model", "bass"}, {"model", "fixed:2"}};
    const std::vector<int> ns{1, 3, 8, 16};
    for (size_t p = 0; p < prompts.size(); ++p) {
      GenerationRequest plain;
      plain.prompt = prompts[p];
      plain.max_new_tokens = 48;
      const auto reference = run_session(*s.backend, *s.model, plain).candidates[0].tokens;
      for (size_t c = 0; c < configs.size(); ++c) {
        GenerationRequest r = plain;
        r.n_candidates = ns[(p + c) % ns.size()];  // every N meets every drafter across prompts
        r.draft.kind = configs[c].first;
        r.draft.policy = configs[c].second;
        if (r.draft.kind == "model") r.draft.draft_model = s.model;  // a compatible draft model
        const auto result = run_session(*s.backend, *s.model, r);
        for (const Candidate& cand : result.candidates) {
          QVERIFY2(cand.tokens == reference, qPrintable(QString("%1 %2 N=%3 prompt %4").arg(configs[c].first.c_str(), configs[c].second.c_str()).arg(r.n_candidates).arg(p)));
        }
      }
    }
  }

  // The same for the goodput policy on the cost model measured for this model and backend:
  // every drafter at every N (whatever lengths it picks, 0 included).
  void greedyEquivalenceGoodput() {
    if (!s.model) QSKIP("no model");
    GenerationRequest plain;
    plain.prompt = "Once upon a time, there was a";
    plain.max_new_tokens = 48;
    const auto reference = run_session(*s.backend, *s.model, plain).candidates[0].tokens;
    for (const std::string drafter : {"ngram", "layers:1", "layers:3", "model"}) {
      for (const int n : {1, 3, 8, 16}) {
        GenerationRequest r = plain;
        r.n_candidates = n;
        r.draft.kind = drafter;
        r.draft.policy = "goodput";
        if (drafter == "model") r.draft.draft_model = s.model;
        for (const Candidate& cand : run_session(*s.backend, *s.model, r).candidates) {
          QVERIFY2(cand.tokens == reference, qPrintable(QString("%1 goodput N=%2").arg(drafter.c_str()).arg(n)));
        }
      }
    }
  }

  // Sampled speculation follows the same law as sampling without it: the first three
  // tokens (each prefix's joint law) of many candidates, with a deliberately poor draft,
  // compared by a two-sample chi-square test (false alarm under 1e-4 per comparison).
  void samplingKeepsTheDistribution_data() {
    QTest::addColumn<float>("temperature");
    QTest::addColumn<float>("topP");
    QTest::addColumn<QString>("draft");
    // layers:2 of 5 is a poor draft (about a quarter of its tokens accepted here) whose law
    // still overlaps the target's, so a wrong rejection rule would show
    QTest::newRow("T=1 layers:2") << 1.0f << 1.0f << "layers:2";
    QTest::newRow("T=0.7 top-p 0.9 layers:2") << 0.7f << 0.9f << "layers:2";
  }
  void samplingKeepsTheDistribution() {
    if (!s.model) QSKIP("no model");
    QFETCH(float, temperature);
    QFETCH(float, topP);
    QFETCH(QString, draft);
    const auto collect = [&](const std::string& draft, uint64_t seed_base) {
      std::vector<std::map<std::vector<int>, double>> prefixes(3);
      int accepted = 0, proposed = 0;
      for (int run = 0; run < 120; ++run) {
        GenerationRequest r;
        r.prompt = "The cat";  // many likely continuations
        r.n_candidates = kMaxCandidates;
        r.max_new_tokens = 3;
        r.sampling = SamplingParams{temperature, 0, topP, 0.0f, seed_base + static_cast<uint64_t>(run) * kMaxCandidates};
        r.draft.kind = draft;
        r.draft.policy = "fixed:3";
        const auto result = run_session(*s.backend, *s.model, r);
        for (const Candidate& c : result.candidates) {
          if (c.tokens.size() < 3) continue;  // an EOS among the first three
          for (size_t j = 0; j < 3; ++j) prefixes[j][std::vector<int>(c.tokens.begin(), c.tokens.begin() + j + 1)] += 1;
          accepted += c.accepted;
          proposed += c.proposed;
        }
      }
      return std::make_tuple(prefixes, accepted, proposed);
    };
    // different seeds on the two sides: the samples are independent
    const auto [plain, a0, p0] = collect("none", 1);
    const auto [spec, a1, p1] = collect(draft.toStdString(), 1u << 30);
    QCOMPARE(p0, 0);
    QVERIFY(p1 > 0 && a1 < p1);  // the draft is poor: rejections happen
    for (size_t j = 0; j < 3; ++j) {
      const auto [stat, df] = chi2_two_sample(plain[j], spec[j]);
      qInfo("prefix of %zu tokens: chi2 %.1f with %d df, acceptance %.2f", j + 1, stat, df, double(a1) / p1);
      if (df == 0) {  // one outcome only (a near-certain token): both sides must agree on it
        QCOMPARE(plain[j].size(), size_t{1});
        QCOMPARE(spec[j].size(), size_t{1});
        QCOMPARE(plain[j].begin()->first, spec[j].begin()->first);
        continue;
      }
      QVERIFY2(stat < chi2_critical(df, kZ1e4),
               qPrintable(QString("prefix of %1 tokens: chi2 %2 with %3 df (critical %4)").arg(j + 1).arg(stat).arg(df).arg(chi2_critical(df, kZ1e4))));
    }
  }

  // The prompt runs through the target once for all N candidates, and they share its blocks.
  void promptPrefilledOnceAndShared() {
    if (!s.model) QSKIP("no model");
    GenerationRequest r;
    r.prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends.";
    r.n_candidates = 8;
    r.max_new_tokens = 10;
    const auto shared = run_session(*s.backend, *s.model, r);
    const int prompt_tokens = shared.totals.prompt_tokens;
    QVERIFY(prompt_tokens > 16);
    QCOMPARE(shared.totals.target_tokens, prompt_tokens + 8 * 9);
    r.n_candidates = 1;
    const auto single = run_session(*s.backend, *s.model, r);
    QVERIFY2(shared.totals.peak_blocks < 8 * single.totals.peak_blocks,
             qPrintable(QString("%1 vs %2").arg(shared.totals.peak_blocks).arg(8 * single.totals.peak_blocks)));
  }

  void incompatibleDraftModel() {
    if (!s.model) QSKIP("no model");
    SPECULA_SHARED_FILE(hf, "models/tinystories656k/config.json");
    const auto other = load_model(QFileInfo(QString::fromStdString(hf)).absolutePath().toStdString());
    GenerationRequest r;
    r.prompt = "Zoo";
    r.n_candidates = 2;
    r.draft.kind = "model";
    r.draft.draft_model = other;
    try {
      run_session(*s.backend, *s.model, r);
      QFAIL("an incompatible draft model was accepted");
    } catch (const std::invalid_argument& e) {
      QVERIFY2(QString(e.what()).contains("incompatible"), e.what());
    }
  }
};

QTEST_GUILESS_MAIN(TestSpecStories)
#include "test_spec_stories.moc"
