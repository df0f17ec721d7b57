// A loaded model: configuration, weight views and tokenizer.
//
// Every loader (GGUF, llama2.c checkpoint, Hugging Face safetensors) produces the same
// Model; nothing downstream knows the file format. Weights are views into memory-mapped
// files where the layout allows, otherwise into buffers the model owns.
//
// Rotary embedding convention: the engine rotates adjacent pairs (x[2i], x[2i+1]) as
// llama2.c and GGUF do. Loaders of Hugging Face weights (which rotate halves) permute
// the rows of wq and wk at load, as llama.cpp's converter does.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/tensor.h"
#include "model/tokenizer.h"
#include "model/vocabulary.h"

namespace specula {

struct ModelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ModelConfig {
  std::string architecture = "llama";
  std::string name;
  int dim = 0;             // residual stream width
  int hidden_dim = 0;      // feed-forward width
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;      // grouped-query attention: n_heads % n_kv_heads == 0
  int vocab_size = 0;
  int context_length = 0;  // longest sequence the model was trained for
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;

  int head_dim() const { return dim / n_heads; }
  int kv_dim() const { return head_dim() * n_kv_heads; }
};

struct LayerWeights {
  TensorView attn_norm;  // (dim) f32
  TensorView wq;         // (dim rows, dim cols)
  TensorView wk;         // (kv_dim rows, dim cols)
  TensorView wv;         // (kv_dim rows, dim cols)
  TensorView wo;         // (dim rows, dim cols)
  TensorView ffn_norm;   // (dim) f32
  TensorView w_gate;     // (hidden_dim rows, dim cols)
  TensorView w_up;       // (hidden_dim rows, dim cols)
  TensorView w_down;     // (dim rows, hidden_dim cols)

  // Every tensor of the layer, in the order above.
  std::array<const TensorView*, 9> tensors() const {
    return {&attn_norm, &wq, &wk, &wv, &wo, &ffn_norm, &w_gate, &w_up, &w_down};
  }
};

struct Weights {
  TensorView token_embedding;        // (vocab rows, dim cols)
  std::vector<LayerWeights> layers;  // (n_layers)
  TensorView final_norm;             // (dim) f32
  TensorView output;                 // (vocab rows, dim cols); same data as token_embedding when tied
};

struct Model {
  ModelConfig config;
  Weights weights;
  std::shared_ptr<const Tokenizer> tokenizer;  // null only for files without any vocabulary
  std::string path;                            // where it was loaded from
  std::string format;                          // "gguf", "llama2.c", "safetensors", "memory"
  // Keeps mapped files and owned buffers alive for the views above.
  std::vector<std::shared_ptr<const void>> storage;

  bool tied_output() const { return weights.output.data == weights.token_embedding.data; }
  size_t weight_bytes() const;  // bytes of every weight matrix, as stored
};

struct LoadOptions {
  std::string tokenizer_path;  // for files without a vocabulary (llama2.c checkpoints)
  // Called with a fraction in [0, 1] while loading; returning false cancels (throws ModelError).
  std::function<bool(double)> progress;
};

// Loads a GGUF file, a llama2.c checkpoint, or a Hugging Face directory (config.json +
// *.safetensors + tokenizer). Throws ModelError with a message naming the file and the problem.
std::shared_ptr<const Model> load_model(const std::string& path, const LoadOptions& options = {});

// Checks shapes, types and sizes of a model's weights against its configuration.
void validate_model(const Model& model);

}  // namespace specula
