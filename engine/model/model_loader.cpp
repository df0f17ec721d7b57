// load_model: GGUF files, llama2.c checkpoints and Hugging Face directories, all turned
// into the same Model of weight views, then checked by validate_model.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "model/gguf.h"
#include "model/mapped_file.h"
#include "model/model.h"
#include "model/safetensors.h"

namespace specula {

namespace {

namespace fs = std::filesystem;

void report_progress(const LoadOptions& options, const std::string& path, double fraction) {
  if (options.progress && !options.progress(fraction)) throw ModelError(path + ": loading cancelled");
}

// A buffer owned by the model, for weights that cannot be views of the file.
template <typename T>
T* owned_buffer(Model& model, size_t n) {
  auto buffer = std::make_shared<std::vector<T>>(n);
  T* data = buffer->data();
  model.storage.push_back(std::move(buffer));
  return data;
}

// Norm weights are f32 in every Model: other types are converted once here (a view without
// data, of a header, just takes the type it would get).
TensorView norm_as_f32(Model& model, const TensorView& v) {
  if (v.data == nullptr) return TensorView{TensorType::F32, v.cols, v.rows, nullptr};
  if (v.type == TensorType::F32 && reinterpret_cast<uintptr_t>(v.data) % alignof(float) == 0) return v;
  const int64_t n = v.cols * v.rows;
  float* out = owned_buffer<float>(model, static_cast<size_t>(n));
  dequantize_row(v.type, v.data, out, n);
  return TensorView{TensorType::F32, v.cols, v.rows, out};
}

// Views must be aligned for their element type (blocks start with an f16); a file that
// does not align its data gets a copy.
TensorView aligned_view(Model& model, const TensorView& v) {
  if (v.data == nullptr || reinterpret_cast<uintptr_t>(v.data) % alignof(float) == 0) return v;
  uint8_t* copy = owned_buffer<uint8_t>(model, v.bytes());
  std::memcpy(copy, v.data, v.bytes());
  return TensorView{v.type, v.cols, v.rows, copy};
}

std::shared_ptr<const Tokenizer> make_tokenizer(const std::string& source, Vocabulary vocab) {
  try {
    return create_tokenizer(std::move(vocab));
  } catch (const std::exception& e) {
    throw ModelError(source + ": unusable vocabulary: " + e.what());
  }
}

std::shared_ptr<const Tokenizer> tokenizer_from_file(const std::string& path) {
  try {
    return make_tokenizer(path, load_vocabulary(path));
  } catch (const ModelError&) {
    throw;
  } catch (const std::exception& e) {
    throw ModelError(path + ": cannot read the tokenizer: " + e.what());
  }
}

// ---------------------------------------------------------------------------------------
// GGUF, architectures llama, qwen2, qwen3, qwen3moe, gemma3, gpt-oss and starcoder2, keys and tensor names as llama.cpp writes them.

// RoPE scaling from `<arch>.rope.scaling.*` (or the older `<arch>.rope.scale_linear`) and
// llama3's per-pair divisors from the rope_freqs.weight tensor, as llama.cpp reads them.
void read_gguf_rope_scaling(const GgufFile& gguf, const std::string& arch, ModelConfig& c) {
  const std::string type = gguf.get_string(arch + ".rope.scaling.type", "none");
  if (type == "yarn" && arch == "gpt-oss") return;  // read_gpt_oss
  if (type != "none" && type != "linear") {
    throw ModelError(gguf.path + ": rope scaling '" + type +
                     "' is not supported (only linear, llama3's rope_freqs, and gpt-oss's yarn)");
  }
  double factor = gguf.get_real(arch + ".rope.scaling.factor", gguf.get_real(arch + ".rope.scale_linear", 0.0));
  if (type == "linear" || factor != 0.0) c.rope_linear_factor = factor == 0.0 ? 1.0f : static_cast<float>(factor);
  if (const GgufTensorInfo* t = gguf.tensor("rope_freqs.weight")) {
    if (t->shape.size() != 1 || !is_float_type(t->type)) {
      throw ModelError(gguf.path + ": rope_freqs.weight should be one row of floats");
    }
    c.rope_freq_factors.assign(static_cast<size_t>(t->cols()), 1.0f);  // read from a header alone: counted
    for (int64_t i = 0; t->data != nullptr && i < t->cols(); i++) {  // element by element: the file need not align it
      const size_t size = type_traits(t->type).block_bytes;
      alignas(4) uint8_t element[4];
      std::memcpy(element, t->data + i * size, size);
      dequantize_row(t->type, element, &c.rope_freq_factors[static_cast<size_t>(i)], 1);
    }
  }
}

// What gemma3 adds to the llama block, read as llama.cpp's gemma3 model reads it: the
// embedding scaled by sqrt(dim), GELU-tanh, sliding layers (attention.sliding_window) with
// every sixth layer global, their RoPE base 10 000, and the query scale 1/sqrt(key_length)
// but for the 27B (62 layers: 1/sqrt(dim / heads), transformers' query_pre_attn_scalar; the
// GGUF has no key for it).
void read_gemma3(const GgufFile& gguf, ModelConfig& c) {
  c.activation = Activation::GeluTanh;
  c.embedding_scale = std::sqrt(static_cast<float>(c.dim));
  c.sliding_window = static_cast<int>(gguf.get_int("gemma3.attention.sliding_window"));
  if (c.sliding_window <= 0) throw ModelError(gguf.path + ": gemma3.attention.sliding_window must be positive");
  c.global_layer_period = 6;
  c.sliding_rope_theta = 10000.0f;
  if (c.n_layers == 62 && c.n_heads > 0) c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.dim / c.n_heads));
}

