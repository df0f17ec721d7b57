// The prompt cache across requests (decode/prompt_cache.h) on the demo pair and the CPU
// backend: a repeated prompt, a prompt that extends a kept one, one that leaves it within a
// block (copy-on-write) and several candidates sampled at T > 0 give the same tokens and
// log-probabilities, bit for bit, as a generator without the cache, while prefilling only the
// rest; the rest's prefill leaves the same keys and values as a whole prefill (the logits of
// its rows and of a token after it are the same bits); the least recently used prompts go
// first and the kept blocks never pass the bound; no block is left held by a session;
// cache_prompt false neither reads nor keeps; max_new_tokens 0 prefills for the cache alone.
#include <QtTest>

#include <cstring>

#include "decode/generator.h"
#include "decode/prompt_cache.h"
#include "model/demo_models.h"
#include "model/tokenizer.h"

using namespace specula;

namespace {

struct Pair {
  std::shared_ptr<const Model> target, draft;
};

Pair demo_pair() {
  const auto paths = find_demo_models(SPECULA_SOURCE_DIR);
  if (!paths || paths->draft.empty()) return {};
  return {load_model(paths->target), load_model(paths->draft)};
}

// A Python file of some 300 tokens for the demo tokenizer.
std::string code_prompt_text() {
  std::string text = "import math\n\n\n";
  for (const char* name : {"mean", "total", "largest", "smallest", "middle"}) {
    text += std::string("def ") + name + "(values):\n    \"\"\"Return the " + name + " of a list of numbers.\"\"\"\n";
    text += "    result = 0\n    for value in values:\n        result = result + value\n    return result\n\n\n";
  }
  return text + "def variance(values):\n";
}

GenerationRequest request(std::vector<int> ids, int n = 1, float temperature = 0.0f) {
  GenerationRequest r;
  r.prompt_ids = std::move(ids);
  r.n_candidates = n;
  r.max_new_tokens = 24;
  r.sampling.temperature = temperature;
  r.sampling.seed = 7;
  r.draft.kind = "model";
  r.draft.policy = "fixed:4";  // the goodput policy learns from step times: sampled drafts would vary run to run
  r.cache_prompt = true;
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The candidates' tokens and log-probabilities, bit for bit.
void compare(const SessionResult& cached, const SessionResult& plain) {
  QCOMPARE(cached.candidates.size(), plain.candidates.size());
  for (size_t i = 0; i < plain.candidates.size(); ++i) {
    QCOMPARE(cached.candidates[i].tokens, plain.candidates[i].tokens);
    QVERIFY(same_bits(cached.candidates[i].logprobs, plain.candidates[i].logprobs));
    QCOMPARE(cached.candidates[i].text, plain.candidates[i].text);
  }
}

// Logits of every row of `tokens` run after `start` (a sequence of `cache`).
std::vector<float> forward_all(Backend& backend, const Model& model, KvCache& cache, int seq,
                               std::span<const int> tokens) {
  RaggedBatch batch;
  batch.add(seq, tokens, true);
  std::vector<float> logits;
  backend.forward(model, cache, batch, logits);
  return logits;
}

}  // namespace

class TestPromptCache : public QObject {
  Q_OBJECT

  Pair pair;
  std::vector<int> prompt;  // code_prompt_text's ids
  std::unique_ptr<LocalGenerator> cached, plain;

 private slots:
  void initTestCase() {
    pair = demo_pair();
    QVERIFY2(pair.target && pair.draft, "the demo pair (resources/models) is missing");
    prompt = pair.target->tokenizer->encode(code_prompt_text(), true);
    QVERIFY(prompt.size() > 200);
    cached = std::make_unique<LocalGenerator>(create_cpu_backend(1), pair.target, pair.draft);
    plain = std::make_unique<LocalGenerator>(create_cpu_backend(1), pair.target, pair.draft);
    cached->enable_prompt_cache(256);
  }

