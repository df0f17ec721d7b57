// A controlled fake Backend for testing the speculative decoder without a real model.
//
// Its "model" is a pure function of the token context: the logits at a position depend on
// every token up to it (a hash of the whole context) plus a simple rule on the last two
// tokens, so drafts are often but not always right. Running only the first K < n_layers
// layers perturbs the logits by a K-dependent term: a weaker draft of the same model.
// Models named differently are different models.
//
// The fake keeps its "keys and values" honestly: forward writes each token id into the
// cache slot the batch plan gives it and reads every context back through the block
// tables, so a wrong truncation, fork or copy-on-write changes the logits. `reference_logits`
// computes the same logits from a plain token list, from scratch.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "compute/backend.h"
#include "compute/batch.h"
#include "compute/kv_cache.h"
#include "model/model.h"

namespace specula::test {

inline std::shared_ptr<Model> make_fake_model(const std::string& name, int vocab = 24, int n_layers = 4,
                                              int context = 512) {
  auto m = std::make_shared<Model>();
  m->config.name = name;
  m->config.vocab_size = vocab;
  m->config.n_layers = n_layers;
  m->config.context_length = context;
  m->config.dim = 8;
  m->config.n_heads = 1;
  m->config.n_kv_heads = 1;
  m->format = "memory";
  return m;
}

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

inline double unit_noise(uint64_t h, int v) {  // in [-1, 1)
  return static_cast<double>(mix64(h + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(v + 1)) >> 11) * 0x1.0p-52 - 1.0;
}

// Logits after `context` (the tokens at positions 0..p) for `model` run through `n_layers`.
inline void reference_logits(const Model& model, std::span<const int> context, int n_layers, float* out) {
  const int vocab = model.config.vocab_size;
  const int layers = n_layers < 0 ? model.config.n_layers : n_layers;
  uint64_t h = std::hash<std::string>{}(model.config.name);
  for (const int t : context) h = mix64(h ^ static_cast<uint64_t>(t + 1));
  const int last = context.back();
  const int prev = context.size() > 1 ? context[context.size() - 2] : 0;
  const int rule = (3 * last + 5 * prev + 1) % vocab;
  const uint64_t weak = layers < model.config.n_layers ? mix64(h ^ (0x5bd1e995ULL * static_cast<uint64_t>(layers))) : h;
  for (int v = 0; v < vocab; ++v) {
    out[v] = static_cast<float>((v == rule ? 2.5 : 0.0) + 1.5 * unit_noise(h, v) + 1.2 * unit_noise(weak, v + 1000));
  }
}

class FakeStorage : public KvStorage {
 public:
  FakeStorage(int block_size, int num_blocks) : block_size_(block_size), tokens(static_cast<size_t>(block_size * num_blocks), -1) {}
  void copy_block(int src, int dst) override {
    std::copy_n(tokens.begin() + src * block_size_, block_size_, tokens.begin() + dst * block_size_);
  }
  int block_size_;
  std::vector<int> tokens;  // (num_blocks * block_size) the token written at each slot
};

class FakeBackend : public Backend {
 public:
  std::string name() const override { return "fake"; }

  std::unique_ptr<KvCache> create_cache(const Model&, int max_tokens, int, int block_size) override {
    const int blocks = (max_tokens + block_size - 1) / block_size;
    return std::make_unique<KvCache>(block_size, blocks, std::make_unique<FakeStorage>(block_size, blocks));
  }

  void forward(const Model& model, KvCache& cache, const RaggedBatch& batch, std::vector<float>& logits,
               int n_layers) override {
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    auto& storage = dynamic_cast<FakeStorage&>(*cache.storage());
    const BatchPlan plan = plan_batch(cache, batch, model.config.context_length);
    for (int t = 0; t < plan.n_tokens; ++t) storage.tokens[static_cast<size_t>(plan.cache_slots[t])] = batch.tokens[t];
    record_writes(cache, plan);
    const int vocab = model.config.vocab_size;
    logits.assign(plan.logit_rows.size() * static_cast<size_t>(vocab), 0.0f);
    std::vector<int> context;
    for (size_t r = 0; r < plan.logit_rows.size(); ++r) {
      const int t = plan.logit_rows[r];
      const int s = plan.token_seq[t];
      const auto table = std::span<const int32_t>(plan.block_tables).subspan(
          static_cast<size_t>(plan.table_offsets[s]), static_cast<size_t>(plan.table_offsets[s + 1] - plan.table_offsets[s]));
      context.clear();
      const int bs = cache.block_size();
      for (int p = 0; p <= plan.positions[t]; ++p) {
        context.push_back(storage.tokens[static_cast<size_t>(table[static_cast<size_t>(p / bs)] * bs + p % bs)]);
      }
      reference_logits(model, context, n_layers, logits.data() + r * static_cast<size_t>(vocab));
    }
    ++calls;
    max_layers = std::max(max_layers, n_layers < 0 ? model.config.n_layers : n_layers);
    if (plan.n_tokens > 0) {
      min_position_after_first = calls == 1 ? 1 << 30 : std::min(min_position_after_first, *std::min_element(plan.positions.begin(), plan.positions.end()));
    }
    if (calls == 1) first_call_tokens = plan.n_tokens;
  }

  // A controlled cost model when set; otherwise the real one, measured on this fake.
  void record_writes(const KvCache& cache, const BatchPlan& plan) {
    if (plan.n_tokens == 0) return;
    Writes& w = writes[&cache];
    if (w.first_call == 0) w.first_call = calls + 1;
    for (int t = 0; t < plan.n_tokens; ++t) ++w.per_position[plan.positions[t]];
  }

  std::shared_ptr<const ForwardCost> forward_cost(const Model& model, const CostProgress& progress = {}) override {
    return cost ? cost : Backend::forward_cost(model, progress);
  }

  // What the forwards wrote into one cache.
  struct Writes {
    int first_call = 0;                // the forward (1, 2, ... over all caches) that first wrote it
    std::map<int, int> per_position;   // position -> tokens written at it, over all its sequences
  };

  std::shared_ptr<const ForwardCost> cost;
  std::map<const KvCache*, Writes> writes;  // by cache
  int delay_ms = 0;                     // sleep per forward: a "slow model"
  int calls = 0;                        // forwards run, all models
  int max_layers = 0;                   // most layers one forward ran
  int first_call_tokens = 0;
  int min_position_after_first = 1 << 30;
};

// A cost model of chosen shape: each layer over n tokens costs max(memory, compute * n)
// seconds (flat while reading weights dominates, then linear: a roofline), the head over n
// rows head_memory + head_compute * n; no attention term.
inline ForwardCost roofline_cost(int n_layers, double memory, double compute, double head_memory = 0.0,
                                 double head_compute = 0.0) {
  ForwardCost c;
  c.n_layers = n_layers;
  for (const int n : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}) {
    c.tokens.push_back(n);
    c.layer_seconds.push_back(std::max(memory, compute * n));
    c.head_seconds.push_back(head_memory + head_compute * n);
  }
  return c;
}

// Plain greedy decoding from scratch, one token at a time, no cache: the reference.
inline std::vector<int> plain_greedy(const Model& model, std::vector<int> context, int n_new, int eos = -1) {
  std::vector<int> out;
  std::vector<float> logits(static_cast<size_t>(model.config.vocab_size));
  while (static_cast<int>(out.size()) < n_new && static_cast<int>(context.size()) < model.config.context_length) {
    reference_logits(model, context, -1, logits.data());
    const int t = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (t == eos) break;
    out.push_back(t);
    context.push_back(t);
  }
  return out;
}

}  // namespace specula::test
