#include "compute/device_plan.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace specula {

std::vector<AttentionWork> partition_attention(const BatchPlan& plan, int query_tile) {
  if (query_tile <= 0) throw std::invalid_argument("attention query tile must be positive");
  std::vector<AttentionWork> work;
  for (int s = 0; s < plan.n_seqs; ++s) {
    for (int t = plan.seq_offsets[s]; t < plan.seq_offsets[s + 1]; t += query_tile) {
      work.push_back({s, t, std::min(query_tile, plan.seq_offsets[s + 1] - t)});
    }
  }
  return work;
}

PackedPlan pack_plan(const BatchPlan& plan, const std::vector<int32_t>& tokens,
                     const std::vector<AttentionWork>& work) {
  if (tokens.size() != static_cast<size_t>(plan.n_tokens)) {
    throw std::invalid_argument("pack_plan: " + std::to_string(tokens.size()) + " tokens for a plan of " +
                                std::to_string(plan.n_tokens));
  }
  PackedPlan packed;
  std::vector<int32_t>& d = packed.data;
  const auto append = [&d](const std::vector<int32_t>& v) {
    const size_t at = d.size();
    d.insert(d.end(), v.begin(), v.end());
    return at;
  };
  packed.tokens = append(tokens);
  packed.positions = append(plan.positions);
  packed.cache_slots = append(plan.cache_slots);
  packed.table_offsets = append(plan.table_offsets);
  packed.block_tables = append(plan.block_tables);
  packed.logit_rows = append(plan.logit_rows);
  packed.work = d.size();
  for (const AttentionWork& w : work) d.insert(d.end(), {w.seq, w.first_token, w.n_queries});
  packed.n_work = static_cast<int>(work.size());
  return packed;
}

namespace {

std::vector<const TensorView*> matrices(const Weights& w) {
  std::vector<const TensorView*> all{&w.token_embedding, &w.output};
  for (const LayerWeights& l : w.layers) {
    all.insert(all.end(), {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down});
  }
  return all;
}

}  // namespace

TensorType device_matrix_type(const Weights& weights) {
  const auto all = matrices(weights);
  const auto every = [&](TensorType t) {
    return std::all_of(all.begin(), all.end(), [t](const TensorView* m) { return m->type == t; });
  };
  if (every(TensorType::F32)) return TensorType::F32;
  if (every(TensorType::BF16)) return TensorType::BF16;
  return TensorType::F16;
}

void convert_matrix(const TensorView& src, TensorType type, void* dst) {
  if (type != TensorType::F32 && type != TensorType::F16 && type != TensorType::BF16) {
    throw std::invalid_argument("device matrices are f32, f16 or bf16, not " + std::string(type_traits(type).name));
  }
  if (src.type == type) {
    std::memcpy(dst, src.data, src.bytes());
    return;
  }
  std::vector<float> row(static_cast<size_t>(src.cols));
  for (int64_t r = 0; r < src.rows; ++r) {
    dequantize_row(src.type, src.row(r), row.data(), src.cols);
    if (type == TensorType::F32) {
      std::memcpy(static_cast<float*>(dst) + r * src.cols, row.data(), row.size() * sizeof(float));
      continue;
    }
    uint16_t* out = static_cast<uint16_t*>(dst) + r * src.cols;
    for (int64_t c = 0; c < src.cols; ++c) {
      out[c] = type == TensorType::F16 ? fp32_to_fp16(row[static_cast<size_t>(c)]) : fp32_to_bf16(row[static_cast<size_t>(c)]);
    }
  }
}

size_t device_weight_bytes(const Model& model) {
  const Weights& w = model.weights;
  const size_t element = row_bytes(device_matrix_type(w), 1);
  size_t bytes = 0;
  for (const TensorView* m : matrices(w)) {
    if (m == &w.output && model.tied_output()) continue;
    bytes += static_cast<size_t>(m->rows * m->cols) * element;
  }
  const size_t norms = 2 * w.layers.size() + 1;
  bytes += norms * static_cast<size_t>(model.config.dim) * sizeof(float);
  for (const LayerWeights& l : w.layers) {  // biases and q/k norms, f32, where the model has them
    for (const TensorView* v : {&l.bq, &l.bk, &l.bv, &l.bo, &l.q_norm, &l.k_norm}) {
      bytes += static_cast<size_t>(v->cols * v->rows) * sizeof(float);
    }
  }
  return bytes;
}

std::vector<float> qkv_bias_row(const LayerWeights& layer) {
  if (layer.bq.empty() && layer.bk.empty() && layer.bv.empty()) return {};
  const int64_t q_dim = layer.wq.rows, kv_dim = layer.wk.rows;
  std::vector<float> row(static_cast<size_t>(q_dim + 2 * kv_dim), 0.0f);
  int64_t at = 0;
  for (const auto& [bias, width] : {std::pair{&layer.bq, q_dim}, {&layer.bk, kv_dim}, {&layer.bv, kv_dim}}) {
    if (!bias->empty()) dequantize_row(bias->type, bias->data, row.data() + at, width);
    at += width;
  }
  return row;
}

}  // namespace specula
