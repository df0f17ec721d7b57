// Models with random weights, held in memory, for the device checks and timings: a small
// one to compare backends on, and the shapes of TinyLlama-1.1B and Llama-7B for timing.
// With `share_layers`, every layer views the same host matrices (the host holds one layer;
// the device still gets a copy per layer, so the timings read the real number of bytes).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "model.h"
#include "tensor.h"

namespace specula::test {

inline ModelConfig tinyllama_shape() {
  ModelConfig c;
  c.name = "random TinyLlama-1.1B shape";
  c.dim = 2048;
  c.hidden_dim = 5632;
  c.n_layers = 22;
  c.n_heads = 32;
  c.n_kv_heads = 4;
  c.vocab_size = 32000;
  c.context_length = 2048;
  return c;
}

inline ModelConfig llama7b_shape() {
  ModelConfig c;
  c.name = "random Llama-7B shape";
  c.dim = 4096;
  c.hidden_dim = 11008;
  c.n_layers = 32;
  c.n_heads = 32;
  c.n_kv_heads = 32;
  c.vocab_size = 32000;
  c.context_length = 4096;
  return c;
}

// Uniform values in [-scale, scale) from a cheap generator (the 7B shape needs 10^9 of them
// per second to stay quick), stored as `type` (F32, F16 or BF16).
inline std::shared_ptr<std::vector<uint8_t>> random_matrix(int64_t rows, int64_t cols, TensorType type,
                                                            float scale, uint64_t& state) {
  auto data = std::make_shared<std::vector<uint8_t>>(row_bytes(type, cols) * static_cast<size_t>(rows));
  const size_t n = static_cast<size_t>(rows * cols);
  for (size_t i = 0; i < n; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const float v = scale * (static_cast<float>(state >> 40) / 8388608.0f - 1.0f);  // 2^23
    if (type == TensorType::F32) {
      std::memcpy(data->data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = type == TensorType::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
      std::memcpy(data->data() + 2 * i, &h, 2);
    }
  }
  return data;
}

inline std::shared_ptr<Model> random_model(const ModelConfig& config, TensorType type, uint64_t seed,
                                           bool share_layers = false) {
  auto model = std::make_shared<Model>();
  model->config = config;
  model->format = "memory";
  model->path = config.name;
  uint64_t state = seed * 2654435761u + 88172645463325252ull;
  const auto matrix = [&](int64_t rows, int64_t cols, TensorType t, float scale) {
    auto data = random_matrix(rows, cols, t, scale, state);
    model->storage.push_back(data);
    TensorView v;
    v.type = t;
    v.rows = rows;
    v.cols = cols;
    v.data = data->data();
    return v;
  };
  const auto norm = [&]() {  // around 1, as trained norms are
    TensorView v = matrix(1, config.dim, TensorType::F32, 0.2f);
    float* w = static_cast<float*>(const_cast<void*>(v.data));
    for (int i = 0; i < config.dim; ++i) w[i] += 1.0f;
    return v;
  };
  const float in_scale = 1.7f / std::sqrt(static_cast<float>(config.dim));  // keeps the stream's scale
  const float down_scale = 1.7f / std::sqrt(static_cast<float>(config.hidden_dim));
  Weights& w = model->weights;
  w.token_embedding = matrix(config.vocab_size, config.dim, type, 1.0f);
  for (int l = 0; l < config.n_layers; ++l) {
    if (share_layers && l > 0) {
      w.layers.push_back(w.layers[0]);
      continue;
    }
    LayerWeights lw;
    lw.attn_norm = norm();
    lw.wq = matrix(config.dim, config.dim, type, in_scale);
    lw.wk = matrix(config.kv_dim(), config.dim, type, in_scale);
    lw.wv = matrix(config.kv_dim(), config.dim, type, in_scale);
    lw.wo = matrix(config.dim, config.dim, type, in_scale);
    lw.ffn_norm = norm();
    lw.w_gate = matrix(config.hidden_dim, config.dim, type, in_scale);
    lw.w_up = matrix(config.hidden_dim, config.dim, type, in_scale);
    lw.w_down = matrix(config.dim, config.hidden_dim, type, down_scale);
    w.layers.push_back(lw);
  }
  w.final_norm = norm();
  w.output = matrix(config.vocab_size, config.dim, type, in_scale);
  return model;
}

}  // namespace specula::test
