// load_model: GGUF files, llama2.c checkpoints and Hugging Face directories, all turned
// into the same Model of weight views, then checked by validate_model.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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

// Norm weights are f32 in every Model: other types are converted once here.
TensorView norm_as_f32(Model& model, const TensorView& v) {
  if (v.type == TensorType::F32 && reinterpret_cast<uintptr_t>(v.data) % alignof(float) == 0) return v;
  const int64_t n = v.cols * v.rows;
  float* out = owned_buffer<float>(model, static_cast<size_t>(n));
  dequantize_row(v.type, v.data, out, n);
  return TensorView{TensorType::F32, v.cols, v.rows, out};
}

// Views must be aligned for their element type (blocks start with an f16); a file that
// does not align its data gets a copy.
TensorView aligned_view(Model& model, const TensorView& v) {
  if (reinterpret_cast<uintptr_t>(v.data) % alignof(float) == 0) return v;
  uint8_t* copy = owned_buffer<uint8_t>(model, v.bytes());
  std::memcpy(copy, v.data, v.bytes());
  return TensorView{v.type, v.cols, v.rows, copy};
}

std::shared_ptr<const Tokenizer> make_tokenizer(const std::string& source, Vocabulary vocab) {
  try {
    return std::make_shared<Tokenizer>(std::move(vocab));
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
// GGUF, architecture "llama", tensor names as llama.cpp writes them.

std::shared_ptr<Model> load_gguf(const std::string& path, const LoadOptions& options) {
  GgufFile gguf = GgufFile::open(path);
  auto model = std::make_shared<Model>();
  model->path = path;
  model->format = "gguf";
  model->storage.push_back(gguf.file);

  ModelConfig& c = model->config;
  c.architecture = gguf.get_string("general.architecture", "");
  if (c.architecture != "llama") {
    throw ModelError(path + ": architecture '" + c.architecture + "' is not supported (only llama)");
  }
  if (gguf.tensors.empty()) throw ModelError(path + ": has no weights (a vocabulary-only GGUF?)");
  c.name = gguf.get_string("general.name", fs::path(path).stem().string());
  const auto int_key = [&](const std::string& key, std::optional<int64_t> fallback = std::nullopt) {
    const int64_t v = fallback ? gguf.get_int(key, *fallback) : gguf.get_int(key);
    if (v < 0 || v > (int64_t{1} << 30)) throw ModelError(path + ": " + key + " = " + std::to_string(v) + " is out of range");
    return static_cast<int>(v);
  };
  c.dim = int_key("llama.embedding_length");
  c.hidden_dim = int_key("llama.feed_forward_length");
  c.n_layers = int_key("llama.block_count");
  c.n_heads = int_key("llama.attention.head_count");
  c.n_kv_heads = int_key("llama.attention.head_count_kv", c.n_heads);
  c.context_length = int_key("llama.context_length");
  c.rope_theta = static_cast<float>(gguf.get_real("llama.rope.freq_base", 10000.0));
  c.norm_eps = static_cast<float>(gguf.get_real("llama.attention.layer_norm_rms_epsilon", 1e-5));
  if (c.n_heads > 0 && c.dim % c.n_heads == 0) {
    const int rope_dims = int_key("llama.rope.dimension_count", c.head_dim());
    if (rope_dims != c.head_dim()) {
      throw ModelError(path + ": rotary embedding over " + std::to_string(rope_dims) + " of " +
                       std::to_string(c.head_dim()) + " head dimensions is not supported");
    }
  }
  if (c.n_layers > 4096) throw ModelError(path + ": llama.block_count " + std::to_string(c.n_layers) + " is absurd");

  const auto tensor = [&](const std::string& name) {
    const GgufTensorInfo* t = gguf.tensor(name);
    if (t == nullptr) throw ModelError(path + ": missing tensor '" + name + "'");
    if (t->shape.size() > 2) throw ModelError(path + ": tensor '" + name + "' has more than 2 dimensions");
    return aligned_view(*model, t->view());
  };
  Weights& w = model->weights;
  w.token_embedding = tensor("token_embd.weight");
  c.vocab_size = int_key("llama.vocab_size", w.token_embedding.rows);
  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; l++) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[static_cast<size_t>(l)];
    L.attn_norm = norm_as_f32(*model, tensor(p + "attn_norm.weight"));
    L.wq = tensor(p + "attn_q.weight");
    L.wk = tensor(p + "attn_k.weight");
    L.wv = tensor(p + "attn_v.weight");
    L.wo = tensor(p + "attn_output.weight");
    L.ffn_norm = norm_as_f32(*model, tensor(p + "ffn_norm.weight"));
    L.w_gate = tensor(p + "ffn_gate.weight");
    L.w_up = tensor(p + "ffn_up.weight");
    L.w_down = tensor(p + "ffn_down.weight");
    report_progress(options, path, 0.9 * (l + 1) / c.n_layers);
  }
  w.final_norm = norm_as_f32(*model, tensor("output_norm.weight"));
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
  auto file = MappedFile::open(path);
  const auto fail = [&](const std::string& what) {
    return ModelError(path + ": not a usable llama2.c checkpoint: " + what);
  };
  if (file->size() < 28) throw fail("only " + std::to_string(file->size()) + " bytes, shorter than its header");
  if (std::memcmp(file->data(), "ak42", 4) == 0) {
    throw fail("versioned exports (magic \"ak42\") are not read; use the legacy export or convert to GGUF");
  }
  int32_t h[7];
  std::memcpy(h, file->data(), sizeof h);
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
  if (file->size() != expected) {
    throw fail("the file has " + std::to_string(file->size()) + " bytes but its header's shapes need " +
               std::to_string(expected) + (file->size() < expected ? " (truncated)" : ""));
  }

  auto model = std::make_shared<Model>();
  model->path = path;
  model->format = "llama2.c";
  model->storage.push_back(file);
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

  const float* next = reinterpret_cast<const float*>(file->data() + 28);
  const auto take = [&](int64_t rows, int64_t cols) {
    TensorView v{TensorType::F32, cols, rows, next};
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
// Hugging Face directories: config.json (LlamaForCausalLM) + *.safetensors + tokenizer.

// HF rotates halves of each head (x[i], x[i + d/2]); the engine rotates adjacent pairs.
// Row (h, j, i) of HF's (heads, 2, d/2) layout becomes row (h, i, j) here, exactly
// llama.cpp's convert_hf_to_gguf permute().
TensorView permute_for_rope(Model& model, const TensorView& v, int heads) {
  const int64_t head_dim = v.rows / heads;
  const size_t row = v.row_size();
  uint8_t* out = owned_buffer<uint8_t>(model, v.bytes());
  for (int64_t h = 0; h < heads; h++) {
    for (int64_t i = 0; i < head_dim / 2; i++) {
      for (int64_t j = 0; j < 2; j++) {
        const int64_t to = h * head_dim + 2 * i + j;
        const int64_t from = h * head_dim + j * (head_dim / 2) + i;
        std::memcpy(out + static_cast<size_t>(to) * row, v.row(from), row);
      }
    }
  }
  return TensorView{v.type, v.cols, v.rows, out};
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

  std::string architecture = j.value("model_type", std::string());
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string()) {
    architecture = j["architectures"][0].get<std::string>();
  }
  if (architecture != "LlamaForCausalLM" && architecture != "llama") {
    throw ModelError(config_path.string() + ": architecture '" + architecture +
                     "' is not supported (only LlamaForCausalLM)");
  }
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    throw ModelError(config_path.string() + ": rope_scaling is not supported");
  }

  auto model = std::make_shared<Model>();
  model->path = dir;
  model->format = "safetensors";
  ModelConfig& c = model->config;
  c.name = fs::path(dir).filename().string();
  if (c.name.empty()) c.name = fs::path(dir).parent_path().filename().string();
  const auto int_field = [&](const char* key, std::optional<int> fallback = std::nullopt) {
    if (!j.contains(key)) {
      if (fallback) return *fallback;
      throw ModelError(config_path.string() + ": missing '" + key + "'");
    }
    const auto& v = j[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t{1} << 30)) {
      throw ModelError(config_path.string() + ": '" + key + "' is not a sensible size: " + v.dump());
    }
    return v.get<int>();
  };
  const auto real_field = [&](const char* key, double fallback) {
    if (!j.contains(key)) return fallback;
    if (!j[key].is_number()) throw ModelError(config_path.string() + ": '" + key + "' is not a number");
    return j[key].get<double>();
  };
  c.dim = int_field("hidden_size");
  c.hidden_dim = int_field("intermediate_size");
  c.n_layers = int_field("num_hidden_layers");
  c.n_heads = int_field("num_attention_heads");
  c.n_kv_heads = int_field("num_key_value_heads", c.n_heads);
  c.vocab_size = int_field("vocab_size");
  c.context_length = int_field("max_position_embeddings", 2048);
  c.rope_theta = static_cast<float>(real_field("rope_theta", 10000.0));
  c.norm_eps = static_cast<float>(real_field("rms_norm_eps", 1e-6));
  if (c.n_heads == 0 || c.n_kv_heads == 0 || c.dim % c.n_heads != 0 || c.n_layers > 4096) {
    throw ModelError(config_path.string() + ": inconsistent sizes (hidden_size " + std::to_string(c.dim) +
                     ", num_attention_heads " + std::to_string(c.n_heads) + ", num_key_value_heads " +
                     std::to_string(c.n_kv_heads) + ")");
  }
  if (int_field("head_dim", c.head_dim()) != c.head_dim()) {
    throw ModelError(config_path.string() + ": head_dim differs from hidden_size / num_attention_heads");
  }
  if (j.value("hidden_act", std::string("silu")) != "silu" || j.value("attention_bias", false) || j.value("mlp_bias", false)) {
    throw ModelError(config_path.string() + ": only the plain Llama block is supported (silu, no biases)");
  }
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
    files.push_back(SafetensorsFile::open(shard));
    model->storage.push_back(files.back().file);
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
    if (L.wq.rows != c.dim || L.wk.rows != c.kv_dim()) {
      throw ModelError(dir + ": " + p + "self_attn q_proj/k_proj have " + std::to_string(L.wq.rows) + "/" +
                       std::to_string(L.wk.rows) + " rows, expected " + std::to_string(c.dim) + "/" +
                       std::to_string(c.kv_dim()));
    }
    L.wq = permute_for_rope(*model, L.wq, c.n_heads);
    L.wk = permute_for_rope(*model, L.wk, c.n_kv_heads);
    L.wv = tensor(p + "self_attn.v_proj.weight");
    L.wo = tensor(p + "self_attn.o_proj.weight");
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
  if (v.data == nullptr) throw ModelError(where + " is missing");
  if (v.rows != rows || v.cols != cols) {
    throw ModelError(where + " has shape (" + std::to_string(v.rows) + " rows, " + std::to_string(v.cols) +
                     " cols), expected (" + std::to_string(rows) + ", " + std::to_string(cols) + ")");
  }
  if (must_be_f32 && v.type != TensorType::F32) {
    throw ModelError(where + " is " + std::string(type_traits(v.type).name) + ", norms must be f32");
  }
  if (cols % type_traits(v.type).block_elements != 0) {
    throw ModelError(where + " rows are not whole " + std::string(type_traits(v.type).name) + " blocks");
  }
}

}  // namespace

