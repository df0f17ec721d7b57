// A loaded model: configuration, weight views and tokenizer.
//
// Every loader (GGUF, llama2.c checkpoint, Hugging Face safetensors) produces the same
// Model; nothing downstream knows the file format. Weights are views into memory-mapped
// files where the layout allows, otherwise into buffers the model owns.
//
// Rotary embedding convention: each architecture keeps the layout its GGUF files have, so
// a GGUF is used as stored. `llama` rotates adjacent pairs (x[2i], x[2i+1]), as llama2.c
// and llama.cpp's converter lay it out; `qwen2`, `qwen3` and `gemma3` rotate halves (x[i],
// x[i + head_dim/2]), as transformers and llama.cpp's "neox" rope do. (`qwen3moe` and `starcoder2` too.) Loaders of Hugging
// Face llama weights (which rotate halves) permute the rows of wq and wk (and their
// biases) at load, exactly as llama.cpp's converter does; Qwen weights need no permutation.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "model/tensor.h"
#include "model/tokenizer.h"
#include "model/vocabulary.h"

namespace specula {

struct ModelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Which dimensions of a head the rotary embedding turns together.
enum class RopeStyle {
  Adjacent,  // (x[2i], x[2i+1]): llama (llama.cpp's "norm" rope)
  Halves,    // (x[i], x[i + head_dim / 2]): qwen2, qwen3, qwen3moe, gemma3, gpt-oss, starcoder2 (llama.cpp's "neox" rope, transformers)
};
std::string_view rope_style_name(RopeStyle style);  // "adjacent", "halves"

// The architectures the engine runs, and the rope style of each one's GGUF layout;
// std::nullopt for any other name.
std::optional<RopeStyle> architecture_rope_style(std::string_view architecture);
// "llama, qwen2, qwen3, qwen3moe, gemma3, gpt-oss, starcoder2", for messages.
std::string supported_architectures();

// The feed-forward's activation: down(act(gate(x)) * up(x)), or down(act(up(x))) without a gate.
enum class Activation {
  Silu,      // x * sigmoid(x): llama, qwen2, qwen3
  GeluTanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): gemma3, starcoder2 (gelu_pytorch_tanh)
  // gpt-oss's clamped SwiGLU: g = min(gate, 7), u = clamp(up, -7, 7), (u + 1) * g * sigmoid(1.702 g)
  // (llama.cpp's swiglu_oai, transformers' GptOssExperts)
  SwigluClamped,
};

// How a mixture of experts weighs the experts it picks.
enum class ExpertGating {
  SoftmaxThenTopK,  // softmax over all router logits, the k most probable (qwen3moe)
  TopKThenSoftmax,  // the k largest logits, softmax over those k (gpt-oss: llama.cpp's SOFTMAX_WEIGHT)
};

// The normalisation before attention, before the feed-forward and before the output.
enum class NormKind {
  Rms,    // x / sqrt(mean(x^2) + eps) * weight
  Layer,  // (x - mean(x)) / sqrt(var(x) + eps) * weight + bias: starcoder2 (torch's LayerNorm)
};