// What gpt-oss adds, read as llama.cpp's openai-moe model reads it: sliding layers
// (attention.sliding_window) alternating with global ones from layer 0, all rotating alike
// with YaRN scaling (rope.scaling.*: factor, original_context_length, the betas 32 and 1
// unless the file says), the clamped SwiGLU, and the experts weighed by a softmax over the
// top k router logits (llama.cpp's SOFTMAX_WEIGHT gating, whatever expert_gating_func says).
void read_gpt_oss(const GgufFile& gguf, ModelConfig& c) {
  const std::string a = "gpt-oss.";
  c.activation = Activation::SwigluClamped;
  c.expert_gating = ExpertGating::TopKThenSoftmax;
  c.expert_weights_norm = false;  // the softmax over the k is their weights already (llama.cpp: norm_w false)
  c.sliding_window = static_cast<int>(gguf.get_int(a + "attention.sliding_window"));
  if (c.sliding_window <= 0) throw ModelError(gguf.path + ": gpt-oss.attention.sliding_window must be positive");
  c.global_layer_period = 2;
  c.sliding_rope_as_global = true;
  const std::string type = gguf.get_string(a + "rope.scaling.type", "none");
  if (type == "none") return;
  if (type != "yarn") throw ModelError(gguf.path + ": gpt-oss with rope scaling '" + type + "' (only yarn)");
  c.rope_yarn_factor = static_cast<float>(gguf.get_real(a + "rope.scaling.factor", 0.0));
  const int64_t original = gguf.get_int(a + "rope.scaling.original_context_length");
  if (!(c.rope_yarn_factor >= 1.0f) || original < 1 || original > (int64_t{1} << 30)) {
    throw ModelError(gguf.path + ": yarn scaling needs a factor of at least 1 and a positive original context");
  }
  c.rope_yarn_original_context = static_cast<int>(original);
  c.rope_yarn_beta_fast = static_cast<float>(gguf.get_real(a + "rope.scaling.yarn_beta_fast", 32.0));
  c.rope_yarn_beta_slow = static_cast<float>(gguf.get_real(a + "rope.scaling.yarn_beta_slow", 1.0));
}

// What starcoder2 changes in the llama block: LayerNorm with biases (its epsilon under
// attention.layer_norm_epsilon, as llama.cpp reads it), a feed-forward without a gate,
// up -> GELU-tanh -> down (transformers' gelu_pytorch_tanh), and a sliding window on every
// layer when the file has attention.sliding_window. llama.cpp's converter writes no window
// for starcoder2 and llama.cpp attends to every position; transformers applies the
// config's sliding_window (4096 in StarCoder2's) to every layer, which the key reproduces.
void read_starcoder2(const GgufFile& gguf, ModelConfig& c) {
  c.norm = NormKind::Layer;
  c.activation = Activation::GeluTanh;
  c.gated_feed_forward = false;
  if (!gguf.find("starcoder2.attention.layer_norm_epsilon")) {
    throw ModelError(gguf.path + ": missing key 'starcoder2.attention.layer_norm_epsilon'");
  }
  c.norm_eps = static_cast<float>(gguf.get_real("starcoder2.attention.layer_norm_epsilon", 1e-5));
  const int64_t window = gguf.get_int("starcoder2.attention.sliding_window", 0);
  if (window < 0 || window > (int64_t{1} << 30)) {
    throw ModelError(gguf.path + ": starcoder2.attention.sliding_window = " + std::to_string(window) + " is out of range");
  }
  c.sliding_window = static_cast<int>(window);
  c.global_layer_period = 0;  // every layer slides
  c.sliding_rope_theta = c.rope_theta;
  if (c.sliding_window > 0 && (c.rope_linear_factor != 1.0f || !c.rope_freq_factors.empty())) {
    throw ModelError(gguf.path + ": rope scaling together with a sliding window is not supported for starcoder2");
  }
}

// A mixture of experts' sizes, as llama.cpp's qwen3moe reads them: expert_count experts of
// expert_feed_forward_length (the dense feed_forward_length, which the files also carry, is
// unused), expert_used_count of them per token, softmax gating, the selected weights
// renormalised (llama.cpp's qwen3moe always does; a file may say expert_weights_norm).
void read_experts(const GgufFile& gguf, const std::string& arch, ModelConfig& c) {
  const std::string a = arch + ".";
  const auto count = [&](const std::string& key) {
    const int64_t v = gguf.get_int(a + key);
    if (v < 1 || v > 4096) throw ModelError(gguf.path + ": " + a + key + " = " + std::to_string(v) + " is out of range");
    return static_cast<int>(v);
  };
  c.n_experts = count("expert_count");
  c.n_experts_used = count("expert_used_count");
  if (c.n_experts_used > c.n_experts) {
    throw ModelError(gguf.path + ": " + a + "expert_used_count " + std::to_string(c.n_experts_used) +
                     " exceeds expert_count " + std::to_string(c.n_experts));
  }
  c.hidden_dim = count("expert_feed_forward_length");
  c.expert_weights_norm = gguf.get_bool(a + "expert_weights_norm", true);
  if (arch == "gpt-oss") return;
  // llama.cpp's enum llama_expert_gating_func_type: 1 softmax, 2 sigmoid
  if (const int64_t gating = gguf.get_int(a + "expert_gating_func", 1); gating != 1) {
    throw ModelError(gguf.path + ": " + a + "expert_gating_func " + std::to_string(gating) +
                     " is not supported (only 1, softmax)");
  }
}

