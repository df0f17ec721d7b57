// `specula-cli serve`'s prompt cache across requests, over real HTTP on loopback, on the demo
// pair, against a second server started without it (--prompt-cache-blocks 0): llama.vim's
// /infill request made twice reports tokens_cached > 0 the second time, prompt_n only the
// tokens computed, and the same text; a /completion prompt that extends a kept one gives the
// same tokens and log-probabilities at T = 0 as the server without the cache, and so do the
// OpenAI endpoints (usage.prompt_tokens_details.cached_tokens); cache_prompt false reads
// nothing; n_predict 0 warms the cache; /health shows its size. Hostile: many distinct
// prompts through a small cache (bounded, no block left held), clients that hang up
// mid-request, 50 requests in a burst (every one answered).
#include <QtTest>

#include <atomic>
#include <thread>

#include "llama_vim.h"
#include "serve_process.h"

using namespace specula::test;
using nlohmann::json;

namespace {

const char* kJson = "application/json";

// llama.vim's llama#fim request (as tests/test_serve_editor.cpp replays it), made greedy.
json llama_vim_greedy() { return greedy(llama_vim_request()); }

// A Python file of a few hundred tokens; `i` makes its first line differ.
std::string code(int i) {
  std::string text = "# module " + std::to_string(i) + "\nimport math\n\n\n";
  for (const char* name : {"mean", "total", "largest", "smallest"}) {
    text += std::string("def ") + name + "(values):\n    \"\"\"Return the " + name + " of a list.\"\"\"\n";
    text += "    result = 0\n    for value in values:\n        result = result + value\n    return result\n\n\n";
  }
  return text;
}

json greedy_completion(const std::string& prompt) {
  return {{"prompt", prompt}, {"n_predict", 24}, {"temperature", 0}, {"n_probs", 1}};
}

// The tokens and log-probabilities of a /completion answer.
std::pair<std::vector<int>, std::vector<double>> tokens_of(const json& answer) {
  std::pair<std::vector<int>, std::vector<double>> out;
  for (const json& p : answer["completion_probabilities"]) {
    out.first.push_back(p["id"].get<int>());
    out.second.push_back(p["logprob"].get<double>());
  }
  return out;
}

}  // namespace

class TestServePromptCache : public QObject {
  Q_OBJECT

  std::unique_ptr<ServeProcess> cached;  // the default prompt cache
  std::unique_ptr<ServeProcess> plain;   // --prompt-cache-blocks 0

 private slots:
  void initTestCase() {
    cached = std::make_unique<ServeProcess>(QStringList{"--device", "cpu", "--max-queue", "64"});
    QVERIFY2(cached->started(), qPrintable(cached->errors()));
    plain = std::make_unique<ServeProcess>(
        QStringList{"--device", "cpu", "--prompt-cache-blocks", "0"});
    QVERIFY2(plain->started(), qPrintable(plain->errors()));
  }

  void healthShowsTheCache() {
    const json h = health(cached->port());
    QVERIFY2(h["prompt_cache"]["max_blocks"].get<int>() > 0, h.dump().c_str());
    QVERIFY(h["prompt_cache"]["blocks"].is_number_integer());
    QVERIFY(h["prompt_cache"]["tokens"].is_number_integer());
    QCOMPARE(health(plain->port())["prompt_cache"]["max_blocks"].get<int>(), 0);
  }

  // The acceptance: the second identical request reports tokens_cached > 0 and
  // returns the same text at T = 0; prompt_n counts only the tokens computed.
  void llamaVimsRequestTwice() {
    int status = 0;
    const json first = post_json(cached->port(), "/infill", llama_vim_greedy(), &status);
    QCOMPARE(status, 200);
    const json second = post_json(cached->port(), "/infill", llama_vim_greedy(), &status);
    QCOMPARE(status, 200);
    QVERIFY2(second["tokens_cached"].get<int>() > 0, second.dump().c_str());
    QCOMPARE(second["timings/prompt_n"].get<int>() + second["tokens_cached"].get<int>(),
             first["timings/prompt_n"].get<int>() + first["tokens_cached"].get<int>());
    QVERIFY(second["timings/prompt_n"].get<int>() >= 1);
    QVERIFY(!first["content"].get<std::string>().empty());
    QCOMPARE(second["content"], first["content"]);
    const json uncached = post_json(plain->port(), "/infill", llama_vim_greedy(), &status);
    QCOMPARE(uncached["tokens_cached"].get<int>(), 0);
    QCOMPARE(uncached["content"], first["content"]);
    const json h = health(cached->port());
    QVERIFY(h["prompt_cache"]["blocks"].get<int>() > 0);
    QVERIFY(h["prompt_cache"]["tokens"].get<int>() >= second["tokens_cached"].get<int>() / 16 * 16);
  }