  void repeatedPromptIsReusedAndExact() {
    const SessionResult first = cached->generate(request(prompt));
    QCOMPARE(first.totals.cached_tokens, 0);
    QCOMPARE(first.totals.kv_blocks_left, 0);
    const SessionResult second = cached->generate(request(prompt));
    // every whole block but the last token's: the kept blocks, and within the last one none
    const int whole = static_cast<int>(prompt.size()) / 16 * 16;
    QCOMPARE(second.totals.cached_tokens, std::min(whole, static_cast<int>(prompt.size()) - 1));
    QCOMPARE(second.totals.prompt_tokens, static_cast<int>(prompt.size()));
    QCOMPARE(second.totals.target_tokens - first.totals.target_tokens, -second.totals.cached_tokens);
    QCOMPARE(second.totals.kv_blocks_left, 0);
    compare(second, plain->generate(request(prompt)));
    compare(first, second);
  }

  void extendedPromptStartsFromTheKeptOne() {
    std::vector<int> longer = prompt;
    const auto more = pair.target->tokenizer->encode("    m = mean(values)\n    return sum((v - m) ** 2 for v", false);
    longer.insert(longer.end(), more.begin(), more.end());
    cached->generate(request(prompt));
    const SessionResult r = cached->generate(request(longer));
    QVERIFY(r.totals.cached_tokens >= static_cast<int>(prompt.size()) / 16 * 16);
    QVERIFY(r.totals.cached_tokens < static_cast<int>(longer.size()));
    compare(r, plain->generate(request(longer)));
  }

  // A prompt that leaves the kept one 5 tokens into a block starts from the block's first
  // 5 positions, which the session copies before writing its own.
  void promptThatLeavesWithinABlock() {
    cached->generate(request(prompt));
    std::vector<int> other(prompt.begin(), prompt.begin() + 16 * 6 + 5);
    const auto tail = pair.target->tokenizer->encode("def product(values):\n    result = 1\n", false);
    other.insert(other.end(), tail.begin(), tail.end());
    QVERIFY(other[16 * 6 + 5] != prompt[16 * 6 + 5]);
    const SessionResult r = cached->generate(request(other));
    QCOMPARE(r.totals.cached_tokens, 16 * 6 + 5);
    QCOMPARE(r.totals.kv_blocks_left, 0);
    compare(r, plain->generate(request(other)));
  }

  void sampledCandidatesAreTheSame() {
    std::vector<int> longer = prompt;
    const auto more = pair.target->tokenizer->encode("    total = 0\n", false);
    longer.insert(longer.end(), more.begin(), more.end());
    cached->generate(request(prompt, 4, 0.8f));
    const SessionResult r = cached->generate(request(longer, 4, 0.8f));
    QVERIFY(r.totals.cached_tokens > 0);
    compare(r, plain->generate(request(longer, 4, 0.8f)));
  }

  // The rest of a prompt, prefilled after kept blocks, gives the logits of a whole prefill in
  // every row, and so does a token after it, which reads every key and value of the prompt.
  void restOfThePromptGivesTheWholePrefillsValues() {
    auto backend = create_cpu_backend(1);
    const Model& model = *pair.target;
    PromptCache cache(64);
    KvCache& kv = cache.cache_for(*backend, model, 1024);
    const std::span<const int> first(prompt.data(), 100);
    PromptReuse::Start start = cache.begin(kv, first);
    QCOMPARE(start.cached, 0);
    forward_all(*backend, model, kv, start.seq, first);
    cache.keep(kv, start.seq, first);
    kv.release(start.seq);

    start = cache.begin(kv, prompt);
    QCOMPARE(start.cached, 96);  // six whole blocks of the first 100 tokens
    const std::vector<float> rest = forward_all(*backend, model, kv, start.seq,
                                                std::span<const int>(prompt).subspan(96));
    auto whole_cache = backend->create_cache(model, 1024);
    const int whole_seq = whole_cache->create();
    const std::vector<float> whole = forward_all(*backend, model, *whole_cache, whole_seq, prompt);
    const size_t vocab = static_cast<size_t>(model.config.vocab_size);
    QVERIFY(same_bits(rest, std::vector<float>(whole.begin() + static_cast<long>(96 * vocab), whole.end())));
    const std::vector<int> next{prompt[5]};
    QVERIFY(same_bits(forward_all(*backend, model, kv, start.seq, next),
                      forward_all(*backend, model, *whole_cache, whole_seq, next)));
    kv.release(start.seq);
    QCOMPARE(kv.blocks_in_use(), cache.blocks_held());
  }

