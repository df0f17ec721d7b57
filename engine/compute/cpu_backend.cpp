// The CPU backend: the forward pass of llama, qwen2 and qwen3 over a ragged batch, reading
// top to bottom (biases, q/k norms and the rope style are stages a model may or may not use).
//
// All tokens of the batch go through each weight matrix together (one pass over the
// weights per layer, whatever the number of sequences); attention is per token over its
// own sequence's cache. Every step computes each token's values independently of the
// others in the same fixed order, so a sequence's logits do not depend on the batch or
// on how its tokens were split across calls (bit for bit), nor on the thread count.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "compute/backend.h"
#include "compute/cpu_kernels.h"
#include "compute/thread_pool.h"

namespace specula {

namespace {

// Keys and values of every layer as f32, laid out by cache slot (block * block_size +
// offset), so a block table maps positions straight to rows.
class CpuKvStorage : public KvStorage {
 public:
  CpuKvStorage(int n_layers, int slots, int block_size, int kv_dim)
      : n_layers_(n_layers),
        slots_(slots),
        block_size_(block_size),
        kv_dim_(kv_dim),
        keys_(static_cast<size_t>(n_layers) * slots * kv_dim),
        values_(keys_.size()) {}

  void copy_block(int src_block, int dst_block) override {
    const size_t block_floats = static_cast<size_t>(block_size_) * kv_dim_;
    for (int l = 0; l < n_layers_; ++l) {
      for (std::vector<float>* data : {&keys_, &values_}) {
        float* layer = data->data() + layer_offset(l);
        std::memcpy(layer + dst_block * block_floats, layer + src_block * block_floats,
                    block_floats * sizeof(float));
      }
    }
  }

  int n_layers() const { return n_layers_; }
  int kv_dim() const { return kv_dim_; }
  float* keys(int layer) { return keys_.data() + layer_offset(layer); }      // (slots, kv_dim)
  float* values(int layer) { return values_.data() + layer_offset(layer); }  // (slots, kv_dim)

 private:
  size_t layer_offset(int layer) const { return static_cast<size_t>(layer) * slots_ * kv_dim_; }

  int n_layers_;
  int slots_;
  int block_size_;
  int kv_dim_;
  std::vector<float> keys_;    // (n_layers, slots, kv_dim)
  std::vector<float> values_;  // (n_layers, slots, kv_dim)
};

const float* norm_weights(const TensorView& view, const char* what) {
  if (view.type != TensorType::F32) {
    throw std::invalid_argument(std::string("cpu backend: ") + what + " must be f32");
  }
  return static_cast<const float*>(view.data);
}

// out = x / rms(x) * weight, for one row of n values. Sum of squares in float, in order
// (as llama2.c does).
void rmsnorm(float* out, const float* x, const float* weight, int n, float eps) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int i = 0; i < n; ++i) out[i] = weight[i] * (scale * x[i]);
}

// q · k for one head. Eight partial sums in a fixed order (lane i takes elements i, i+8,
// ...), then a fixed pairwise sum: the same bits for every caller, and a loop the compiler
// vectorizes without reordering anything.
float dot(const float* a, const float* b, int n) {
  constexpr int kLanes = 8;
  float partial[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) partial[l] += a[i + l] * b[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) partial[l] += a[i] * b[i];
  return ((partial[0] + partial[4]) + (partial[2] + partial[6])) +
         ((partial[1] + partial[5]) + (partial[3] + partial[7]));
}

// rows[t][i] += bias[i] for n rows of `width` values; nothing when the model has no bias.
void add_bias(float* rows, int n, int width, const TensorView& bias) {
  if (bias.empty()) return;
  const float* b = norm_weights(bias, "bias");
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < width; ++i) rows[static_cast<size_t>(t) * width + i] += b[i];
  }
}