struct ModelConfig {
  std::string architecture = "llama";  // "llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "gpt-oss" or "starcoder2"
  std::string name;
  int dim = 0;             // residual stream width
  int hidden_dim = 0;      // feed-forward width; with experts, each expert's
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;      // grouped-query attention: n_heads % n_kv_heads == 0
  int vocab_size = 0;
  int context_length = 0;  // longest sequence the model was trained for
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  // Width of each head of q, k and v when it is not dim / n_heads (qwen3: GGUF
  // attention.key_length, HF head_dim); 0 when it is.
  int explicit_head_dim = 0;
  RopeStyle rope_style = RopeStyle::Adjacent;
  // Linear RoPE scaling (DeepSeek-Coder: 4): every frequency divided by this, which is
  // positions divided by it.
  float rope_linear_factor = 1.0f;
  // (head_dim / 2) per-pair frequency divisors, llama3 scaling (GGUF rope_freqs.weight, or
  // computed from HF rope_scaling by llama3_rope_factors); empty when there are none.
  std::vector<float> rope_freq_factors;
  // YaRN scaling (gpt-oss) when rope_yarn_factor > 1: each pair's frequency blends the
  // interpolated theta^(-2i/d) / factor and the original by a ramp over the pairs between
  // the correction dimensions of beta_fast and beta_slow rotations in the original context
  // (not rounded to whole pairs: transformers' truncate false, gpt-oss's config), and cos
  // and sin are scaled by 0.1 ln(factor) + 1. Global and sliding layers alike.
  float rope_yarn_factor = 1.0f;
  int rope_yarn_original_context = 0;
  float rope_yarn_beta_fast = 32.0f;
  float rope_yarn_beta_slow = 1.0f;
  Activation activation = Activation::Silu;
  // false: the feed-forward has no gate, down(act(up(x))) (starcoder2).
  bool gated_feed_forward = true;
  NormKind norm = NormKind::Rms;
  // The token embedding is multiplied by this (gemma3: sqrt(dim), in float as transformers
  // multiplies in the activations' type).
  float embedding_scale = 1.0f;
  // Scale of the attention scores; 0: 1 / sqrt(head_dim).
  float attention_scale = 0.0f;
  // Sliding-window attention (gemma3; starcoder2 on every layer): on a sliding layer a query at position p sees keys at
  // positions p - sliding_window < k <= p; 0: every layer sees every earlier position.
  int sliding_window = 0;
  // With a sliding window, every global_layer_period-th layer is global (layer l is when
  // (l + 1) % period == 0: gemma3's 6), the others slide; 0: every layer slides.
  int global_layer_period = 0;
  // RoPE base of sliding layers (gemma3: 10 000, llama.cpp's rope_freq_base_train_swa); they
  // take no rope scaling. Global layers use rope_theta and the scaling.
  float sliding_rope_theta = 10000.0f;
  // Sliding layers rotate as global ones do (rope_theta and its scaling: gpt-oss).
  bool sliding_rope_as_global = false;
  // A mixture of experts (qwen3moe): each layer's feed-forward is n_experts feed-forwards of
  // hidden_dim, of which a router picks n_experts_used per token (softmax over all, the
  // top n_experts_used by probability, ties to the lower id) and sums their outputs weighted
  // by those probabilities, renormalised to sum 1 when expert_weights_norm. 0: dense.
  int n_experts = 0;
  int n_experts_used = 0;
  bool expert_weights_norm = true;
  ExpertGating expert_gating = ExpertGating::SoftmaxThenTopK;

  bool has_experts() const { return n_experts > 0; }
  int head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : dim / n_heads; }
  bool sliding_layer(int layer) const {
    return sliding_window > 0 && (global_layer_period == 0 || (layer + 1) % global_layer_period != 0);
  }
  // The first position a query at `position` attends to on `layer`.
  int first_attended(int layer, int position) const {
    return sliding_layer(layer) ? std::max(0, position - sliding_window + 1) : 0;
  }
  float attention_score_scale() const {
    return attention_scale > 0.0f ? attention_scale : 1.0f / std::sqrt(static_cast<float>(head_dim()));
  }
  int q_dim() const { return head_dim() * n_heads; }  // width of q and of attention's output
  int kv_dim() const { return head_dim() * n_kv_heads; }
  // (head_dim / 2) angle per position of each rotary pair i: rope_theta^(-2i / head_dim),
  // divided by rope_linear_factor and rope_freq_factors[i], in double (the angle of
  // position p is p * frequency). For a sliding layer: sliding_rope_theta^(-2i / head_dim).
  std::vector<double> rope_frequencies(bool sliding = false) const;
  // The factor YaRN scales every cos and sin by (1 without YaRN).
  float rope_magnitude() const;
};

// Llama 3.1's rope scaling as per-pair divisors of the frequencies (1 for wavelengths
// below original_context / high_freq_factor, `factor` above original_context /
// low_freq_factor, a smooth blend between), exactly as llama.cpp's converter writes
// rope_freqs.weight and transformers' llama3 rope computes.
std::vector<float> llama3_rope_factors(double theta, int head_dim, double factor, double low_freq_factor,
                                       double high_freq_factor, double original_context);

