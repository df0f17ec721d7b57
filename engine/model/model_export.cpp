#include "model/model_export.h"

#include <cstring>
#include <vector>

#include "model/gguf.h"
#include "model/model.h"
#include "model/tokenizer.h"

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
    case TensorType::Q4_1: return 3;
    case TensorType::Q5_0: return 8;
    case TensorType::Q5_1: return 9;
    default: return 0;
  }
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

// Experts' matrices as one 3-D tensor, ne (cols, rows, n_experts) as llama.cpp stores
// ffn_*_exps, each expert's rows as add_matrix writes them.
void add_experts(GgufWriter& out, const std::string& name, const std::vector<TensorView>& experts, TensorType type) {
  const TensorView& first = experts.front();
  if (first.cols % type_traits(type).block_elements != 0) type = first.type;
  const size_t expert_bytes = row_bytes(type, first.cols) * static_cast<size_t>(first.rows);
  out.add_tensor(name, type, {first.cols, first.rows, static_cast<int64_t>(experts.size())},
                 [experts, type, expert_bytes](uint8_t* dst) {
                   std::vector<float> row(static_cast<size_t>(experts.front().cols));
                   for (size_t e = 0; e < experts.size(); e++) {
                     const TensorView& v = experts[e];
                     uint8_t* at = dst + e * expert_bytes;
                     if (v.type == type) {
                       std::memcpy(at, v.data, v.bytes());
                       continue;
                     }
                     for (int64_t r = 0; r < v.rows; r++) {
                       dequantize_row(v.type, v.row(r), row.data(), v.cols);
                       quantize_row(type, row.data(), at + static_cast<size_t>(r) * row_bytes(type, v.cols), v.cols);
                     }
                   }
                 });
}

// tokenizer.ggml.* as llama.cpp reads them: "llama" (SentencePiece) with scores, or "gpt2"
// (byte-level BPE) with merges and the pre-tokenizer's name. Absent ids are left out.
void write_vocabulary(GgufWriter& out, const Vocabulary& v) {
  std::vector<int32_t> kinds(v.kinds.size());
  for (size_t i = 0; i < v.kinds.size(); i++) kinds[i] = static_cast<int32_t>(v.kinds[i]);
  const bool bpe = v.model == TokenizerModel::ByteLevelBpe;
  out.set("tokenizer.ggml.model", GgufValue::string(bpe ? "gpt2" : "llama"));
  if (bpe) {
    const std::string pre = v.pre.empty() ? pre_tokenizer_name(v.pre_regexes, v.ignore_merges) : v.pre;
    if (pre.empty())
      throw ModelError("the vocabulary's pre-tokenizer rules have no GGUF name (tokenizer.ggml.pre): it cannot be written");
    out.set("tokenizer.ggml.pre", GgufValue::string(pre));
  }
  out.set("tokenizer.ggml.tokens", GgufValue::string_array(v.pieces));
  if (!bpe) out.set("tokenizer.ggml.scores", GgufValue::f32_array(v.scores));
  out.set("tokenizer.ggml.token_type", GgufValue::i32_array(kinds));
  if (bpe) {
    out.set("tokenizer.ggml.merges", GgufValue::string_array(v.merges));
  } else {
    out.set("tokenizer.ggml.add_space_prefix", GgufValue::boolean(v.add_dummy_prefix));
  }
  const std::pair<const char*, int> ids[] = {
      {"tokenizer.ggml.bos_token_id", v.bos},         {"tokenizer.ggml.eos_token_id", v.eos},
      {"tokenizer.ggml.unknown_token_id", v.unk},     {"tokenizer.ggml.padding_token_id", v.pad},
      {"tokenizer.ggml.eot_token_id", v.eot},         {"tokenizer.ggml.eom_token_id", v.eom},
      {"tokenizer.ggml.fim_pre_token_id", v.fim.prefix}, {"tokenizer.ggml.fim_suf_token_id", v.fim.suffix},
      {"tokenizer.ggml.fim_mid_token_id", v.fim.middle}, {"tokenizer.ggml.fim_pad_token_id", v.fim.pad},
      {"tokenizer.ggml.fim_rep_token_id", v.fim.repo},   {"tokenizer.ggml.fim_sep_token_id", v.fim.sep},
  };
  for (const auto& [key, id] : ids)
    if (id >= 0) out.set(key, GgufValue::u32(static_cast<uint32_t>(id)));
  if (v.fim.spm) out.set("specula.fim.order", GgufValue::string("spm"));
  out.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(v.add_bos));
  if (v.add_eos) out.set("tokenizer.ggml.add_eos_token", GgufValue::boolean(true));
}

}  // namespace