// Rotates each head's pairs by the token's angles: pair i is (x[2i], x[2i+1]) in the
// adjacent style, (x[i], x[i + head_dim/2]) in the halves style.
void rope(float* x, int n_heads, int head_dim, RopeStyle style, const float* cos_t, const float* sin_t) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int i = 0; i < half; ++i) {
      float& first = style == RopeStyle::Adjacent ? v[2 * i] : v[i];
      float& second = style == RopeStyle::Adjacent ? v[2 * i + 1] : v[i + half];
      const float a = first, b = second;
      first = a * cos_t[i] - b * sin_t[i];
      second = a * sin_t[i] + b * cos_t[i];
    }
  }
}

class CpuBackend : public Backend {
 public:
  CpuBackend(int threads, SimdLevel simd) : pool_(threads), simd_(simd) {}

  std::string name() const override {
    return "cpu (" + std::string(simd_name(simd_)) + ", " + std::to_string(pool_.size()) +
           (pool_.size() == 1 ? " thread)" : " threads)");
  }
  int cpu_threads() const override { return pool_.size(); }

  std::unique_ptr<KvCache> create_cache(const Model& model, int max_tokens, int n_layers,
                                        int block_size) override {
    const ModelConfig& c = model.config;
    if (n_layers < 0) n_layers = c.n_layers;
    if (n_layers == 0 || n_layers > c.n_layers) {
      throw std::invalid_argument("cache for " + std::to_string(n_layers) + " layers of a " +
                                  std::to_string(c.n_layers) + "-layer model");
    }
    if (max_tokens <= 0 || block_size <= 0) {
      throw std::invalid_argument("cache needs a positive size and block size");
    }
    const int num_blocks = (max_tokens + block_size - 1) / block_size;
    auto storage =
        std::make_unique<CpuKvStorage>(n_layers, num_blocks * block_size, block_size, c.kv_dim());
    return std::make_unique<KvCache>(block_size, num_blocks, std::move(storage));
  }

