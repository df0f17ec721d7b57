// The forward passes the oracle suites compare with an independent reference's
// (tests/data/<oracle>/reference.json from tools/oracles/): every position's logits of a
// token sequence, greedy decoding one token per forward through the cache (as transformers'
// generate does), the worst relative error of the last logits over the reference's cases,
// and a copy of a model widened to f32.
#pragma once

#include <algorithm>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "compute/backend.h"
#include "logit_error.h"
#include "model/model.h"
#include "shared_data.h"

namespace specula::test {

// tests/data/<oracle>/reference.json.
inline nlohmann::json load_oracle_reference(const std::string& oracle) {
  const std::string path = testDataDir().toStdString() + "/" + oracle + "/reference.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("tests/data/" + oracle + "/reference.json is missing");
  return nlohmann::json::parse(in);
}

// Every position's logits of one token sequence, in one forward: (tokens, vocab).
inline std::vector<float> all_logits(Backend& backend, const Model& model, const std::vector<int32_t>& tokens) {
  std::unique_ptr<KvCache> cache = backend.create_cache(model, static_cast<int>(tokens.size()));
  RaggedBatch batch;
  batch.add(cache->create(), tokens, true);
  std::vector<float> logits;
  backend.forward(model, *cache, batch, logits);
  return logits;
}

// n tokens of greedy decoding after `prompt`, one token per forward through the cache.
inline std::vector<int> greedy_tokens(Backend& backend, const Model& model, const std::vector<int32_t>& prompt, int n) {
  std::unique_ptr<KvCache> cache = backend.create_cache(model, static_cast<int>(prompt.size()) + n);
  const int seq = cache->create();
  std::vector<int32_t> next = prompt, argmax;
  std::vector<int> out;
  while (static_cast<int>(out.size()) < n) {
    RaggedBatch batch;
    batch.add(seq, next, false);
    backend.forward_argmax(model, *cache, batch, argmax);
    out.push_back(argmax.at(0));
    next = {argmax[0]};
  }
  return out;
}

// The worst relative error of the last position's logits over the reference's `cases`
// ({tokens, argmax, last_logits}); with `check_argmax`, throws on any position whose argmax
// differs from the reference's (named `reference_name` in the message).
inline double last_logits_error(Backend& backend, const Model& model, const nlohmann::json& reference, bool check_argmax,
                                const std::string& reference_name = "the reference") {
  double worst = 0.0;
  const int vocab = model.config.vocab_size;
  for (const nlohmann::json& c : reference["cases"]) {
    const std::vector<int32_t> tokens = c["tokens"].get<std::vector<int32_t>>();
    const std::vector<int> argmax = c["argmax"].get<std::vector<int>>();
    const std::vector<double> last = c["last_logits"].get<std::vector<double>>();
    if (static_cast<int>(last.size()) != vocab) throw std::runtime_error("reference vocabulary differs");
    const std::vector<float> logits = all_logits(backend, model, tokens);
    for (size_t t = 0; check_argmax && t < tokens.size(); ++t) {
      const float* row = logits.data() + t * vocab;
      const int engine = static_cast<int>(std::max_element(row, row + vocab) - row);
      if (engine != argmax[t]) {
        throw std::runtime_error("position " + std::to_string(t) + ": argmax " + std::to_string(engine) + ", " +
                                 reference_name + " " + std::to_string(argmax[t]));
      }
    }
    worst = std::max(worst, relative_error(logits.data() + (tokens.size() - 1) * vocab, last));
  }
  return worst;
}

// A copy of `model` whose weight matrices (experts and router too) are f32, each value as
// dequantized: the kernels then multiply f32 activations instead of rounding them to 8 bits,
// and what is left of the error is the forward's own arithmetic.
inline Model widened(const Model& model) {
  Model wide = model;
  const auto widen = [&](TensorView& v) {
    auto data = std::make_shared<std::vector<float>>(static_cast<size_t>(v.rows * v.cols));
    for (int64_t r = 0; r < v.rows; ++r) dequantize_row(v.type, v.row(r), data->data() + r * v.cols, v.cols);
    v = TensorView{TensorType::F32, v.cols, v.rows, data->data()};
    wide.storage.push_back(std::move(data));
  };
  for (LayerWeights& l : wide.weights.layers) {
    for (TensorView* m : l.matrices()) widen(*m);
  }
  widen(wide.weights.token_embedding);
  widen(wide.weights.output);
  return wide;
}

}  // namespace specula::test