std::shared_ptr<Model> load_gguf(const std::string& path, const LoadOptions& options) {
  GgufFile gguf = options.metadata_only ? GgufFile::read_header(path) : GgufFile::open(path);
  auto model = std::make_shared<Model>();
  model->path = path;
  model->format = "gguf";
  if (gguf.file) model->storage.push_back(gguf.file);
  if (const int64_t shards = gguf.get_int("split.count", 1); shards > 1) {
    throw ModelError(path + ": one of " + std::to_string(shards) +
                     " split files (split.count); merge them into one with llama.cpp's llama-gguf-split --merge");
  }

  ModelConfig& c = model->config;
  c.architecture = gguf.get_string("general.architecture", "");
  const std::optional<RopeStyle> rope_style = architecture_rope_style(c.architecture);
  if (!rope_style) {
    throw ModelError(path + ": architecture '" + c.architecture + "' is not supported (only " +
                     supported_architectures() + ")");
  }
  c.rope_style = *rope_style;
  if (gguf.tensors.empty()) throw ModelError(path + ": has no weights (a vocabulary-only GGUF?)");
  c.name = gguf.get_string("general.name", fs::path(path).stem().string());
  const auto int_key = [&](const std::string& key, std::optional<int64_t> fallback = std::nullopt) {
    const int64_t v = fallback ? gguf.get_int(key, *fallback) : gguf.get_int(key);
    if (v < 0 || v > (int64_t{1} << 30)) throw ModelError(path + ": " + key + " = " + std::to_string(v) + " is out of range");
    return static_cast<int>(v);
  };
  const std::string a = c.architecture + ".";
  c.dim = int_key(a + "embedding_length");
  const bool gpt_oss = c.architecture == "gpt-oss";
  const bool experts = c.architecture == "qwen3moe" || gpt_oss;
  if (experts) {
    read_experts(gguf, c.architecture, c);
  } else {
    c.hidden_dim = int_key(a + "feed_forward_length");
  }
  c.n_layers = int_key(a + "block_count");
  c.n_heads = int_key(a + "attention.head_count");
  c.n_kv_heads = int_key(a + "attention.head_count_kv", c.n_heads);
  c.context_length = int_key(a + "context_length");
  c.rope_theta = static_cast<float>(gguf.get_real(a + "rope.freq_base", 10000.0));
  c.norm_eps = static_cast<float>(gguf.get_real(a + "attention.layer_norm_rms_epsilon", 1e-5));
  read_gguf_rope_scaling(gguf, c.architecture, c);
  if (c.n_heads > 0 && (gguf.find(a + "attention.key_length") || c.dim % c.n_heads != 0)) {
    const int key_length = int_key(a + "attention.key_length");
    if (int_key(a + "attention.value_length", key_length) != key_length) {
      throw ModelError(path + ": keys and values of different widths per head are not supported");
    }
    if (key_length * c.n_heads != c.dim) c.explicit_head_dim = key_length;
  }
  if (c.n_heads > 0) {
    const int rope_dims = int_key(a + "rope.dimension_count", c.head_dim());
    if (rope_dims != c.head_dim()) {
      throw ModelError(path + ": rotary embedding over " + std::to_string(rope_dims) + " of " +
                       std::to_string(c.head_dim()) + " head dimensions is not supported");
    }
  }
  if (c.n_layers > 4096) throw ModelError(path + ": " + a + "block_count " + std::to_string(c.n_layers) + " is absurd");
  if (c.architecture == "gemma3") read_gemma3(gguf, c);
  if (gpt_oss) read_gpt_oss(gguf, c);
  if (c.architecture == "starcoder2") read_starcoder2(gguf, c);

  const auto tensor = [&](const std::string& name) {
    const GgufTensorInfo* t = gguf.tensor(name);
    if (t == nullptr) throw ModelError(path + ": missing tensor '" + name + "'");
    if (t->shape.size() > 2) throw ModelError(path + ": tensor '" + name + "' has more than 2 dimensions");
    if (!is_supported_type(t->type)) {
      throw ModelError(path + ": tensor '" + name + "' has type " + std::string(type_traits(t->type).name) +
                       ", which Specula does not compute with (it computes with " + supported_type_names() + ")");
    }
    return aligned_view(*model, t->view());  // every supported type has a kernel of its own
  };
  // A 3-D expert tensor, ne (cols, rows, n_experts) as llama.cpp stores ffn_*_exps: the
  // experts' rows as one matrix, then one (aligned) view per expert.
  const auto expert_tensors = [&](const std::string& name, int64_t rows, int64_t cols) {
    const GgufTensorInfo* t = gguf.tensor(name);
    if (t == nullptr) throw ModelError(path + ": missing tensor '" + name + "'");
    if (t->shape != std::vector<int64_t>{cols, rows, c.n_experts}) {
      std::string shape;
      for (int64_t n : t->shape) shape += (shape.empty() ? "" : ", ") + std::to_string(n);
      throw ModelError(path + ": tensor '" + name + "' has shape (" + shape + "), expected (" + std::to_string(cols) +
                       ", " + std::to_string(rows) + ", " + std::to_string(c.n_experts) + ") (ne0 first)");
    }
    if (!is_supported_type(t->type)) {
      throw ModelError(path + ": tensor '" + name + "' has type " + std::string(type_traits(t->type).name) +
                       ", which Specula does not compute with (it computes with " + supported_type_names() + ")");
    }
    if (cols % type_traits(t->type).block_elements != 0) {
      throw ModelError(path + ": tensor '" + name + "' rows are not whole " + std::string(type_traits(t->type).name) + " blocks");
    }
    const TensorView all = t->view();
    std::vector<TensorView> views;
    for (int64_t e = 0; e < c.n_experts; ++e) {
      const uint8_t* data = all.data == nullptr ? nullptr : all.row(e * rows);
      views.push_back(aligned_view(*model, TensorView{all.type, cols, rows, data}));
    }
    return views;
  };
  // A bias or norm the architecture may have: f32, or an empty view when the file has none.
  const auto optional_vector = [&](const std::string& name) {
    return gguf.tensor(name) ? norm_as_f32(*model, tensor(name)) : TensorView{};
  };
  Weights& w = model->weights;
  w.token_embedding = tensor("token_embd.weight");
  c.vocab_size = int_key(a + "vocab_size", w.token_embedding.rows);
  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; l++) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[static_cast<size_t>(l)];
    L.attn_norm = norm_as_f32(*model, tensor(p + "attn_norm.weight"));
    L.attn_norm_bias = optional_vector(p + "attn_norm.bias");
    L.wq = tensor(p + "attn_q.weight");
    L.wk = tensor(p + "attn_k.weight");
    L.wv = tensor(p + "attn_v.weight");
    L.bq = optional_vector(p + "attn_q.bias");
    L.bk = optional_vector(p + "attn_k.bias");
    L.bv = optional_vector(p + "attn_v.bias");
    L.q_norm = optional_vector(p + "attn_q_norm.weight");
    L.k_norm = optional_vector(p + "attn_k_norm.weight");
    L.wo = tensor(p + "attn_output.weight");
    L.bo = optional_vector(p + "attn_output.bias");
    L.attn_sinks = optional_vector(p + "attn_sinks.weight");
    if (gpt_oss) {  // its feed-forward's input norm is named post_attention_norm
      L.ffn_norm = norm_as_f32(*model, tensor(p + "post_attention_norm.weight"));
    } else {
      L.attn_post_norm = optional_vector(p + "post_attention_norm.weight");
      L.ffn_norm = norm_as_f32(*model, tensor(p + "ffn_norm.weight"));
    }
    L.ffn_norm_bias = optional_vector(p + "ffn_norm.bias");
    if (experts) {
      L.router = tensor(p + "ffn_gate_inp.weight");
      L.router_bias = optional_vector(p + "ffn_gate_inp.bias");
      L.expert_gate = expert_tensors(p + "ffn_gate_exps.weight", c.hidden_dim, c.dim);
      L.expert_up = expert_tensors(p + "ffn_up_exps.weight", c.hidden_dim, c.dim);
      L.expert_down = expert_tensors(p + "ffn_down_exps.weight", c.dim, c.hidden_dim);
      L.expert_gate_bias = optional_vector(p + "ffn_gate_exps.bias");
      L.expert_up_bias = optional_vector(p + "ffn_up_exps.bias");
      L.expert_down_bias = optional_vector(p + "ffn_down_exps.bias");
      if (gguf.tensor(p + "ffn_gate_inp_shexp.weight") || gguf.tensor(p + "ffn_gate_shexp.weight")) {
        throw ModelError(path + ": layer " + std::to_string(l) + " has shared experts, which " + c.architecture + " does not have");
      }
    } else {
      if (c.gated_feed_forward) L.w_gate = tensor(p + "ffn_gate.weight");
      L.w_up = tensor(p + "ffn_up.weight");
      L.w_down = tensor(p + "ffn_down.weight");
      L.b_up = optional_vector(p + "ffn_up.bias");
      L.b_down = optional_vector(p + "ffn_down.bias");
    }
    L.ffn_post_norm = optional_vector(p + "post_ffw_norm.weight");
    if (c.architecture == "qwen2" && (L.bq.empty() || L.bk.empty() || L.bv.empty())) {
      throw ModelError(path + ": qwen2 layer " + std::to_string(l) + " lacks its q, k, v biases");
    }
    if ((c.architecture == "qwen3" || c.architecture == "qwen3moe" || c.architecture == "gemma3") && (L.q_norm.empty() || L.k_norm.empty())) {
      throw ModelError(path + ": " + c.architecture + " layer " + std::to_string(l) + " lacks its q, k norms");
    }
    if (gpt_oss && (L.attn_sinks.empty() || L.bq.empty() || L.bk.empty() || L.bv.empty() || L.bo.empty() ||
                    L.router_bias.empty() || L.expert_gate_bias.empty() || L.expert_up_bias.empty() ||
                    L.expert_down_bias.empty())) {
      throw ModelError(path + ": gpt-oss layer " + std::to_string(l) +
                       " lacks its attention sinks or one of its biases (attention, router, experts)");
    }
    if (c.architecture == "gemma3" && (L.attn_post_norm.empty() || L.ffn_post_norm.empty())) {
      throw ModelError(path + ": gemma3 layer " + std::to_string(l) +
                       " lacks its post-attention or post-feed-forward norm");
    }
    report_progress(options, path, 0.9 * (l + 1) / c.n_layers);
  }
  w.final_norm = norm_as_f32(*model, tensor("output_norm.weight"));
  w.final_norm_bias = optional_vector("output_norm.bias");
  w.output = gguf.tensor("output.weight") ? tensor("output.weight") : w.token_embedding;

  Vocabulary vocab = gguf_vocabulary(gguf);
  if (!vocab.empty()) {
    model->tokenizer = make_tokenizer(path, std::move(vocab));
  } else if (!options.tokenizer_path.empty()) {
    model->tokenizer = tokenizer_from_file(options.tokenizer_path);
  }
  return model;
}