  void forward(const Model& model, KvCache& cache, const RaggedBatch& batch,
               std::vector<float>& logits, int n_layers) override {
    const ModelConfig& c = model.config;
    const Weights& w = model.weights;
    if (n_layers < 0) n_layers = c.n_layers;
    auto* kv = dynamic_cast<CpuKvStorage*>(cache.storage());
    if (kv == nullptr) throw std::invalid_argument("cpu backend: the cache was not made by it");
    if (n_layers == 0 || n_layers > c.n_layers || n_layers > kv->n_layers()) {
      throw std::invalid_argument("cpu backend: cannot run " + std::to_string(n_layers) +
                                  " layers with this model and cache");
    }
    for (int32_t token : batch.tokens) {
      if (token < 0 || token >= c.vocab_size) {
        throw std::invalid_argument("token id " + std::to_string(token) +
                                    " outside the vocabulary of " + std::to_string(c.vocab_size));
      }
    }
    const BatchPlan plan =
        plan_batch(cache, batch, c.context_length > 0 ? c.context_length : INT_MAX);

    const int n = plan.n_tokens, dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;
    const int head_dim = c.head_dim(), n_heads = c.n_heads;
    const int heads_per_kv = c.n_heads / c.n_kv_heads;
    x_.resize(static_cast<size_t>(n) * dim);
    xb_.resize(static_cast<size_t>(n) * dim);
    q_.resize(static_cast<size_t>(n) * q_dim);
    k_.resize(static_cast<size_t>(n) * kv_dim);
    v_.resize(static_cast<size_t>(n) * kv_dim);
    attn_.resize(static_cast<size_t>(n) * q_dim);
    gate_.resize(static_cast<size_t>(n) * hidden);
    up_.resize(static_cast<size_t>(n) * hidden);

    // token embeddings
    for (int t = 0; t < n; ++t) {
      dequantize_row(w.token_embedding.type, w.token_embedding.row(batch.tokens[t]),
                     x_.data() + static_cast<size_t>(t) * dim, dim);
    }

    // rotary angles per token: position * frequency of each pair (theta^(-2i / head_dim)
    // with the model's scaling), in double
    const int half = head_dim / 2;
    const std::vector<double> frequencies = c.rope_frequencies();
    cos_.resize(static_cast<size_t>(n) * half);
    sin_.resize(static_cast<size_t>(n) * half);
    for (int t = 0; t < n; ++t) {
      for (int i = 0; i < half; ++i) {
        const double angle = plan.positions[t] * frequencies[i];
        cos_[t * half + i] = static_cast<float>(std::cos(angle));
        sin_[t * half + i] = static_cast<float>(std::sin(angle));
      }
    }

    const int block_size = cache.block_size();
    const float attn_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    scores_.resize(static_cast<size_t>(pool_.size()) * std::max(1, plan.max_context));

    for (int l = 0; l < n_layers; ++l) {
      const LayerWeights& lw = w.layers[l];

      // attention: q, k, v projections of every token
      const float* attn_norm = norm_weights(lw.attn_norm, "attention norm");
      for (int t = 0; t < n; ++t) {
        rmsnorm(xb_.data() + t * dim, x_.data() + t * dim, attn_norm, dim, c.norm_eps);
      }
      matmul(lw.wq, xb_.data(), n, q_.data(), pool_, simd_);
      matmul(lw.wk, xb_.data(), n, k_.data(), pool_, simd_);
      matmul(lw.wv, xb_.data(), n, v_.data(), pool_, simd_);

      // biases of q, k, v (qwen2; llama with attention biases)
      add_bias(q_.data(), n, q_dim, lw.bq);
      add_bias(k_.data(), n, kv_dim, lw.bk);
      add_bias(v_.data(), n, kv_dim, lw.bv);

      // qwen3: RMSNorm of every head of q and k, before the rotation
      if (!lw.q_norm.empty()) {
        const float* q_norm = norm_weights(lw.q_norm, "q norm");
        const float* k_norm = norm_weights(lw.k_norm, "k norm");
        for (int t = 0; t < n; ++t) {
          for (int h = 0; h < n_heads; ++h) {
            float* head = q_.data() + static_cast<size_t>(t) * q_dim + h * head_dim;
            rmsnorm(head, head, q_norm, head_dim, c.norm_eps);
          }
          for (int h = 0; h < c.n_kv_heads; ++h) {
            float* head = k_.data() + static_cast<size_t>(t) * kv_dim + h * head_dim;
            rmsnorm(head, head, k_norm, head_dim, c.norm_eps);
          }
        }
      }

      // rotary embedding of q and k, then k and v into the cache
      float* keys = kv->keys(l);
      float* values = kv->values(l);
      for (int t = 0; t < n; ++t) {
        rope(q_.data() + t * q_dim, n_heads, head_dim, c.rope_style, cos_.data() + t * half,
             sin_.data() + t * half);
        rope(k_.data() + t * kv_dim, c.n_kv_heads, head_dim, c.rope_style, cos_.data() + t * half,
             sin_.data() + t * half);
        const size_t slot = static_cast<size_t>(plan.cache_slots[t]);
        std::memcpy(keys + slot * kv_dim, k_.data() + t * kv_dim, kv_dim * sizeof(float));
        std::memcpy(values + slot * kv_dim, v_.data() + t * kv_dim, kv_dim * sizeof(float));
      }

      // each (token, head) attends over its sequence's positions 0..its own
      pool_.parallel_for(
          static_cast<int64_t>(n) * n_heads, [&](int64_t begin, int64_t end, int thread) {
            float* scores =
                scores_.data() + static_cast<size_t>(thread) * std::max(1, plan.max_context);
            for (int64_t item = begin; item < end; ++item) {
              const int t = static_cast<int>(item / n_heads), h = static_cast<int>(item % n_heads);
              const int seq = plan.token_seq[t];
              const int32_t* table = plan.block_tables.data() + plan.table_offsets[seq];
              const int kv_offset = (h / heads_per_kv) * head_dim;
              const float* q = q_.data() + static_cast<size_t>(t) * q_dim + h * head_dim;
              const int length = plan.positions[t] + 1;
              float max_score = -INFINITY;
              for (int p = 0; p < length; ++p) {
                const size_t slot =
                    static_cast<size_t>(table[p / block_size]) * block_size + p % block_size;
                const float* k = keys + slot * kv_dim + kv_offset;
                scores[p] = dot(q, k, head_dim) * attn_scale;
                max_score = std::max(max_score, scores[p]);
              }
              float sum = 0.0f;
              for (int p = 0; p < length; ++p) {
                scores[p] = std::exp(scores[p] - max_score);
                sum += scores[p];
              }
              float* out = attn_.data() + static_cast<size_t>(t) * q_dim + h * head_dim;
              std::fill(out, out + head_dim, 0.0f);
              for (int p = 0; p < length; ++p) {
                const size_t slot =
                    static_cast<size_t>(table[p / block_size]) * block_size + p % block_size;
                const float* v = values + slot * kv_dim + kv_offset;
                const float a = scores[p] / sum;
                for (int i = 0; i < head_dim; ++i) out[i] += a * v[i];
              }
            }
          });
      matmul(lw.wo, attn_.data(), n, xb_.data(), pool_, simd_);
      add_bias(xb_.data(), n, dim, lw.bo);
      for (size_t i = 0; i < x_.size(); ++i) x_[i] += xb_[i];

      // feed-forward: down(silu(gate(x)) * up(x))
      const float* ffn_norm = norm_weights(lw.ffn_norm, "feed-forward norm");
      for (int t = 0; t < n; ++t) {
        rmsnorm(xb_.data() + t * dim, x_.data() + t * dim, ffn_norm, dim, c.norm_eps);
      }
      matmul(lw.w_gate, xb_.data(), n, gate_.data(), pool_, simd_);
      matmul(lw.w_up, xb_.data(), n, up_.data(), pool_, simd_);
      pool_.parallel_for(
          static_cast<int64_t>(gate_.size()),
          [&](int64_t begin, int64_t end, int) {
            for (int64_t i = begin; i < end; ++i) {
              const float g = gate_[i];
              gate_[i] = g / (1.0f + std::exp(-g)) * up_[i];
            }
          },
          1024);
      matmul(lw.w_down, gate_.data(), n, xb_.data(), pool_, simd_);
      for (size_t i = 0; i < x_.size(); ++i) x_[i] += xb_[i];
    }

    // final norm and output matrix, only for the rows the caller wants
    const int rows = static_cast<int>(plan.logit_rows.size());
    const float* final_norm = norm_weights(w.final_norm, "final norm");
    for (int r = 0; r < rows; ++r) {
      rmsnorm(xb_.data() + r * dim, x_.data() + static_cast<size_t>(plan.logit_rows[r]) * dim,
              final_norm, dim, c.norm_eps);
    }
    logits.resize(static_cast<size_t>(rows) * c.vocab_size);
    if (rows > 0) matmul(w.output, xb_.data(), rows, logits.data(), pool_, simd_);
  }