// Optional tensors (biases, q/k norms) are empty views when the model has none.
struct LayerWeights {
  TensorView attn_norm;  // (dim) f32
  TensorView attn_norm_bias;  // (dim) f32 or empty: a LayerNorm's bias (starcoder2)
  TensorView wq;         // (q_dim rows, dim cols)
  TensorView wk;         // (kv_dim rows, dim cols)
  TensorView wv;         // (kv_dim rows, dim cols)
  TensorView bq;         // (q_dim) f32 or empty: qwen2, llama with attention biases
  TensorView bk;         // (kv_dim) f32 or empty
  TensorView bv;         // (kv_dim) f32 or empty
  TensorView q_norm;     // (head_dim) f32 or empty: qwen3's RMSNorm of each head of q before RoPE
  TensorView k_norm;     // (head_dim) f32 or empty: the same for k
  TensorView wo;         // (dim rows, q_dim cols)
  TensorView bo;         // (dim) f32 or empty: llama with attention biases
  TensorView attn_sinks; // (n_heads) f32 or empty: gpt-oss's learned logit per head in each softmax's denominator
  TensorView attn_post_norm;  // (dim) f32 or empty: gemma3's RMSNorm of attention's output before the residual
  TensorView ffn_norm;   // (dim) f32
  TensorView ffn_norm_bias;  // (dim) f32 or empty: a LayerNorm's bias (starcoder2)
  TensorView w_gate;     // (hidden_dim rows, dim cols); empty without a gate (starcoder2)
  TensorView w_up;       // (hidden_dim rows, dim cols)
  TensorView w_down;     // (dim rows, hidden_dim cols)
  TensorView b_up;       // (hidden_dim) f32 or empty: starcoder2
  TensorView b_down;     // (dim) f32 or empty: starcoder2
  TensorView ffn_post_norm;  // (dim) f32 or empty: gemma3's RMSNorm of the feed-forward's output
  // A mixture of experts (w_gate, w_up and w_down then empty): GGUF's 3-D ffn_*_exps tensors,
  // one view per expert of its rows.
  TensorView router;                     // (n_experts rows, dim cols) or empty: ffn_gate_inp
  TensorView router_bias;                // (n_experts) f32 or empty: gpt-oss
  std::vector<TensorView> expert_gate;   // (n_experts) of (hidden_dim rows, dim cols)
  std::vector<TensorView> expert_up;     // (n_experts) of (hidden_dim rows, dim cols)
  std::vector<TensorView> expert_down;   // (n_experts) of (dim rows, hidden_dim cols)
  // Each expert's biases, one row per expert, f32, or empty (gpt-oss: ffn_*_exps.bias)
  TensorView expert_gate_bias;           // (n_experts rows, hidden_dim cols)
  TensorView expert_up_bias;             // (n_experts rows, hidden_dim cols)
  TensorView expert_down_bias;           // (n_experts rows, dim cols)

  // The weight matrices, in the order a forward multiplies by them (q, k, v, o, then gate,
  // up and down, or the router and each expert's gate, up and down); empty ones left out.
  std::vector<const TensorView*> matrices() const { return matrices_of(*this); }
  std::vector<TensorView*> matrices() { return matrices_of(*this); }

  // Every tensor the layer has, in the order above (empty ones left out; experts last).
  std::vector<const TensorView*> tensors() const {
    std::vector<const TensorView*> all;
    for (const TensorView* v : {&attn_norm, &attn_norm_bias, &wq, &wk, &wv, &bq, &bk, &bv, &q_norm, &k_norm, &wo, &bo,
                                &attn_sinks, &attn_post_norm, &ffn_norm, &ffn_norm_bias, &w_gate, &w_up, &b_up, &w_down,
                                &b_down, &ffn_post_norm, &router, &router_bias, &expert_gate_bias, &expert_up_bias,
                                &expert_down_bias}) {
      if (!v->empty()) all.push_back(v);
    }
    for (size_t e = 0; e < expert_gate.size(); ++e) {
      for (const std::vector<TensorView>* experts : {&expert_gate, &expert_up, &expert_down}) all.push_back(&(*experts)[e]);
    }
    return all;
  }

 private:
  template <class Layer>  // LayerWeights or const LayerWeights
  static auto matrices_of(Layer& l) -> std::vector<decltype(&l.wq)> {
    std::vector<decltype(&l.wq)> all;
    for (auto* v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router}) {
      if (!v->empty()) all.push_back(v);
    }
    for (size_t e = 0; e < l.expert_gate.size(); ++e) {
      for (auto* experts : {&l.expert_gate, &l.expert_up, &l.expert_down}) all.push_back(&(*experts)[e]);
    }
    return all;
  }
};

struct Weights {
  TensorView token_embedding;        // (vocab rows, dim cols)
  std::vector<LayerWeights> layers;  // (n_layers)
  TensorView final_norm;             // (dim) f32
  TensorView final_norm_bias;        // (dim) f32 or empty: a LayerNorm's bias (starcoder2)
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
  // Reads the headers alone (GGUF metadata and tensor table, safetensors headers, config.json,
  // a llama2.c header) and the tokenizer, never mapping or reading weights, and makes every
  // check of a full load on them, with the same messages: the Model says what loading
  // would give. It is for describing and checking, never for running: its weight views have
  // shapes and types but no data, tied_output() is meaningless, and llama3 rope factors
  // are counted, not read (left at 1).
  bool metadata_only = false;
};

// Loads a GGUF file, a llama2.c checkpoint, or a Hugging Face directory (config.json +
// *.safetensors + tokenizer). Throws ModelError with a message naming the file and the problem.
std::shared_ptr<const Model> load_model(const std::string& path, const LoadOptions& options = {});

// Checks shapes, types and sizes of a model's weights against its configuration.
void validate_model(const Model& model);

}  // namespace specula
