// Small real model files for tests that need models on disk: random llama weights of a
// given vocabulary, much smaller than stories260K, written by the engine's own writer.
#pragma once

#include <cstring>
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

// The GGUF file `in` written again to `out` as a file Specula reads but cannot run: with
// `tensor` stored as `type` (its bytes a fixed pattern, as a real file's would be some
// values) and, when `architecture` is given, general.architecture and its `<arch>.` keys
// renamed to it. Metadata, vocabulary and the other tensors are kept.
inline void write_unrunnable_variant(const std::string& in, const std::string& out, const std::string& tensor,
                                     TensorType type, const std::string& architecture = "") {
  const GgufFile f = GgufFile::open(in);
  const std::string old_arch = f.get_string("general.architecture", "");
  GgufWriter w;
  for (const auto& [key, value] : f.metadata) {
    if (!architecture.empty() && key == "general.architecture") {
      w.set(key, GgufValue::string(architecture));
    } else if (!architecture.empty() && key.starts_with(old_arch + ".")) {
      w.set(architecture + key.substr(old_arch.size()), value);
    } else {
      w.set(key, value);
    }
  }
  for (const GgufTensorInfo& t : f.tensors) {
    if (t.name == tensor) {
      const size_t bytes = row_bytes(type, t.cols()) * static_cast<size_t>(t.rows());
      w.add_tensor(t.name, type, t.shape, [bytes](uint8_t* dst) {
        for (size_t i = 0; i < bytes; ++i) dst[i] = static_cast<uint8_t>(i * 37 % 251);
      });
    } else {
      w.add_tensor(t.name, t.type, t.shape, [&t](uint8_t* dst) { std::memcpy(dst, t.data, t.bytes); });
    }
  }
  w.write(out);
}

}  // namespace specula::test