 private:
  ThreadPool pool_;
  SimdLevel simd_;
  // Activations of the current batch, reused across calls.
  std::vector<float> x_;       // (n_tokens, dim) residual stream
  std::vector<float> xb_;      // (n_tokens, dim) normed input / projection output
  std::vector<float> q_;       // (n_tokens, q_dim)
  std::vector<float> k_;       // (n_tokens, kv_dim)
  std::vector<float> v_;       // (n_tokens, kv_dim)
  std::vector<float> attn_;    // (n_tokens, q_dim) attention output before wo
  std::vector<float> gate_;    // (n_tokens, hidden_dim)
  std::vector<float> up_;      // (n_tokens, hidden_dim)
  std::vector<float> cos_;     // (n_tokens, head_dim / 2)
  std::vector<float> sin_;     // (n_tokens, head_dim / 2)
  std::vector<float> scores_;  // (threads, max_context)
};

}  // namespace

std::unique_ptr<Backend> create_cpu_backend(int threads) {
  return std::make_unique<CpuBackend>(threads, best_simd_level());
}

std::unique_ptr<Backend> create_cpu_backend(int threads, SimdLevel simd) {
  const std::vector<SimdLevel> levels = supported_simd_levels();
  if (std::find(levels.begin(), levels.end(), simd) == levels.end()) {
    throw std::invalid_argument("this processor cannot run the " + std::string(simd_name(simd)) + " kernels");
  }
  return std::make_unique<CpuBackend>(threads, simd);
}

}  // namespace specula
