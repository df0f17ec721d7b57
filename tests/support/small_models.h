// Small real model files for tests that need models on disk: random llama weights of a
// given vocabulary, much smaller than stories260K, written by the engine's own writer.
#pragma once

#include <memory>
#include <string>

#include "model/gguf.h"
#include "model/model.h"
#include "model/model_export.h"
#include "model/random_model.h"
#include "model/tokenizer.h"

namespace specula::test {

// A llama model of 4 layers, dim 512, FFN 1408, vocab 8000 in F32, in memory: 68 MB of
// matrices, enough to stand against a lowered memory limit (data_limit.h).
inline std::shared_ptr<const Model> mid_f32_model(uint64_t seed) {
  ModelConfig c = random_model_config("tiny");
  c.dim = 512;
  c.hidden_dim = 1408;
  c.n_layers = 4;
  c.vocab_size = 8000;
  return make_random_model(c, TensorType::F32, seed, 1);
}

// A llama model of dim 32, one layer, `rows` embedding rows (tied to the output) and
// `tokenizer` (may be null): about 26K parameters for 512 rows.
inline std::shared_ptr<Model> small_llama(std::shared_ptr<const Tokenizer> tokenizer, int rows, uint64_t seed) {
  ModelConfig c = random_model_config("tiny");
  c.dim = 32;
  c.n_layers = 1;
  c.hidden_dim = 64;
  c.vocab_size = rows;
  auto model = std::make_shared<Model>(*make_random_model(c, TensorType::F32, seed));
  model->weights.output = model->weights.token_embedding;
  model->tokenizer = std::move(tokenizer);
  return model;
}

// A tiny random model with the vocabulary of the GGUF file `vocab_gguf` (one with
// fill-in-the-middle tokens, such as DeepSeek-Coder's, for FIM tests), written as GGUF to
// `path`; returns the model.
inline std::shared_ptr<Model> write_tiny_model_with_vocabulary(const std::string& vocab_gguf, const std::string& path) {
  ModelConfig config = random_model_config("tiny");
  Vocabulary vocab = gguf_vocabulary(GgufFile::open(vocab_gguf));
  config.vocab_size = vocab.size();
  auto model = std::make_shared<Model>(*make_random_model(config, TensorType::F32, 7, 1));
  model->tokenizer = create_tokenizer(std::move(vocab));
  write_gguf_model(*model, path, TensorType::F32);
  return model;
}

}  // namespace specula::test