  // A prompt that extends a kept one starts from it, and its tokens and log-probabilities are
  // those of the server without a cache, bit for bit (JSON keeps a double's digits).
  void extendedPromptIsExact() {
    int status = 0;
    post_json(cached->port(), "/completion", greedy_completion(code(1)), &status);
    QCOMPARE(status, 200);
    const std::string longer = code(1) + "def variance(values):\n    m = mean(values)\n";
    const json a = post_json(cached->port(), "/completion", greedy_completion(longer), &status);
    QCOMPARE(status, 200);
    const json b = post_json(plain->port(), "/completion", greedy_completion(longer), &status);
    QCOMPARE(status, 200);
    QVERIFY2(a["tokens_cached"].get<int>() > 64, a.dump().c_str());
    QCOMPARE(a["timings"]["cache_n"], a["tokens_cached"]);
    QCOMPARE(a["timings"]["prompt_n"].get<int>(), a["tokens_evaluated"].get<int>() - a["tokens_cached"].get<int>());
    QCOMPARE(b["tokens_cached"].get<int>(), 0);
    QCOMPARE(a["content"], b["content"]);
    const auto [ta, la] = tokens_of(a);
    const auto [tb, lb] = tokens_of(b);
    QVERIFY(!ta.empty());
    QCOMPARE(ta, tb);
    QCOMPARE(la, lb);
  }