void write_gguf_model(const Model& model, const std::string& path, TensorType type) {
  const ModelConfig& c = model.config;
  if (architecture_rope_style(c.architecture) != c.rope_style) {
    throw ModelError(path + ": a " + c.architecture + " model whose rotary embedding turns " +
                     std::string(rope_style_name(c.rope_style)) + " has no GGUF layout");
  }
  if (c.architecture == "gpt-oss") {  // its sinks, biases, YaRN and window have no writer here
    throw ModelError(path + ": writing gpt-oss models as GGUF is not supported");
  }
  const std::string a = c.architecture + ".";
  const auto u32 = [](int v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
  GgufWriter out;
  out.set("general.architecture", GgufValue::string(c.architecture));
  out.set("general.name", GgufValue::string(c.name));
  out.set("general.file_type", GgufValue::u32(llama_file_type(type)));
  out.set(a + "context_length", u32(c.context_length));
  out.set(a + "embedding_length", u32(c.dim));
  out.set(a + "block_count", u32(c.n_layers));
  out.set(a + (c.has_experts() ? "expert_feed_forward_length" : "feed_forward_length"), u32(c.hidden_dim));
  if (c.has_experts()) {
    out.set(a + "expert_count", u32(c.n_experts));
    out.set(a + "expert_used_count", u32(c.n_experts_used));
    out.set(a + "expert_weights_norm", GgufValue::boolean(c.expert_weights_norm));
  }
  out.set(a + "attention.head_count", u32(c.n_heads));
  out.set(a + "attention.head_count_kv", u32(c.n_kv_heads));
  if (c.explicit_head_dim > 0) {
    out.set(a + "attention.key_length", u32(c.explicit_head_dim));
    out.set(a + "attention.value_length", u32(c.explicit_head_dim));
  }
  out.set(a + "rope.dimension_count", u32(c.head_dim()));
  out.set(a + "rope.freq_base", GgufValue::f32(c.rope_theta));
  if (c.rope_linear_factor != 1.0f) {
    out.set(a + "rope.scaling.type", GgufValue::string("linear"));
    out.set(a + "rope.scaling.factor", GgufValue::f32(c.rope_linear_factor));
  }
  out.set(a + (c.norm == NormKind::Layer ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon"),
          GgufValue::f32(c.norm_eps));
  if (c.sliding_window > 0) out.set(a + "attention.sliding_window", u32(c.sliding_window));
  out.set(a + "vocab_size", u32(c.vocab_size));

  if (model.tokenizer) write_vocabulary(out, model.tokenizer->vocabulary());

  const Weights& w = model.weights;
  if (!c.rope_freq_factors.empty()) {
    const TensorView factors{TensorType::F32, static_cast<int64_t>(c.rope_freq_factors.size()), 1,
                             c.rope_freq_factors.data()};
    add_matrix(out, "rope_freqs.weight", factors, TensorType::F32);
  }
  add_matrix(out, "token_embd.weight", w.token_embedding, type);
  for (size_t l = 0; l < w.layers.size(); l++) {
    const LayerWeights& L = w.layers[l];
    const std::string p = "blk." + std::to_string(l) + ".";
    add_matrix(out, p + "attn_norm.weight", L.attn_norm, TensorType::F32);
    if (!L.attn_norm_bias.empty()) add_matrix(out, p + "attn_norm.bias", L.attn_norm_bias, TensorType::F32);
    add_matrix(out, p + "attn_q.weight", L.wq, type);
    add_matrix(out, p + "attn_k.weight", L.wk, type);
    add_matrix(out, p + "attn_v.weight", L.wv, type);
    // biases and q/k norms, where the model has them, stay f32 as llama.cpp's converter keeps them
    for (const auto& [name, v] : {std::pair{"attn_q.bias", &L.bq}, {"attn_k.bias", &L.bk}, {"attn_v.bias", &L.bv},
                                  {"attn_q_norm.weight", &L.q_norm}, {"attn_k_norm.weight", &L.k_norm},
                                  {"attn_output.bias", &L.bo}, {"post_attention_norm.weight", &L.attn_post_norm}}) {
      if (!v->empty()) add_matrix(out, p + name, *v, TensorType::F32);
    }
    add_matrix(out, p + "attn_output.weight", L.wo, type);
    add_matrix(out, p + "ffn_norm.weight", L.ffn_norm, TensorType::F32);
    if (!L.ffn_norm_bias.empty()) add_matrix(out, p + "ffn_norm.bias", L.ffn_norm_bias, TensorType::F32);
    if (c.has_experts()) {
      add_matrix(out, p + "ffn_gate_inp.weight", L.router, L.router.type);  // as stored: llama-quantize keeps routers
      add_experts(out, p + "ffn_gate_exps.weight", L.expert_gate, type);
      add_experts(out, p + "ffn_up_exps.weight", L.expert_up, type);
      add_experts(out, p + "ffn_down_exps.weight", L.expert_down, type);
      continue;
    }
    if (!L.w_gate.empty()) add_matrix(out, p + "ffn_gate.weight", L.w_gate, type);
    add_matrix(out, p + "ffn_up.weight", L.w_up, type);
    add_matrix(out, p + "ffn_down.weight", L.w_down, type);
    if (!L.b_up.empty()) add_matrix(out, p + "ffn_up.bias", L.b_up, TensorType::F32);
    if (!L.b_down.empty()) add_matrix(out, p + "ffn_down.bias", L.b_down, TensorType::F32);
    if (!L.ffn_post_norm.empty()) add_matrix(out, p + "post_ffw_norm.weight", L.ffn_post_norm, TensorType::F32);
  }
  add_matrix(out, "output_norm.weight", w.final_norm, TensorType::F32);
  if (!w.final_norm_bias.empty()) add_matrix(out, "output_norm.bias", w.final_norm_bias, TensorType::F32);
  if (!model.tied_output()) add_matrix(out, "output.weight", w.output, type);
  out.write(path);
}

}  // namespace specula