size_t Model::weight_bytes() const {
  size_t total = weights.token_embedding.bytes() + weights.final_norm.bytes();
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
      c.vocab_size <= 0 || c.context_length <= 0) {
    throw fail("configuration has a size that is not positive (dim " + std::to_string(c.dim) + ", hidden_dim " +
               std::to_string(c.hidden_dim) + ", n_layers " + std::to_string(c.n_layers) + ", n_heads " +
               std::to_string(c.n_heads) + ", n_kv_heads " + std::to_string(c.n_kv_heads) + ", vocab_size " +
               std::to_string(c.vocab_size) + ", context_length " + std::to_string(c.context_length) + ")");
  }
  if (c.dim % c.n_heads != 0 || c.head_dim() % 2 != 0) throw fail("dim must split into heads of even size");
  if (c.n_heads % c.n_kv_heads != 0) throw fail("n_heads must be a multiple of n_kv_heads");
  if (!(c.norm_eps > 0.0f) || !(c.rope_theta > 0.0f)) throw fail("norm_eps and rope_theta must be positive");
  const Weights& w = model.weights;
  if (w.layers.size() != static_cast<size_t>(c.n_layers)) throw fail("layer count differs from n_layers");
  check_view(model, "token_embedding", -1, w.token_embedding, c.vocab_size, c.dim, false);
  for (int l = 0; l < c.n_layers; l++) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    check_view(model, "attn_norm", l, L.attn_norm, 1, c.dim, true);
    check_view(model, "wq", l, L.wq, c.dim, c.dim, false);
    check_view(model, "wk", l, L.wk, c.kv_dim(), c.dim, false);
    check_view(model, "wv", l, L.wv, c.kv_dim(), c.dim, false);
    check_view(model, "wo", l, L.wo, c.dim, c.dim, false);
    check_view(model, "ffn_norm", l, L.ffn_norm, 1, c.dim, true);
    check_view(model, "w_gate", l, L.w_gate, c.hidden_dim, c.dim, false);
    check_view(model, "w_up", l, L.w_up, c.hidden_dim, c.dim, false);
    check_view(model, "w_down", l, L.w_down, c.dim, c.hidden_dim, false);
  }
  check_view(model, "final_norm", -1, w.final_norm, 1, c.dim, true);
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