  void openAiEndpointsUseItToo() {
    const json body = {{"prompt", code(2)}, {"max_tokens", 16}, {"temperature", 0}};
    int status = 0;
    post_json(cached->port(), "/v1/completions", body, &status);
    QCOMPARE(status, 200);
    const json again = post_json(cached->port(), "/v1/completions", body, &status);
    QCOMPARE(status, 200);
    QVERIFY2(again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() > 0, again.dump().c_str());
    const json uncached = post_json(plain->port(), "/v1/completions", body, &status);
    QCOMPARE(uncached["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
    QCOMPARE(again["choices"][0]["text"], uncached["choices"][0]["text"]);
  }

  void cachePromptFalseReadsNothing() {
    json body = greedy_completion(code(3));
    int status = 0;
    post_json(cached->port(), "/completion", body, &status);
    body["cache_prompt"] = false;
    const json r = post_json(cached->port(), "/completion", body, &status);
    QCOMPARE(status, 200);
    QCOMPARE(r["tokens_cached"].get<int>(), 0);
    QCOMPARE(r["timings"]["prompt_n"], r["tokens_evaluated"]);
  }

  // llama.vim sends n_predict 0 to have the server prefill a prompt for later requests.
  void promptOnlyRequestWarmsTheCache() {
    json body = greedy_completion(code(4));
    body["n_predict"] = 0;
    int status = 0;
    const json warm = post_json(cached->port(), "/completion", body, &status);
    QCOMPARE(status, 200);
    QCOMPARE(warm["content"].get<std::string>(), std::string());
    QCOMPARE(warm["tokens_predicted"].get<int>(), 0);
    const json r = post_json(cached->port(), "/completion", greedy_completion(code(4)), &status);
    QCOMPARE(status, 200);
    QVERIFY2(r["tokens_cached"].get<int>() > 0, r.dump().c_str());
  }

  // Many distinct prompts through a cache of 12 blocks: never more held, and every session's
  // own blocks released.
  void evictionUnderManyPrompts() {
    ServeProcess small(QStringList{"--device", "cpu", "--prompt-cache-blocks", "12"});
    QVERIFY2(small.started(), qPrintable(small.errors()));
    for (int i = 0; i < 30; ++i) {
      int status = 0;
      post_json(small.port(), "/completion", {{"prompt", code(100 + i)}, {"n_predict", 2}}, &status);
      QCOMPARE(status, 200);
      const json h = health(small.port());
      QVERIFY2(h["prompt_cache"]["blocks"].get<int>() <= 12, h.dump().c_str());
    }
    const json h = health(small.port());
    QCOMPARE(h["prompt_cache"]["max_blocks"].get<int>(), 12);
    QVERIFY(h["prompt_cache"]["blocks"].get<int>() > 0);
    QCOMPARE(h["kv_blocks_left"].get<int>(), 0);
    QCOMPARE(h["failed"].get<int>(), 0);
    // the newest prompt is still there
    int status = 0;
    const json r = post_json(small.port(), "/completion", {{"prompt", code(129)}, {"n_predict", 2}}, &status);
    QVERIFY(r["tokens_cached"].get<int>() > 0);
    QVERIFY(small.stopsCleanly());
  }

  void clientsThatHangUp() {
    const json before = health(cached->port());
    std::vector<std::thread> clients;
    for (int i = 0; i < 3; ++i) {
      clients.emplace_back([&, i] {
        httplib::Client client("127.0.0.1", cached->port());
        client.set_read_timeout(0, 200000);  // gives up long before 16 completions of the whole context
        client.Post("/completion", json{{"prompt", code(200 + i)}, {"n_predict", -1}, {"n_cmpl", 16}}.dump(), kJson);
      });
    }
    for (auto& t : clients) t.join();
    QTRY_VERIFY_WITH_TIMEOUT(health(cached->port())["completed"].get<int>() +
                                     health(cached->port())["cancelled"].get<int>() - before["completed"].get<int>() -
                                     before["cancelled"].get<int>() ==
                                 3,
                             120000);
    QTRY_VERIFY_WITH_TIMEOUT(!health(cached->port())["generating"].get<bool>(), 60000);
    QCOMPARE(health(cached->port())["kv_blocks_left"].get<int>(), 0);
    // the cache still answers exactly
    int status = 0;
    const json a = post_json(cached->port(), "/completion", greedy_completion(code(200)), &status);
    QCOMPARE(status, 200);
    QCOMPARE(a["content"], post_json(plain->port(), "/completion", greedy_completion(code(200)), &status)["content"]);
  }

  // An editor's 50 requests at once, each a keystroke longer: every one answered.
  void burstOfFifty() {
    std::atomic<int> ok{0};
    std::vector<std::thread> clients;
    const std::string prefix = code(300);
    for (int i = 0; i < 50; ++i) {
      clients.emplace_back([&, i] {
        json r = llama_vim_greedy();
        r["input_prefix"] = prefix + std::string(static_cast<size_t>(i % 10), 'x');
        r["n_predict"] = 4;
        int status = 0;
        const json answer = post_json(cached->port(), "/infill", r, &status);
        if (status == 200 && answer["content"].is_string()) ++ok;
      });
    }
    for (auto& t : clients) t.join();
    QCOMPARE(ok.load(), 50);
    const json h = health(cached->port());
    QCOMPARE(h["kv_blocks_left"].get<int>(), 0);
    QVERIFY(h["prompt_cache"]["blocks"].get<int>() <= h["prompt_cache"]["max_blocks"].get<int>());
    QVERIFY(h["prompt_cache"]["hits"].get<int>() >= 40);
  }

  void cleanupTestCase() {
    for (auto* server : {cached.get(), plain.get()}) {
      if (!server) continue;
      const json h = health(server->port());
      QVERIFY2(h.is_object(), qPrintable("the server is gone: " + server->errors()));
      QCOMPARE(h["failed"].get<int>(), 0);
      QCOMPARE(h["kv_blocks_left"].get<int>(), 0);
      QVERIFY(server->stopsCleanly());
    }
  }
};

QTEST_GUILESS_MAIN(TestServePromptCache)
#include "test_serve_prompt_cache.moc"