// ---------------------------------------------------------------------------------------
// llama2.c checkpoints (the legacy export): 7 int32 (dim, hidden_dim, n_layers, n_heads,
// n_kv_heads, vocab_size, seq_len), then fp32 arrays in run.c's order. A negative
// vocab_size means the classifier follows at the end instead of sharing the embedding.

std::shared_ptr<Model> load_llama2c(const std::string& path, const LoadOptions& options) {
  // the mapped file the weights are views of, or (metadata only) the header read alone
  std::shared_ptr<const MappedFile> file;
  std::optional<FilePrefix> prefix;
  if (options.metadata_only) {
    prefix.emplace(path);
  } else {
    file = MappedFile::open(path);
  }
  const uint8_t* start = file ? file->data() : prefix->read(28);
  const uint64_t size = file ? file->size() : prefix->file_size();
  const auto fail = [&](const std::string& what) {
    return ModelError(path + ": not a usable llama2.c checkpoint: " + what);
  };
  if (size < 28) throw fail("only " + std::to_string(size) + " bytes, shorter than its header");
  if (std::memcmp(start, "ak42", 4) == 0) {
    throw fail("versioned exports (magic \"ak42\") are not read; use the legacy export or convert to GGUF");
  }
  int32_t h[7];
  std::memcpy(h, start, sizeof h);
  const bool shared_classifier = h[5] > 0;
  const int64_t dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kv_heads = h[4];
  const int64_t vocab = h[5] > 0 ? h[5] : -static_cast<int64_t>(h[5]), seq_len = h[6];
  const auto in_range = [](int64_t v, int64_t hi) { return v > 0 && v <= hi; };
  if (!in_range(dim, 1 << 16) || !in_range(hidden, 1 << 18) || !in_range(layers, 1024) ||
      !in_range(heads, 1024) || !in_range(kv_heads, 1024) || !in_range(vocab, 1 << 20) ||
      !in_range(seq_len, 1 << 22) || dim % heads != 0 || heads % kv_heads != 0 || (dim / heads) % 2 != 0) {
    throw fail("absurd header (dim " + std::to_string(h[0]) + ", hidden_dim " + std::to_string(h[1]) +
               ", n_layers " + std::to_string(h[2]) + ", n_heads " + std::to_string(h[3]) + ", n_kv_heads " +
               std::to_string(h[4]) + ", vocab_size " + std::to_string(h[5]) + ", seq_len " + std::to_string(h[6]) + ")");
  }
  const int64_t head_dim = dim / heads, kv_dim = head_dim * kv_heads;
  // Every size is bounded above, so these products fit in int64 with room to spare.
  const int64_t expected_floats = vocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * dim * kv_dim + 3 * dim * hidden) +
                                  dim + seq_len * head_dim + (shared_classifier ? 0 : vocab * dim);
  const uint64_t expected = 28 + static_cast<uint64_t>(expected_floats) * 4;
  if (size != expected) {
    throw fail("the file has " + std::to_string(size) + " bytes but its header's shapes need " +
               std::to_string(expected) + (size < expected ? " (truncated)" : ""));
  }

  auto model = std::make_shared<Model>();
  model->path = path;
  model->format = "llama2.c";
  if (file) model->storage.push_back(file);
  ModelConfig& c = model->config;
  c.name = fs::path(path).stem().string();
  c.dim = static_cast<int>(dim);
  c.hidden_dim = static_cast<int>(hidden);
  c.n_layers = static_cast<int>(layers);
  c.n_heads = static_cast<int>(heads);
  c.n_kv_heads = static_cast<int>(kv_heads);
  c.vocab_size = static_cast<int>(vocab);
  c.context_length = static_cast<int>(seq_len);
  c.rope_theta = 10000.0f;
  c.norm_eps = 1e-5f;

  const float* weights = file ? reinterpret_cast<const float*>(file->data() + 28) : nullptr;
  int64_t next = 0;  // floats taken so far
  const auto take = [&](int64_t rows, int64_t cols) {
    TensorView v{TensorType::F32, cols, rows, weights ? weights + next : nullptr};
    next += rows * cols;
    return v;
  };
  Weights& w = model->weights;
  w.layers.resize(static_cast<size_t>(layers));
  w.token_embedding = take(vocab, dim);
  for (auto& L : w.layers) L.attn_norm = take(1, dim);
  for (auto& L : w.layers) L.wq = take(dim, dim);
  for (auto& L : w.layers) L.wk = take(kv_dim, dim);
  for (auto& L : w.layers) L.wv = take(kv_dim, dim);
  for (auto& L : w.layers) L.wo = take(dim, dim);
  for (auto& L : w.layers) L.ffn_norm = take(1, dim);
  for (auto& L : w.layers) L.w_gate = take(hidden, dim);   // w1
  for (auto& L : w.layers) L.w_down = take(dim, hidden);   // w2
  for (auto& L : w.layers) L.w_up = take(hidden, dim);     // w3
  w.final_norm = take(1, dim);
  next += seq_len * head_dim;  // freq_cis_real and freq_cis_imag: the engine computes RoPE itself
  w.output = shared_classifier ? w.token_embedding : take(vocab, dim);
  report_progress(options, path, 0.9);

  std::string tokenizer_path = options.tokenizer_path;
  if (tokenizer_path.empty()) {
    const fs::path beside = fs::path(path).parent_path() / "tokenizer.bin";
    if (fs::exists(beside)) tokenizer_path = beside.string();
  }
  if (!tokenizer_path.empty()) model->tokenizer = tokenizer_from_file(tokenizer_path);
  return model;
}

