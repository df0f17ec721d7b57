#include "model/model_export.h"

#include <cstring>
#include <vector>

#include "model/gguf.h"

namespace specula {

namespace {

// llama.cpp's general.file_type (enum llama_ftype) for an all-`type` model.
uint32_t llama_file_type(TensorType type) {
  switch (type) {
    case TensorType::F32: return 0;
    case TensorType::F16: return 1;
    case TensorType::Q4_0: return 2;
    case TensorType::Q8_0: return 7;
    case TensorType::Q4_K: return 15;  // Q4_K_M
    case TensorType::Q6_K: return 18;
    case TensorType::BF16: return 32;
  }
  return 0;
}

// Adds `v` as a tensor of `type`, converting row by row through f32 unless it is stored so.
void add_matrix(GgufWriter& out, const std::string& name, const TensorView& v, TensorType type) {
  if (v.cols % type_traits(type).block_elements != 0) type = v.type;
  std::vector<int64_t> shape = {v.cols};
  if (v.rows != 1) shape.push_back(v.rows);
  out.add_tensor(name, type, shape, [v, type](uint8_t* dst) {
    if (v.type == type) {
      std::memcpy(dst, v.data, v.bytes());
      return;
    }
    std::vector<float> row(static_cast<size_t>(v.cols));
    const size_t out_row = row_bytes(type, v.cols);
    for (int64_t r = 0; r < v.rows; r++) {
      dequantize_row(v.type, v.row(r), row.data(), v.cols);
      quantize_row(type, row.data(), dst + static_cast<size_t>(r) * out_row, v.cols);
    }
  });
}

}  // namespace

void write_gguf_model(const Model& model, const std::string& path, TensorType type) {
  const ModelConfig& c = model.config;
  GgufWriter out;
  out.set("general.architecture", GgufValue::string("llama"));
  out.set("general.name", GgufValue::string(c.name));
  out.set("general.file_type", GgufValue::u32(llama_file_type(type)));
  out.set("llama.context_length", GgufValue::u32(static_cast<uint32_t>(c.context_length)));
  out.set("llama.embedding_length", GgufValue::u32(static_cast<uint32_t>(c.dim)));
  out.set("llama.block_count", GgufValue::u32(static_cast<uint32_t>(c.n_layers)));
  out.set("llama.feed_forward_length", GgufValue::u32(static_cast<uint32_t>(c.hidden_dim)));
  out.set("llama.attention.head_count", GgufValue::u32(static_cast<uint32_t>(c.n_heads)));
  out.set("llama.attention.head_count_kv", GgufValue::u32(static_cast<uint32_t>(c.n_kv_heads)));
  out.set("llama.rope.dimension_count", GgufValue::u32(static_cast<uint32_t>(c.head_dim())));
  out.set("llama.rope.freq_base", GgufValue::f32(c.rope_theta));
  out.set("llama.attention.layer_norm_rms_epsilon", GgufValue::f32(c.norm_eps));
  out.set("llama.vocab_size", GgufValue::u32(static_cast<uint32_t>(c.vocab_size)));

  if (model.tokenizer) {
    const Vocabulary& v = model.tokenizer->vocabulary();
    std::vector<int32_t> kinds(v.kinds.size());
    for (size_t i = 0; i < v.kinds.size(); i++) kinds[i] = static_cast<int32_t>(v.kinds[i]);
    out.set("tokenizer.ggml.model", GgufValue::string("llama"));
    out.set("tokenizer.ggml.tokens", GgufValue::string_array(v.pieces));
    out.set("tokenizer.ggml.scores", GgufValue::f32_array(v.scores));
    out.set("tokenizer.ggml.token_type", GgufValue::i32_array(kinds));
    out.set("tokenizer.ggml.bos_token_id", GgufValue::u32(static_cast<uint32_t>(v.bos)));
    out.set("tokenizer.ggml.eos_token_id", GgufValue::u32(static_cast<uint32_t>(v.eos)));
    out.set("tokenizer.ggml.unknown_token_id", GgufValue::u32(static_cast<uint32_t>(v.unk)));
    if (v.pad >= 0) out.set("tokenizer.ggml.padding_token_id", GgufValue::u32(static_cast<uint32_t>(v.pad)));
    out.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(v.add_bos));
    out.set("tokenizer.ggml.add_space_prefix", GgufValue::boolean(v.add_dummy_prefix));
  }

  const Weights& w = model.weights;
  add_matrix(out, "token_embd.weight", w.token_embedding, type);
  for (size_t l = 0; l < w.layers.size(); l++) {
    const LayerWeights& L = w.layers[l];
    const std::string p = "blk." + std::to_string(l) + ".";
    add_matrix(out, p + "attn_norm.weight", L.attn_norm, TensorType::F32);
    add_matrix(out, p + "attn_q.weight", L.wq, type);
    add_matrix(out, p + "attn_k.weight", L.wk, type);
    add_matrix(out, p + "attn_v.weight", L.wv, type);
    add_matrix(out, p + "attn_output.weight", L.wo, type);
    add_matrix(out, p + "ffn_norm.weight", L.ffn_norm, TensorType::F32);
    add_matrix(out, p + "ffn_gate.weight", L.w_gate, type);
    add_matrix(out, p + "ffn_up.weight", L.w_up, type);
    add_matrix(out, p + "ffn_down.weight", L.w_down, type);
  }
  add_matrix(out, "output_norm.weight", w.final_norm, TensorType::F32);
  if (!model.tied_output()) add_matrix(out, "output.weight", w.output, type);
  out.write(path);
}

}  // namespace specula
