// Best of N for the editor (serve/suggestions.h). The ranking itself on controlled
// candidates in the real sandbox: one whose filled code does not compile ranks below one that
// does, though it is likelier; past the deadline the order is likelihood's and says so; the
// Python test, the hole's function and the cost rule of the CPU default. Then `specula-cli serve
// --suggestions 4` on the demo pair over real HTTP on loopback: `content` is the first of
// `candidates`, which hold all four best first with their checks; n_cmpl and n answer in
// llama.cpp's shape (an array, best first); response_fields still select; a client that hangs
// up mid-request is cancelled; and no KV block is left held.
#include <QtTest>

#include <thread>

#include "eval/sandbox.h"
#include "eval/test_runner.h"
#include "serve/suggestions.h"
#include "llama_vim.h"
#include "serve_process.h"

using namespace specula;
using namespace specula::serve;
using namespace specula::test;
using nlohmann::json;

namespace {

const char* kJson = "application/json";

// A hole on the line inside `mean`'s loop.
const std::string kLoopPrefix =
    "def mean(values):\n"
    "    \"\"\"Return the arithmetic mean of a non-empty list of numbers.\"\"\"\n"
    "    total = 0\n"
    "    for v in values:\n";
const std::string kLoopSuffix = "    return total / len(values)\n";

// The same file as llama.vim cuts it, the cursor on the empty line of mean's body.
json infill_request() {
  return {{"input_prefix", "def mean(values):\n    \"\"\"Return the arithmetic mean of a list of numbers.\"\"\"\n    total = 0\n"},
          {"input_suffix", "\n    return total / len(values)\n"},
          {"prompt", ""},
          {"n_predict", 48},
          {"top_k", 40},
          {"top_p", 0.90},
          {"samplers", {"top_k", "top_p", "infill"}},
          {"seed", 7},
          {"t_max_predict_ms", 5000}};
}

TestClock::time_point seconds_from_now(double seconds) {
  return TestClock::now() + std::chrono::duration_cast<TestClock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

class TestServeSuggestions : public QObject {
  Q_OBJECT

  std::unique_ptr<Sandbox> sandbox;
  std::unique_ptr<TestRunner> runner;
  std::unique_ptr<ServeProcess> demo;  // --suggestions 4

 private slots:
  void initTestCase() {
    try {
      sandbox = std::make_unique<Sandbox>();
    } catch (const SandboxError& e) {
      QSKIP(qPrintable(QString("no Python for the sandbox: ") + e.what()));
    }
    runner = std::make_unique<TestRunner>(*sandbox, SandboxLimits{}, 2);
    demo = std::make_unique<ServeProcess>(
        QStringList{"--device", "cpu", "--suggestions", "4", "--max-queue", "4"});
    QVERIFY2(demo->started(), qPrintable(demo->errors()));
  }

  void uncompilableCandidateRanksBelowOneThatCompiles() {
    const SuggestionInput input{.prefix = kLoopPrefix,
                                .suffix = kLoopSuffix,
                                .candidates = {{.text = "        total += (v\n", .mean_logprob = -0.1},
                                               {.text = "        total += v\n", .mean_logprob = -2.0}}};
    const RankedSuggestions r = rank_suggestions(input, runner.get(), seconds_from_now(30));
    QCOMPARE(r.ranked_by, std::string("checks"));
    QVERIFY2(r.note.empty(), r.note.c_str());
    QCOMPARE(r.order, (std::vector<int>{1, 0}));
    QVERIFY(r.verdicts[0].checked && r.verdicts[1].checked);
    QCOMPARE(r.verdicts[0].checks.failure, CheckFailure::Syntax);
    QVERIFY2(r.verdicts[1].checks.passed(), r.verdicts[1].checks.reason.c_str());
    // without the checks, likelihood alone puts the broken one first
    const RankedSuggestions unchecked = rank_suggestions(input, nullptr, seconds_from_now(30));
    QCOMPARE(unchecked.ranked_by, std::string("likelihood"));
    QCOMPARE(unchecked.order, (std::vector<int>{0, 1}));
    QVERIFY(!unchecked.note.empty());
  }

  void checksPastTheDeadlineFallBackToLikelihood() {
    const SuggestionInput input{.prefix = kLoopPrefix,
                                .suffix = kLoopSuffix,
                                .candidates = {{.text = "        total += (v\n", .mean_logprob = -0.1},
                                               {.text = "        total += v\n", .mean_logprob = -2.0}}};
    const RankedSuggestions r = rank_suggestions(input, runner.get(), seconds_from_now(-1));
    QCOMPARE(r.ranked_by, std::string("likelihood"));
    QCOMPARE(r.order, (std::vector<int>{0, 1}));
    QVERIFY(r.note.find("time limit") != std::string::npos);
    QVERIFY(!r.verdicts[0].checked && !r.verdicts[1].checked);
    const json j = ranking_json(r, input);
    QCOMPARE(j["ranked_by"].get<std::string>(), std::string("likelihood"));
    QVERIFY(j["ranking_note"].is_string());
    QCOMPARE(j["candidates"][0]["index"].get<int>(), 0);
    QCOMPARE(j["candidates"][0]["checks"]["checked"].get<bool>(), false);
  }

  void abandonedRankingReturnsAtOnce() {
    const SuggestionInput input{.prefix = kLoopPrefix,
                                .suffix = kLoopSuffix,
                                .candidates = {{.text = "        total += v\n", .mean_logprob = -1.0},
                                               {.text = "        total -= v\n", .mean_logprob = -0.5}}};
    const RankedSuggestions r = rank_suggestions(input, runner.get(), seconds_from_now(30), [] { return true; });
    QCOMPARE(r.ranked_by, std::string("likelihood"));
    QVERIFY(r.note.find("went away") != std::string::npos);
  }

  void identicalTextsAreCountedTogether() {
    const SuggestionInput input{.prefix = "", .suffix = "", .candidates = {{"a", -1.0}, {"b", -2.0}, {"a  \n", -3.0}}};
    const RankedSuggestions r = rank_suggestions(input, runner.get(), seconds_from_now(30));
    QCOMPARE(r.ranked_by, std::string("likelihood"));  // not Python: never sent to the sandbox
    QCOMPARE(r.verdicts[0].agreement, 2);
    QCOMPARE(r.verdicts[1].agreement, 1);
    QCOMPARE(r.verdicts[2].agreement, 2);
  }

  void pythonIsRecognised() {
    QVERIFY(looks_like_python("import os\n"));
    QVERIFY(looks_like_python("x = 1\ndef f(a):\n    return a\n"));
    QVERIFY(looks_like_python("from a import b\n"));
    QVERIFY(!looks_like_python("int main() {\n  return 0;\n}\n"));
    QVERIFY(!looks_like_python("function f(a) {\n  return a;\n}\n"));
    QCOMPARE(hole_function("def a(x):\n    pass\n\n\ndef mean(values):\n    total = 0\n"), std::string("mean"));
    QCOMPARE(hole_function("x = 1\n"), std::string());
  }

  void cpuDefaultFollowsTheCostModel() {
    ForwardCost cost;
    cost.n_layers = 1;
    cost.tokens = {1, 8, 32};
    cost.layer_seconds = {1.0, 1.0, 4.0};  // flat to 8 tokens, then a quarter more for 10
    cost.head_seconds = {0.0, 0.0, 0.0};
    // a step verifies 5 tokens per sequence: 1.0 s for one, 1.25 s for two, 1.875 s for three
    QCOMPARE(suggestions_for_cost(cost, nullptr), 2);
    QCOMPARE(suggestions_for_cost(cost, nullptr, 8, 2.0), 3);
    QCOMPARE(suggestions_for_cost(cost, nullptr, 8, 1.0), 1);
    cost.layer_seconds = {1.0, 1.0, 1.0};  // flat: as many as allowed
    QCOMPARE(suggestions_for_cost(cost, nullptr, 5), 5);
    QCOMPARE(decoded_candidates(1, 4, false, 64), 4);
    QCOMPARE(decoded_candidates(6, 4, false, 64), 6);
    QCOMPARE(decoded_candidates(1, 4, true, 64), 1);  // a stream is not ranked
    QCOMPARE(generation_limit_ms(1000, true), 750LL);
    QCOMPARE(generation_limit_ms(2000, true), 1700LL);
    QCOMPARE(generation_limit_ms(1000, false), 1000LL);
  }

  void contentIsTheBestCandidate() {
    int status = 0;
    const json r = post_json(demo->port(), "/infill", infill_request(), &status);
    QCOMPARE(status, 200);
    QVERIFY2(r.is_object() && r["candidates"].is_array(), r.dump().c_str());
    const json& candidates = r["candidates"];
    QCOMPARE(int(candidates.size()), 4);
    QCOMPARE(r["content"], candidates[0]["content"]);
    QCOMPARE(r["index"].get<int>(), 0);
    std::vector<int> indices;
    for (const json& c : candidates) indices.push_back(c["index"].get<int>());
    std::sort(indices.begin(), indices.end());
    QCOMPARE(indices, (std::vector<int>{0, 1, 2, 3}));
    const std::string by = r["ranked_by"].get<std::string>();
    QVERIFY2(by == "checks", r.dump().c_str());  // 5 s is ample for four checks
    // the ranking's first rule: none whose checks passed comes after one whose checks failed
    bool failed_seen = false;
    for (const json& c : candidates) {
      const bool passed = c["checks"]["result"] == "passed";
      QVERIFY2(!(passed && failed_seen), r.dump().c_str());
      failed_seen |= !passed;
    }
  }

  void responseFieldsStillSelect() {
    json request = infill_request();
    request["response_fields"] = {"content", "timings/predicted_n"};
    const json r = post_json(demo->port(), "/infill", request);
    QCOMPARE(int(r.size()), 2);
    QVERIFY(r["content"].is_string());
    QVERIFY(r["timings/predicted_n"].is_number_integer());
    request["response_fields"] = {"content", "candidates"};
    const json with = post_json(demo->port(), "/infill", request);
    QCOMPARE(with["content"], with["candidates"][0]["content"]);
  }

  void severalCompletionsInLlamaCppsShape() {
    json request = infill_request();
    request["n_cmpl"] = 2;
    const json r = post_json(demo->port(), "/infill", request);
    QVERIFY2(r.is_array() && r.size() == 2, r.dump().c_str());
    for (int i = 0; i < 2; ++i) {
      QCOMPARE(r[i]["index"].get<int>(), i);
      QVERIFY(r[i]["content"].is_string());
      QCOMPARE(r[i]["stop"].get<bool>(), true);
    }
    QCOMPARE(int(r[0]["candidates"].size()), 4);  // the best two of four
    QCOMPARE(r[0]["content"], r[0]["candidates"][0]["content"]);
    QCOMPARE(r[1]["content"], r[0]["candidates"][1]["content"]);
    QVERIFY(!r[1].contains("candidates"));
    const json c = post_json(demo->port(), "/completion", {{"prompt", "def add(a, b):\n"}, {"n", 3}, {"n_predict", 16}, {"seed", 3}});
    QVERIFY2(c.is_array() && c.size() == 3, c.dump().c_str());
    QCOMPARE(int(c[0]["candidates"].size()), 4);
    for (int i = 0; i < 3; ++i) QCOMPARE(c[i]["content"], c[0]["candidates"][i]["content"]);
  }

  void clientThatHangsUpIsCancelled() {
    const json before = health(demo->port());
    {
      httplib::Client client("127.0.0.1", demo->port());
      client.set_read_timeout(0, 200000);  // gives up long before 16 completions of the whole context
      client.Post("/infill", json{{"input_prefix", "def f"}, {"n_predict", -1}, {"n_cmpl", 16}, {"seed", 1}}.dump(), kJson);
    }
    QTRY_VERIFY_WITH_TIMEOUT(health(demo->port())["cancelled"].get<int>() > before["cancelled"].get<int>(), 120000);
    QTRY_VERIFY_WITH_TIMEOUT(!health(demo->port())["generating"].get<bool>(), 60000);
    // the server goes on answering
    int status = 0;
    post_json(demo->port(), "/infill", infill_request(), &status);
    QCOMPARE(status, 200);
  }

  void cleanupTestCase() {
    if (!demo) return;
    const json h = health(demo->port());
    QCOMPARE(h["failed"].get<int>(), 0);
    QCOMPARE(h["kv_blocks_left"].get<int>(), 0);  // every session released its cache blocks
    QVERIFY(demo->stopsCleanly());
  }
};

QTEST_GUILESS_MAIN(TestServeSuggestions)
#include "test_serve_suggestions.moc"