// ---------------------------------------------------------------------------------------
// Hugging Face directories: config.json (LlamaForCausalLM, Qwen2ForCausalLM,
// Qwen3ForCausalLM) + *.safetensors + tokenizer.

// HF rotates halves of each head (x[i], x[i + d/2]); llama's layout rotates adjacent pairs.
// Row (h, j, i) of HF's (heads, 2, d/2) layout becomes row (h, i, j) here, exactly
// llama.cpp's convert_hf_to_gguf permute(), which it applies to biases as well (a bias
// is a matrix of one column).
TensorView permute_for_rope(Model& model, const TensorView& v, int heads) {
  if (v.data == nullptr) return v;  // a header's view: the shape stays
  const bool vector = v.rows == 1;
  const int64_t rows = vector ? v.cols : v.rows;
  const size_t row = vector ? row_bytes(v.type, 1) : v.row_size();
  const int64_t head_dim = rows / heads;
  const uint8_t* in = static_cast<const uint8_t*>(v.data);
  uint8_t* out = owned_buffer<uint8_t>(model, v.bytes());
  for (int64_t h = 0; h < heads; h++) {
    for (int64_t i = 0; i < head_dim / 2; i++) {
      for (int64_t j = 0; j < 2; j++) {
        const int64_t to = h * head_dim + 2 * i + j;
        const int64_t from = h * head_dim + j * (head_dim / 2) + i;
        std::memcpy(out + static_cast<size_t>(to) * row, in + static_cast<size_t>(from) * row, row);
      }
    }
  }
  return TensorView{v.type, v.cols, v.rows, out};
}

// The engine's architecture name for config.json's `architectures[0]` or `model_type`.
std::string hf_architecture(const nlohmann::json& j, const std::string& config_path) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"LlamaForCausalLM", "llama"}, {"Qwen2ForCausalLM", "qwen2"}, {"Qwen3ForCausalLM", "qwen3"}};
  std::string declared = j.value("model_type", std::string());
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string()) {
    declared = j["architectures"][0].get<std::string>();
  }
  for (const auto& [hf_class, name] : kNames) {
    if (declared == hf_class || declared == name) return name;
  }
  throw ModelError(config_path + ": architecture '" + declared +
                   "' is not supported (only LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)");
}

// rope_theta and rope_scaling (or transformers 5's rope_parameters, which holds both):
// "default", "linear" (factor) and "llama3" (factor, low/high_freq_factor,
// original_max_position_embeddings) are understood; any other kind is refused.
void read_hf_rope(const nlohmann::json& j, const std::string& config_path, ModelConfig& c) {
  const auto number = [&](const nlohmann::json& object, const char* key, double fallback) {
    if (!object.contains(key)) return fallback;
    if (!object[key].is_number()) throw ModelError(config_path + ": '" + key + "' is not a number");
    return object[key].get<double>();
  };
  const nlohmann::json none = nlohmann::json::object();
  const nlohmann::json* scaling = &none;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (j.contains(key) && j[key].is_object()) scaling = &j[key];
  }
  c.rope_theta = static_cast<float>(number(j, "rope_theta", number(*scaling, "rope_theta", 10000.0)));
  const std::string kind = scaling->value("rope_type", scaling->value("type", std::string("default")));
  if (kind == "default") return;
  if (!scaling->contains("factor")) throw ModelError(config_path + ": rope scaling '" + kind + "' without a factor");
  const double factor = number(*scaling, "factor", 1.0);
  if (!(factor > 0.0)) throw ModelError(config_path + ": rope scaling factor must be positive");
  if (kind == "linear") {
    c.rope_linear_factor = static_cast<float>(factor);
  } else if (kind == "llama3") {
    const double low = number(*scaling, "low_freq_factor", 1.0), high = number(*scaling, "high_freq_factor", 4.0);
    const double original = number(*scaling, "original_max_position_embeddings", 8192.0);
    if (!(low > 0.0) || !(high > low) || !(original > 0.0)) {
      throw ModelError(config_path + ": llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor and a positive "
                                     "original_max_position_embeddings");
    }
    c.rope_freq_factors = llama3_rope_factors(c.rope_theta, c.head_dim(), factor, low, high, original);
  } else {
    throw ModelError(config_path + ": rope scaling '" + kind + "' is not supported (only linear and llama3)");
  }
}