  // Many distinct prompts through a cache of 8 blocks: never more kept, the newest stays,
  // the oldest goes, and without sessions the cache holds exactly the kept blocks.
  void leastRecentlyUsedGoFirst() {
    auto backend = create_cpu_backend(1);
    const Model& model = *pair.target;
    PromptCache cache(8);
    KvCache& kv = cache.cache_for(*backend, model, 256);
    const auto distinct = [&](int i) {
      std::vector<int> ids = pair.target->tokenizer->encode("# file " + std::to_string(i) + "\n" + code_prompt_text(),
                                                           true);
      ids.resize(40);  // two whole blocks and 8 tokens
      return ids;
    };
    for (int i = 0; i < 12; ++i) {
      const std::vector<int> ids = distinct(i);
      const PromptReuse::Start start = cache.begin(kv, ids);
      forward_all(*backend, model, kv, start.seq, std::span<const int>(ids).subspan(static_cast<size_t>(start.cached)));
      cache.keep(kv, start.seq, ids);
      kv.release(start.seq);
      QVERIFY(cache.blocks_held() <= 8);
      QCOMPARE(kv.blocks_in_use(), cache.blocks_held());
    }
    const PromptCacheStats s = cache.stats();
    QCOMPARE(s.blocks, cache.blocks_held());
    QVERIFY(s.blocks > 0 && s.blocks <= 8);
    QCOMPARE(s.tokens % 16, 0);
    for (const int i : {11, 0}) {
      const std::vector<int> ids = distinct(i);
      const PromptReuse::Start start = cache.begin(kv, ids);
      if (i == 11) QVERIFY2(start.cached >= 32, "the newest prompt was evicted");
      if (i == 0) QVERIFY2(start.cached < 32, "the oldest prompt was kept beyond the bound");
      kv.release(start.seq);
    }
    cache.clear();
    QCOMPARE(kv.blocks_in_use(), 0);
    QCOMPARE(cache.stats().blocks, 0);
  }

  void cachePromptFalseNeitherReadsNorKeeps() {
    LocalGenerator fresh(create_cpu_backend(1), pair.target, pair.draft);
    fresh.enable_prompt_cache(64);
    GenerationRequest r = request(prompt);
    r.cache_prompt = false;
    fresh.generate(r);
    QCOMPARE(fresh.prompt_cache_stats().blocks, 0);
    QCOMPARE(fresh.prompt_cache_stats().lookups, 0L);
    fresh.generate(request(prompt));
    QCOMPARE(fresh.generate(r).totals.cached_tokens, 0);
  }

  void promptOnlyWarmsTheCache() {
    LocalGenerator fresh(create_cpu_backend(1), pair.target, pair.draft);
    fresh.enable_prompt_cache(64);
    GenerationRequest warm = request(prompt);
    warm.max_new_tokens = 0;
    const SessionResult w = fresh.generate(warm);
    QCOMPARE(w.candidates.size(), size_t(1));
    QVERIFY(w.candidates[0].tokens.empty());
    QCOMPARE(w.candidates[0].finish, FinishReason::Length);
    QCOMPARE(w.totals.kv_blocks_left, 0);
    QVERIFY(fresh.prompt_cache_stats().blocks > 0);
    const SessionResult r = fresh.generate(request(prompt));
    QVERIFY(r.totals.cached_tokens > 0);
    compare(r, plain->generate(request(prompt)));
  }

  void badSize() {
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, PromptCache(0));
  }
};

QTEST_GUILESS_MAIN(TestPromptCache)
#include "test_prompt_cache.moc"