std::shared_ptr<Model> load_hf_directory(const std::string& dir, const LoadOptions& options) {
  const fs::path config_path = fs::path(dir) / "config.json";
  std::ifstream config_file(config_path);
  if (!config_file) throw ModelError(dir + ": no config.json (a Hugging Face model directory needs one)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(config_file);
  } catch (const nlohmann::json::exception& e) {
    throw ModelError(config_path.string() + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw ModelError(config_path.string() + ": not a JSON object");

  auto model = std::make_shared<Model>();
  model->path = dir;
  model->format = "safetensors";
  ModelConfig& c = model->config;
  c.architecture = hf_architecture(j, config_path.string());
  // As in the architecture's GGUF files: llama's q and k are permuted below, Qwen's keep halves.
  c.rope_style = *architecture_rope_style(c.architecture);
  c.name = fs::path(dir).filename().string();
  if (c.name.empty()) c.name = fs::path(dir).parent_path().filename().string();
  const auto int_field = [&](const char* key, std::optional<int> fallback = std::nullopt) {
    if (!j.contains(key) || (fallback && j[key].is_null())) {
      if (fallback) return *fallback;
      throw ModelError(config_path.string() + ": missing '" + key + "'");
    }
    const auto& v = j[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t{1} << 30)) {
      throw ModelError(config_path.string() + ": '" + key + "' is not a sensible size: " + v.dump());
    }
    return v.get<int>();
  };
  c.dim = int_field("hidden_size");
  c.hidden_dim = int_field("intermediate_size");
  c.n_layers = int_field("num_hidden_layers");
  c.n_heads = int_field("num_attention_heads");
  c.n_kv_heads = int_field("num_key_value_heads", c.n_heads);
  c.vocab_size = int_field("vocab_size");
  c.context_length = int_field("max_position_embeddings", 2048);
  c.norm_eps = static_cast<float>(j.contains("rms_norm_eps") && j["rms_norm_eps"].is_number() ? j["rms_norm_eps"].get<double>() : 1e-6);
  if (c.n_heads == 0 || c.n_kv_heads == 0 || c.n_layers > 4096) {
    throw ModelError(config_path.string() + ": inconsistent sizes (num_attention_heads " + std::to_string(c.n_heads) +
                     ", num_key_value_heads " + std::to_string(c.n_kv_heads) + ", num_hidden_layers " +
                     std::to_string(c.n_layers) + ")");
  }
  const int head_dim = int_field("head_dim", c.dim % c.n_heads == 0 ? std::optional<int>(c.dim / c.n_heads) : std::nullopt);
  if (head_dim * c.n_heads != c.dim) c.explicit_head_dim = head_dim;
  read_hf_rope(j, config_path.string(), c);
  if (j.value("hidden_act", std::string("silu")) != "silu" || j.value("mlp_bias", false)) {
    throw ModelError(config_path.string() + ": only the SwiGLU feed-forward without biases is supported");
  }
  if (j.value("use_sliding_window", false)) {
    throw ModelError(config_path.string() + ": sliding-window attention is not supported");
  }
  // qwen2 always has q, k, v biases; llama and qwen3 have q, k, v and o biases when asked.
  const bool qkv_bias = c.architecture == "qwen2" || j.value("attention_bias", false);
  const bool o_bias = c.architecture != "qwen2" && j.value("attention_bias", false);
  const bool tied = j.value("tie_word_embeddings", false);

  std::vector<std::string> shards;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".safetensors") shards.push_back(entry.path().string());
  }
  std::sort(shards.begin(), shards.end());
  if (shards.empty()) throw ModelError(dir + ": no *.safetensors weights");
  std::map<std::string, std::pair<const SafetensorsTensor*, const SafetensorsFile*>> by_name;
  std::vector<SafetensorsFile> files;
  files.reserve(shards.size());
  for (const std::string& shard : shards) {
    files.push_back(options.metadata_only ? SafetensorsFile::read_header(shard) : SafetensorsFile::open(shard));
    if (files.back().file) model->storage.push_back(files.back().file);
  }
  for (const SafetensorsFile& f : files) {
    for (const SafetensorsTensor& t : f.tensors) {
      if (!by_name.emplace(t.name, std::make_pair(&t, &f)).second) {
        throw ModelError(f.path + ": tensor '" + t.name + "' appears in more than one file");
      }
    }
  }
  const auto tensor = [&](const std::string& name) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) throw ModelError(dir + ": missing tensor '" + name + "'");
    const SafetensorsTensor& t = *it->second.first;
    if (t.shape.empty() || t.shape.size() > 2) {
      throw ModelError(it->second.second->path + ": tensor '" + name + "' should have 1 or 2 dimensions");
    }
    return aligned_view(*model, TensorView{t.type, t.cols(), t.rows(), t.data});
  };
  // A bias or norm: f32; empty when neither the configuration asks for it nor the files hold it.
  const auto vector = [&](const std::string& name, bool expected) {
    return expected || by_name.count(name) ? norm_as_f32(*model, tensor(name)) : TensorView{};
  };

  Weights& w = model->weights;
  // Tied weights are saved once; torch's serializer may keep the lm_head name for them.
  const bool embedding_saved_as_head = tied && !by_name.count("model.embed_tokens.weight") && by_name.count("lm_head.weight");
  w.token_embedding = tensor(embedding_saved_as_head ? "lm_head.weight" : "model.embed_tokens.weight");
  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; l++) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[static_cast<size_t>(l)];
    L.attn_norm = norm_as_f32(*model, tensor(p + "input_layernorm.weight"));
    L.wq = tensor(p + "self_attn.q_proj.weight");
    L.wk = tensor(p + "self_attn.k_proj.weight");
    if (L.wq.rows != c.q_dim() || L.wk.rows != c.kv_dim()) {
      throw ModelError(dir + ": " + p + "self_attn q_proj/k_proj have " + std::to_string(L.wq.rows) + "/" +
                       std::to_string(L.wk.rows) + " rows, expected " + std::to_string(c.q_dim()) + "/" +
                       std::to_string(c.kv_dim()));
    }
    L.wv = tensor(p + "self_attn.v_proj.weight");
    L.bq = vector(p + "self_attn.q_proj.bias", qkv_bias);
    L.bk = vector(p + "self_attn.k_proj.bias", qkv_bias);
    L.bv = vector(p + "self_attn.v_proj.bias", qkv_bias);
    L.q_norm = vector(p + "self_attn.q_norm.weight", c.architecture == "qwen3");
    L.k_norm = vector(p + "self_attn.k_norm.weight", c.architecture == "qwen3");
    if (c.rope_style == RopeStyle::Adjacent) {
      for (TensorView* v : {&L.wq, &L.bq}) {
        if (!v->empty()) *v = permute_for_rope(*model, *v, c.n_heads);
      }
      for (TensorView* v : {&L.wk, &L.bk}) {
        if (!v->empty()) *v = permute_for_rope(*model, *v, c.n_kv_heads);
      }
      if (!L.q_norm.empty() || !L.k_norm.empty()) throw ModelError(dir + ": q/k norms are not supported in llama models");
    }
    L.wo = tensor(p + "self_attn.o_proj.weight");
    L.bo = vector(p + "self_attn.o_proj.bias", o_bias);
    L.ffn_norm = norm_as_f32(*model, tensor(p + "post_attention_layernorm.weight"));
    L.w_gate = tensor(p + "mlp.gate_proj.weight");
    L.w_up = tensor(p + "mlp.up_proj.weight");
    L.w_down = tensor(p + "mlp.down_proj.weight");
    report_progress(options, dir, 0.9 * (l + 1) / c.n_layers);
  }
  w.final_norm = norm_as_f32(*model, tensor("model.norm.weight"));
  w.output = (tied || !by_name.count("lm_head.weight")) ? w.token_embedding : tensor("lm_head.weight");

  std::string tokenizer_path = options.tokenizer_path;
  for (const char* name : {"tokenizer.model", "tokenizer.json"}) {
    if (tokenizer_path.empty() && fs::exists(fs::path(dir) / name)) tokenizer_path = (fs::path(dir) / name).string();
  }
  if (!tokenizer_path.empty()) model->tokenizer = tokenizer_from_file(tokenizer_path);
  return model;
}

void check_view(const Model& model, const char* name, int layer, const TensorView& v, int64_t rows, int64_t cols,
                bool must_be_f32) {
  const std::string where = model.path + ": " + (layer >= 0 ? "layer " + std::to_string(layer) + " " : "") + name;
  if (v.empty()) throw ModelError(where + " is missing");
  if (v.rows != rows || v.cols != cols) {
    throw ModelError(where + " has shape (" + std::to_string(v.rows) + " rows, " + std::to_string(v.cols) +
                     " cols), expected (" + std::to_string(rows) + ", " + std::to_string(cols) + ")");
  }
  if (must_be_f32 && v.type != TensorType::F32) {
    throw ModelError(where + " is " + std::string(type_traits(v.type).name) + ", norms and biases must be f32");
  }
  if (cols % type_traits(v.type).block_elements != 0) {
    throw ModelError(where + " rows are not whole " + std::string(type_traits(v.type).name) + " blocks");
  }
}

// A mixture of experts' layer: the router, n_experts of each expert matrix, no dense
// feed-forward.
void check_experts(const Model& model, int l) {
  const ModelConfig& c = model.config;
  const LayerWeights& L = model.weights.layers[static_cast<size_t>(l)];
  const auto fail = [&](const std::string& what) { return ModelError(model.path + ": layer " + std::to_string(l) + " " + what); };
  if (c.n_experts_used < 1 || c.n_experts_used > c.n_experts) {
    throw ModelError(model.path + ": " + std::to_string(c.n_experts_used) + " experts used of " + std::to_string(c.n_experts));
  }
  if (!L.w_gate.empty() || !L.w_up.empty() || !L.w_down.empty()) throw fail("has a dense feed-forward beside its experts");
  check_view(model, "router", l, L.router, c.n_experts, c.dim, false);
  if (!L.router_bias.empty()) check_view(model, "router bias", l, L.router_bias, 1, c.n_experts, true);
  const auto expert_bias = [&](const char* name, const TensorView& v, int64_t width) {
    if (!v.empty()) check_view(model, name, l, v, c.n_experts, width, true);
  };
  expert_bias("expert gate bias", L.expert_gate_bias, c.hidden_dim);
  expert_bias("expert up bias", L.expert_up_bias, c.hidden_dim);
  expert_bias("expert down bias", L.expert_down_bias, c.dim);
  for (const auto* experts : {&L.expert_gate, &L.expert_up, &L.expert_down}) {
    if (experts->size() != static_cast<size_t>(c.n_experts)) {
      throw fail("has " + std::to_string(experts->size()) + " experts, expected " + std::to_string(c.n_experts));
    }
  }
  for (int e = 0; e < c.n_experts; ++e) {
    check_view(model, "expert gate", l, L.expert_gate[static_cast<size_t>(e)], c.hidden_dim, c.dim, false);
    check_view(model, "expert up", l, L.expert_up[static_cast<size_t>(e)], c.hidden_dim, c.dim, false);
    check_view(model, "expert down", l, L.expert_down[static_cast<size_t>(e)], c.dim, c.hidden_dim, false);
  }
}

}  // namespace

size_t Model::weight_bytes() const {
  size_t total = weights.token_embedding.bytes() + weights.final_norm.bytes() + weights.final_norm_bias.bytes();
  if (!tied_output()) total += weights.output.bytes();
  for (const LayerWeights& L : weights.layers) {
    for (const TensorView* v : L.tensors()) total += v->bytes();
  }
  return total;
}

void validate_model(const Model& model) {
  const ModelConfig& c = model.config;
  const auto fail = [&](const std::string& what) { return ModelError(model.path + ": " + what); };
  if (c.dim <= 0 || c.hidden_dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 ||
      c.vocab_size <= 0 || c.context_length <= 0 || c.explicit_head_dim < 0) {
    throw fail("configuration has a size that is not positive (dim " + std::to_string(c.dim) + ", hidden_dim " +
               std::to_string(c.hidden_dim) + ", n_layers " + std::to_string(c.n_layers) + ", n_heads " +
               std::to_string(c.n_heads) + ", n_kv_heads " + std::to_string(c.n_kv_heads) + ", vocab_size " +
               std::to_string(c.vocab_size) + ", context_length " + std::to_string(c.context_length) + ")");
  }
  if ((c.explicit_head_dim == 0 && c.dim % c.n_heads != 0) || c.head_dim() % 2 != 0 || c.head_dim() == 0) {
    throw fail("heads must have an even, positive width (head_dim " + std::to_string(c.head_dim()) + ")");
  }
  if (c.n_heads % c.n_kv_heads != 0) throw fail("n_heads must be a multiple of n_kv_heads");
  if (!(c.norm_eps > 0.0f) || !(c.rope_theta > 0.0f) || !(c.rope_linear_factor > 0.0f)) {
    throw fail("norm_eps, rope_theta and the rope scaling factor must be positive");
  }
  if (c.sliding_window < 0 || c.global_layer_period < 0 || !(c.sliding_rope_theta > 0.0f) ||
      !(c.embedding_scale > 0.0f) || c.attention_scale < 0.0f) {
    throw fail("the sliding window, its RoPE base and the embedding and attention scales must not be negative");
  }
  if (!c.rope_freq_factors.empty()) {
    if (c.rope_freq_factors.size() != static_cast<size_t>(c.head_dim() / 2)) {
      throw fail("rope_freqs has " + std::to_string(c.rope_freq_factors.size()) + " factors for " +
                 std::to_string(c.head_dim() / 2) + " rotary pairs");
    }
    for (float f : c.rope_freq_factors) {
      if (!(f > 0.0f) || !std::isfinite(f)) throw fail("rope_freqs holds a factor that is not positive");
    }
  }
  const Weights& w = model.weights;
  if (w.layers.size() != static_cast<size_t>(c.n_layers)) throw fail("layer count differs from n_layers");
  check_view(model, "token_embedding", -1, w.token_embedding, c.vocab_size, c.dim, false);
  const int q_dim = c.q_dim(), kv_dim = c.kv_dim();
  for (int l = 0; l < c.n_layers; l++) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const auto optional = [&](const char* name, const TensorView& v, int64_t n) {
      if (!v.empty()) check_view(model, name, l, v, 1, n, true);
    };
    check_view(model, "attn_norm", l, L.attn_norm, 1, c.dim, true);
    optional("attn_norm_bias", L.attn_norm_bias, c.dim);
    optional("ffn_norm_bias", L.ffn_norm_bias, c.dim);
    if (c.norm == NormKind::Rms && (!L.attn_norm_bias.empty() || !L.ffn_norm_bias.empty())) {
      throw fail("layer " + std::to_string(l) + " has norm biases, which an RMSNorm does not take");
    }
    check_view(model, "wq", l, L.wq, q_dim, c.dim, false);
    check_view(model, "wk", l, L.wk, kv_dim, c.dim, false);
    check_view(model, "wv", l, L.wv, kv_dim, c.dim, false);
    optional("bq", L.bq, q_dim);
    optional("bk", L.bk, kv_dim);
    optional("bv", L.bv, kv_dim);
    optional("q_norm", L.q_norm, c.head_dim());
    optional("k_norm", L.k_norm, c.head_dim());
    if (L.q_norm.empty() != L.k_norm.empty()) throw fail("layer " + std::to_string(l) + " has a norm for only one of q, k");
    check_view(model, "wo", l, L.wo, c.dim, q_dim, false);
    optional("bo", L.bo, c.dim);
    optional("attn_sinks", L.attn_sinks, c.n_heads);
    optional("attn_post_norm", L.attn_post_norm, c.dim);
    optional("ffn_post_norm", L.ffn_post_norm, c.dim);
    check_view(model, "ffn_norm", l, L.ffn_norm, 1, c.dim, true);
    if (c.has_experts()) {
      check_experts(model, l);
      continue;
    }
    if (!L.router.empty() || !L.expert_gate.empty()) throw fail("layer " + std::to_string(l) + " has experts the configuration does not");
    if (c.gated_feed_forward) {
      check_view(model, "w_gate", l, L.w_gate, c.hidden_dim, c.dim, false);
    } else if (!L.w_gate.empty()) {
      throw fail("layer " + std::to_string(l) + " has a feed-forward gate the configuration does not");
    }
    check_view(model, "w_up", l, L.w_up, c.hidden_dim, c.dim, false);
    check_view(model, "w_down", l, L.w_down, c.dim, c.hidden_dim, false);
    optional("b_up", L.b_up, c.hidden_dim);
    optional("b_down", L.b_down, c.dim);
  }
  check_view(model, "final_norm", -1, w.final_norm, 1, c.dim, true);
  if (!w.final_norm_bias.empty()) check_view(model, "final_norm_bias", -1, w.final_norm_bias, 1, c.dim, true);
  if (c.norm == NormKind::Rms && !w.final_norm_bias.empty()) throw fail("the output norm has a bias, which an RMSNorm does not take");
  check_view(model, "output", -1, w.output, c.vocab_size, c.dim, false);
  if (model.tokenizer && model.tokenizer->size() > c.vocab_size) {
    throw fail("the tokenizer has " + std::to_string(model.tokenizer->size()) + " pieces but the model only " +
               std::to_string(c.vocab_size) + " embeddings");
  }
}

std::shared_ptr<const Model> load_model(const std::string& path, const LoadOptions& options) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) throw ModelError(path + ": no such file or directory");
  report_progress(options, path, 0.0);
  std::shared_ptr<Model> model;
  if (fs::is_directory(status)) {
    model = load_hf_directory(path, options);
  } else if (fs::path(path).extension() == ".safetensors") {
    model = load_hf_directory(fs::absolute(path).parent_path().string(), options);
  } else {
    char magic[4] = {};
    std::ifstream(path, std::ios::binary).read(magic, sizeof magic);
    model = std::memcmp(magic, "GGUF", 4) == 0 ? load_gguf(path, options) : load_llama2c(path, options);
  }
  validate_model(*model);
  report_progress(options, path, 1.0);
  return model;
}

}  // namespace specula
