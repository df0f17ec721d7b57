// The CPU backend: the forward pass of llama, qwen2, qwen3, qwen3moe, gemma3, gpt-oss and
// starcoder2 over a ragged batch, reading top to bottom (biases, q/k norms, post-norms,
// LayerNorm, the rope style, the activation, a gate, sliding windows, attention sinks and a
// mixture of experts are stages a model may or may not use).
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
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "compute/backend.h"
#include "compute/cpu_kernels.h"
#include "compute/host_memory.h"
#include "common/thread_pool.h"

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

// out = (x - mean) / sqrt(var + eps) * weight + bias, for one row of n values: torch's
// LayerNorm (the biased variance of the centred values); sums in float, in order.
void layernorm(float* out, const float* x, const float* weight, const float* bias, int n, float eps) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += x[i];
  const float mean = sum / static_cast<float>(n);
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += (x[i] - mean) * (x[i] - mean);
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int i = 0; i < n; ++i) out[i] = weight[i] * ((x[i] - mean) * scale) + (bias ? bias[i] : 0.0f);
}

// The model's norm of n rows of `dim` values, from x into out: RMSNorm, or LayerNorm with
// its bias (starcoder2).
void normalize_rows(float* out, const float* x, int n, int dim, const ModelConfig& c, const TensorView& weight,
                    const TensorView& bias, const char* what) {
  const float* w = norm_weights(weight, what);
  const float* b = bias.empty() ? nullptr : norm_weights(bias, what);
  for (int t = 0; t < n; ++t) {
    const size_t row = static_cast<size_t>(t) * dim;
    if (c.norm == NormKind::Layer) {
      layernorm(out + row, x + row, w, b, dim, c.norm_eps);
    } else {
      rmsnorm(out + row, x + row, w, dim, c.norm_eps);
    }
  }
}

// Each of n rows of `dim` values RMS-normed in place (gemma3's norms of attention's and the
// feed-forward's outputs); nothing when the model has no such norm.
void post_norm(float* rows, int n, int dim, const TensorView& weight, float eps, const char* what) {
  if (weight.empty()) return;
  const float* w = norm_weights(weight, what);
  for (int t = 0; t < n; ++t) rmsnorm(rows + static_cast<size_t>(t) * dim, rows + static_cast<size_t>(t) * dim, w, dim, eps);
}

// gate[i] <- act(gate[i]) * up[i], or act(gate[i]) without `up` (a feed-forward without a
// gate passes its up projection here): SiLU, or GELU with the tanh approximation (in float,
// as transformers' gelu_pytorch_tanh computes in the activations' type), or gpt-oss's
// clamped SwiGLU (as transformers' GptOssExperts: gate clamped above, up both sides,
// (up + 1) times; always with `up`).
void gated_activation(float* gate, const float* up, int64_t begin, int64_t end, Activation activation) {
  if (activation == Activation::Silu) {
    for (int64_t i = begin; i < end; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * (up ? up[i] : 1.0f);
    return;
  }
  if (activation == Activation::SwigluClamped) {
    constexpr float kAlpha = 1.702f, kLimit = 7.0f;
    for (int64_t i = begin; i < end; ++i) {
      const float g = std::min(gate[i], kLimit);
      const float u = std::clamp(up[i], -kLimit, kLimit);
      gate[i] = (u + 1.0f) * (g / (1.0f + std::exp(-kAlpha * g)));
    }
    return;
  }
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = begin; i < end; ++i) {
    const float g = gate[i];
    const float gelu = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g)));
    gate[i] = up ? gelu * up[i] : gelu;
  }
}

// One token's experts: softmax of its router logits over all n_experts (in float, the sum in
// id order), then the k most probable, ties to the lower id (as a stable sort orders them,
// and ggml's earlier argsort, which swapped only on a strict difference; today's std::sort
// in ggml and torch.topk leave equal values in no promised order), with their probabilities, renormalised to sum 1 when `normalise`
// (the sum in rank order). `experts` and `weights` receive k values, by rank.
void route_token(const float* logits, int n_experts, int k, bool normalise, float* probs, int32_t* experts,
                 float* weights) {
  float max = logits[0];
  for (int e = 1; e < n_experts; ++e) max = std::max(max, logits[e]);
  float sum = 0.0f;
  for (int e = 0; e < n_experts; ++e) {
    probs[e] = std::exp(logits[e] - max);
    sum += probs[e];
  }
  for (int e = 0; e < n_experts; ++e) probs[e] /= sum;
  // k <= n_experts, so an expert is always left; NaN activations pick the lowest ids left
  // (and give NaN weights) rather than none
  constexpr float kTaken = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < k; ++r) {
    int best = -1;
    for (int e = 0; e < n_experts; ++e) {
      if (probs[e] != kTaken && (best < 0 || probs[e] > probs[best])) best = e;
    }
    experts[r] = best;
    weights[r] = probs[best];
    probs[best] = kTaken;
  }
  if (!normalise) return;
  float total = 0.0f;
  for (int r = 0; r < k; ++r) total += weights[r];
  for (int r = 0; r < k; ++r) weights[r] /= total;
}

// gpt-oss's routing: the k largest logits, ties to the lower id, weighed by a softmax over
// those k alone (max first, the sum in rank order), as transformers' GptOssTopKRouter and
// llama.cpp's SOFTMAX_WEIGHT gating. `scratch` holds n_experts values.
void route_token_top_k_first(const float* logits, int n_experts, int k, float* scratch, int32_t* experts,
                             float* weights) {
  constexpr float kTaken = -std::numeric_limits<float>::infinity();
  std::copy(logits, logits + n_experts, scratch);
  for (int r = 0; r < k; ++r) {
    int best = -1;
    for (int e = 0; e < n_experts; ++e) {
      if (scratch[e] != kTaken && (best < 0 || scratch[e] > scratch[best])) best = e;
    }
    if (best < 0) best = r;  // every logit -inf: the lowest ids (NaN weights follow)
    experts[r] = best;
    weights[r] = logits[best];
    scratch[best] = kTaken;
  }
  const float max = weights[0];
  float sum = 0.0f;
  for (int r = 0; r < k; ++r) sum += weights[r] = std::exp(weights[r] - max);
  for (int r = 0; r < k; ++r) weights[r] /= sum;
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

// The weight matrices repacked for the kernels (cpu_kernels.h), made at first use and kept
// for every later forward, keyed by the matrix's data pointer: a draft that runs the first
// layers of its target (layers:K) reads the target's own matrices and so shares their
// repacked copies. Each model's storage is held while its matrices are, so no address can
// be reused by another model meanwhile; a model that nobody else holds any more has its
// matrices dropped at the next forward.
class PackedWeights {
 public:
  const PackedMatrix& get(const Model& model, const TensorView& w, SimdLevel level,
                          ThreadPool& pool) {
    if (has(w)) return packed_.at(w.data);
    PackedMatrix m = pack_matrix(w, level, pool);
    pin(model).matrices.push_back(w.data);
    return packed_.insert_or_assign(w.data, std::move(m)).first->second;
  }

  bool has(const TensorView& w) const {
    const auto it = packed_.find(w.data);
    return it != packed_.end() && it->second.type == w.type && it->second.rows == w.rows && it->second.cols == w.cols;
  }

  // Drops the matrices of models whose storage only this cache still holds.
  void release_unused() {
    for (size_t i = 0; i < pins_.size();) {
      const auto& storage = pins_[i].storage;
      if (std::all_of(storage.begin(), storage.end(),
                      [](const std::shared_ptr<const void>& s) { return s.use_count() == 1; })) {
        for (const void* key : pins_[i].matrices) packed_.erase(key);
        pins_.erase(pins_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }

 private:
  struct ModelPin {
    std::vector<std::shared_ptr<const void>> storage;  // copies of Model::storage
    std::vector<const void*> matrices;                  // keys of its packed matrices
  };

  ModelPin& pin(const Model& model) {
    for (ModelPin& p : pins_) {
      if (!model.storage.empty() && p.storage.size() == model.storage.size() &&
          p.storage.front() == model.storage.front()) {
        return p;
      }
    }
    pins_.push_back({model.storage, {}});
    return pins_.back();
  }

  std::unordered_map<const void*, PackedMatrix> packed_;
  std::vector<ModelPin> pins_;
};

// cos and sin of every token's rotary angles: position * frequency of each pair, in double.
// Both times `magnitude` (YaRN's scaling of q and k; 1 otherwise).
void rotary_angles(const std::vector<double>& frequencies, float magnitude, const BatchPlan& plan,
                   std::vector<float>& cos, std::vector<float>& sin) {
  const size_t half = frequencies.size();
  cos.resize(static_cast<size_t>(plan.n_tokens) * half);
  sin.resize(cos.size());
  for (int t = 0; t < plan.n_tokens; ++t) {
    for (size_t i = 0; i < half; ++i) {
      const double angle = plan.positions[t] * frequencies[i];
      cos[t * half + i] = static_cast<float>(std::cos(angle)) * magnitude;
      sin[t * half + i] = static_cast<float>(std::sin(angle)) * magnitude;
    }
  }
}

class CpuBackend : public Backend {
 public:
  CpuBackend(int threads, SimdLevel simd, bool split_every_job)
      : pool_(threads, split_every_job ? 0 : ThreadPool::kSerialWork), simd_(simd) {
    if (!simd_supported(simd)) {
      throw std::invalid_argument("cpu backend: this processor cannot run the " +
                                  std::string(simd_name(simd)) + " kernels");
    }
  }

  std::string name() const override {
    return "cpu (" + std::string(simd_name(simd_)) + ", " + std::to_string(pool_.size()) +
           (pool_.size() == 1 ? " thread)" : " threads)");
  }
  int cpu_threads() const override { return pool_.size(); }

  // Repacks every matrix a forward of `model` multiplies by, so that it does not land in its
  // first forward: a draft model's first forward runs inside decoding, where the repacking
  // and the page faults of its mapped file counted against its drafts. First checks that the
  // copies fit in the memory the process can still take (ModelError naming the sizes).
  void prepare(const Model& model, const std::function<bool(double)>& progress) override {
    std::vector<const TensorView*> matrices;
    for (const LayerWeights& lw : model.weights.layers) {
      const auto layer = lw.matrices();
      matrices.insert(matrices.end(), layer.begin(), layer.end());
    }
    matrices.push_back(&model.weights.output);
    uint64_t bytes = 0;
    for (const TensorView* w : matrices) {
      if (!weights_.has(*w)) bytes += packed_layout(*w, simd_).owned_bytes;
    }
    const std::string shortfall =
        bytes == 0 ? std::string()
                   : memory_shortfall(bytes, "the CPU backend's copy of the weights of " +
                                                 (model.path.empty() ? std::string("the model") : model.path),
                                      host_memory_room());
    if (!shortfall.empty()) {
      throw ModelError(shortfall + ": close other programs, or choose a smaller or more strongly quantized model file");
    }
    for (size_t i = 0; i < matrices.size(); ++i) {
      weights_.get(model, *matrices[i], simd_, pool_);
      if (progress && !progress(static_cast<double>(i + 1) / static_cast<double>(matrices.size()))) {
        throw ModelError("preparing the weights was cancelled");
      }
    }
  }
  double cpu_seconds() const override { return pool_.cpu_seconds(); }

  std::shared_ptr<const RoutingCounts> routing_counts(const Model& model) override { return counts_for(model); }

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
    const uint64_t bytes = 2ull * sizeof(float) * static_cast<uint64_t>(n_layers) *
                           static_cast<uint64_t>(num_blocks * block_size) * static_cast<uint64_t>(c.kv_dim());
    // Reading what the process can still allocate takes some 0.13 ms (a dozen files of /proc
    // and /sys) and a session creates a cache or two (the demo pair's two: 2-4 % of a
    // completion of 6-14 ms): caches within the margin every check keeps anyway are not checked.
    const std::string shortfall =
        bytes <= kMemoryMarginBytes
            ? std::string()
            : memory_shortfall(bytes, "a key-value cache of " + std::to_string(max_tokens) + " positions",
                               host_memory_room());
    if (!shortfall.empty()) {
      throw std::runtime_error(shortfall + ": ask for fewer candidates or fewer new tokens");
    }
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
    weights_.release_unused();
    const auto matmul = [&](const TensorView& w, const float* x, int rows, float* y) {
      specula::matmul(weights_.get(model, w, simd_, pool_), x, rows, y, pool_);
    };
    // products of one input as one job: q, k and v; gate and up
    const auto matmuls = [&](std::initializer_list<std::pair<const TensorView*, float*>> products, const float* x,
                             int rows) {
      group_.clear();
      for (const auto& [w, y] : products) group_.push_back({&weights_.get(model, *w, simd_, pool_), y});
      matmul_shared_input(group_, x, rows, pool_);
    };
    PlannedBatch step(cache, batch, c.context_length > 0 ? c.context_length : INT_MAX);
    const BatchPlan& plan = step.plan();

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

    // token embeddings (gemma3: times sqrt(dim))
    for (int t = 0; t < n; ++t) {
      float* row = x_.data() + static_cast<size_t>(t) * dim;
      dequantize_row(w.token_embedding.type, w.token_embedding.row(batch.tokens[t]), row, dim);
      if (c.embedding_scale != 1.0f) {
        for (int i = 0; i < dim; ++i) row[i] *= c.embedding_scale;
      }
    }

    // rotary angles per token: position * frequency of each pair (theta^(-2i / head_dim)
    // with the model's scaling), in double; sliding layers have their own base
    const int half = head_dim / 2;
    rotary_angles(c.rope_frequencies(), c.rope_magnitude(), plan, cos_, sin_);
    if (c.sliding_window > 0) {
      rotary_angles(c.rope_frequencies(true), c.sliding_rope_as_global ? c.rope_magnitude() : 1.0f, plan,
                    sliding_cos_, sliding_sin_);
    }

    const int block_size = cache.block_size();
    const float attn_scale = c.attention_score_scale();
    // attention's cost to one thread, per layer: every position a token attends to is its
    // key and value read and a multiply-add per query value for each
    int64_t attention_work = 0;
    for (int t = 0; t < n; ++t) attention_work += (plan.positions[t] + int64_t{1}) * (8 * kv_dim + 2 * q_dim);
    const size_t scores_per_thread = static_cast<size_t>(heads_per_kv) * std::max(1, plan.max_context);
    scores_.resize(static_cast<size_t>(pool_.size()) * scores_per_thread);
    const size_t rows_per_thread = 2 * static_cast<size_t>(std::max(1, plan.max_context));
    attention_rows_.resize(static_cast<size_t>(pool_.size()) * rows_per_thread);

    RoutingCounts* const routing = c.has_experts() ? counts_for(model).get() : nullptr;
    for (int l = 0; l < n_layers; ++l) {
      const LayerWeights& lw = w.layers[l];
      const bool sliding = c.sliding_layer(l);
      const float* layer_cos = sliding ? sliding_cos_.data() : cos_.data();
      const float* layer_sin = sliding ? sliding_sin_.data() : sin_.data();

      // attention: q, k, v projections of every token
      normalize_rows(xb_.data(), x_.data(), n, dim, c, lw.attn_norm, lw.attn_norm_bias, "attention norm");
      matmuls({{&lw.wq, q_.data()}, {&lw.wk, k_.data()}, {&lw.wv, v_.data()}}, xb_.data(), n);

      // biases of q, k, v (qwen2; llama with attention biases)
      add_bias(q_.data(), n, q_dim, lw.bq);
      add_bias(k_.data(), n, kv_dim, lw.bk);
      add_bias(v_.data(), n, kv_dim, lw.bv);

      // qwen3, gemma3: RMSNorm of every head of q and k, before the rotation
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
        rope(q_.data() + t * q_dim, n_heads, head_dim, c.rope_style, layer_cos + t * half, layer_sin + t * half);
        rope(k_.data() + t * kv_dim, c.n_kv_heads, head_dim, c.rope_style, layer_cos + t * half,
             layer_sin + t * half);
        const size_t slot = static_cast<size_t>(plan.cache_slots[t]);
        std::memcpy(keys + slot * kv_dim, k_.data() + t * kv_dim, kv_dim * sizeof(float));
        std::memcpy(values + slot * kv_dim, v_.data() + t * kv_dim, kv_dim * sizeof(float));
      }

      const float* sinks = lw.attn_sinks.empty() ? nullptr : norm_weights(lw.attn_sinks, "attention sinks");
      // each token's query heads attend, one KV head's group at a time, over its
      // sequence's positions 0..its own (a sliding layer: the window's last ones; the cache
      // keeps every position, the older ones are only masked)
      pool_.parallel_for(
          static_cast<int64_t>(n) * c.n_kv_heads, [&](int64_t begin, int64_t end, int thread) {
            AttentionArgs args;
            args.keys = keys;
            args.values = values;
            args.kv_dim = kv_dim;
            args.block_size = block_size;
            args.heads = heads_per_kv;
            args.head_dim = head_dim;
            args.scale = attn_scale;
            args.scores = scores_.data() + static_cast<size_t>(thread) * scores_per_thread;
            args.rows = attention_rows_.data() + static_cast<size_t>(thread) * rows_per_thread;
            for (int64_t item = begin; item < end; ++item) {
              const int t = static_cast<int>(item / c.n_kv_heads);
              const int g = static_cast<int>(item % c.n_kv_heads);
              const size_t first = static_cast<size_t>(t) * q_dim + g * heads_per_kv * head_dim;
              args.q = q_.data() + first;
              args.out = attn_.data() + first;
              args.kv_offset = g * head_dim;
              args.block_table = plan.block_tables.data() + plan.table_offsets[plan.token_seq[t]];
              args.start = c.first_attended(l, plan.positions[t]);
              args.sinks = sinks == nullptr ? nullptr : sinks + g * heads_per_kv;
              args.length = plan.positions[t] + 1;
              attend(args, simd_);
            }
          },
          1, attention_work);
      matmul(lw.wo, attn_.data(), n, xb_.data());
      add_bias(xb_.data(), n, dim, lw.bo);
      post_norm(xb_.data(), n, dim, lw.attn_post_norm, c.norm_eps, "post-attention norm");
      for (size_t i = 0; i < x_.size(); ++i) x_[i] += xb_[i];

      // feed-forward: down(act(gate(x)) * up(x)), act SiLU or GELU-tanh; or down(act(up(x)))
      normalize_rows(xb_.data(), x_.data(), n, dim, c, lw.ffn_norm, lw.ffn_norm_bias, "feed-forward norm");
      if (c.has_experts()) {
        mixture_of_experts(model, lw, n);
        if (routing) routing->add(l, chosen_, n);
      } else if (!c.gated_feed_forward) {
        ungated_feed_forward(model, lw, n);
      } else {
        feed_forward(model, {&lw.w_gate, &lw.w_up, &lw.w_down, nullptr, nullptr, nullptr}, xb_.data(), n, xb_.data());
      }
      post_norm(xb_.data(), n, dim, lw.ffn_post_norm, c.norm_eps, "post-feed-forward norm");
      for (size_t i = 0; i < x_.size(); ++i) x_[i] += xb_[i];
    }

    // final norm and output matrix, only for the rows the caller wants
    const int rows = static_cast<int>(plan.logit_rows.size());
    for (int r = 0; r < rows; ++r) {
      normalize_rows(xb_.data() + r * dim, x_.data() + static_cast<size_t>(plan.logit_rows[r]) * dim, 1, dim, c,
                     w.final_norm, w.final_norm_bias, "final norm");
    }
    logits.resize(static_cast<size_t>(rows) * c.vocab_size);
    if (rows > 0) matmul(w.output, xb_.data(), rows, logits.data());
    step.commit();
  }

 private:
  // One feed-forward's matrices and, for gpt-oss's experts, the rows of their biases (or null).
  struct FeedForward {
    const TensorView* gate;
    const TensorView* up;
    const TensorView* down;
    const float* gate_bias = nullptr;  // (hidden_dim)
    const float* up_bias = nullptr;    // (hidden_dim)
    const float* down_bias = nullptr;  // (dim)
  };

  // y (n, dim) = down(act(gate(x) + bg) * (up(x) + bu)) + bd for n rows of x (n, dim); y may be x.
  void feed_forward(const Model& model, const FeedForward& f, const float* x, int n, float* y) {
    const int hidden = model.config.hidden_dim, dim = model.config.dim;
    group_.clear();
    group_.push_back({&weights_.get(model, *f.gate, simd_, pool_), gate_.data()});
    group_.push_back({&weights_.get(model, *f.up, simd_, pool_), up_.data()});
    matmul_shared_input(group_, x, n, pool_);
    add_bias_row(gate_.data(), n, hidden, f.gate_bias);
    add_bias_row(up_.data(), n, hidden, f.up_bias);
    const Activation activation = model.config.activation;
    pool_.parallel_for(
        static_cast<int64_t>(n) * hidden,
        [&](int64_t begin, int64_t end, int) { gated_activation(gate_.data(), up_.data(), begin, end, activation); },
        1024);
    specula::matmul(weights_.get(model, *f.down, simd_, pool_), gate_.data(), n, y, pool_);
    add_bias_row(y, n, dim, f.down_bias);
  }

  // rows[t][i] += bias[i] for n rows of `width`; nothing for a null bias.
  static void add_bias_row(float* rows, int n, int width, const float* bias) {
    if (bias == nullptr) return;
    for (int t = 0; t < n; ++t) {
      for (int i = 0; i < width; ++i) rows[static_cast<size_t>(t) * width + i] += bias[i];
    }
  }

  // Expert e's row of a (n_experts, width) bias, or null when the layer has none.
  static const float* expert_bias(const TensorView& bias, int e) {
    return bias.empty() ? nullptr : norm_weights(bias, "expert bias") + static_cast<size_t>(e) * bias.cols;
  }

  // starcoder2's feed-forward of the n rows of xb_, in place: down(act(up(x) + b_up)) + b_down.
  void ungated_feed_forward(const Model& model, const LayerWeights& lw, int n) {
    const ModelConfig& c = model.config;
    specula::matmul(weights_.get(model, lw.w_up, simd_, pool_), xb_.data(), n, up_.data(), pool_);
    add_bias(up_.data(), n, c.hidden_dim, lw.b_up);
    const Activation activation = c.activation;
    pool_.parallel_for(
        static_cast<int64_t>(n) * c.hidden_dim,
        [&](int64_t begin, int64_t end, int) { gated_activation(up_.data(), nullptr, begin, end, activation); }, 1024);
    specula::matmul(weights_.get(model, lw.w_down, simd_, pool_), up_.data(), n, xb_.data(), pool_);
    add_bias(xb_.data(), n, c.dim, lw.b_down);
  }

  // The routed feed-forward of the n rows of xb_, in place. Each token picks its experts
  // (route_token); the tokens are then grouped by expert, in token order, and each chosen
  // expert runs once on its group's rows, so its weights are read once per forward for all
  // of them. A row's products do not depend on the other rows of the call (cpu_kernels.h),
  // and each token sums its experts' outputs in the order of its own ranks: a token's result
  // is the same bits whatever else shares the batch or its experts.
  void mixture_of_experts(const Model& model, const LayerWeights& lw, int n) {
    const ModelConfig& c = model.config;
    const int dim = c.dim, n_experts = c.n_experts, k = c.n_experts_used;
    const size_t picks = static_cast<size_t>(n) * k;
    router_logits_.resize(static_cast<size_t>(n) * n_experts);
    specula::matmul(weights_.get(model, lw.router, simd_, pool_), xb_.data(), n, router_logits_.data(), pool_);
    add_bias(router_logits_.data(), n, n_experts, lw.router_bias);
    probs_.resize(static_cast<size_t>(n_experts));
    chosen_.resize(picks);
    chosen_weights_.resize(picks);
    for (int t = 0; t < n; ++t) {
      const float* logits = router_logits_.data() + static_cast<size_t>(t) * n_experts;
      int32_t* experts = chosen_.data() + static_cast<size_t>(t) * k;
      float* weights = chosen_weights_.data() + static_cast<size_t>(t) * k;
      if (c.expert_gating == ExpertGating::TopKThenSoftmax) {
        route_token_top_k_first(logits, n_experts, k, probs_.data(), experts, weights);
      } else {
        route_token(logits, n_experts, k, c.expert_weights_norm, probs_.data(), experts, weights);
      }
    }
    // the picks (token * k + rank) grouped by expert, each group in token order
    group_start_.assign(static_cast<size_t>(n_experts) + 1, 0);
    for (int32_t e : chosen_) ++group_start_[static_cast<size_t>(e) + 1];
    for (int e = 0; e < n_experts; ++e) group_start_[e + 1] += group_start_[e];
    by_expert_.resize(picks);
    fill_.assign(group_start_.begin(), group_start_.end() - 1);
    for (size_t pick = 0; pick < picks; ++pick) by_expert_[static_cast<size_t>(fill_[chosen_[pick]]++)] = static_cast<int32_t>(pick);

    gathered_.resize(static_cast<size_t>(n) * dim);
    expert_out_.resize(picks * dim);
    for (int e = 0; e < n_experts; ++e) {
      const int first = group_start_[e], m = group_start_[e + 1] - first;
      if (m == 0) continue;
      for (int i = 0; i < m; ++i) {
        const size_t token = static_cast<size_t>(by_expert_[first + i] / k);
        std::memcpy(gathered_.data() + static_cast<size_t>(i) * dim, xb_.data() + token * dim, dim * sizeof(float));
      }
      const auto ex = static_cast<size_t>(e);
      const FeedForward f{&lw.expert_gate[ex], &lw.expert_up[ex], &lw.expert_down[ex], expert_bias(lw.expert_gate_bias, e),
                          expert_bias(lw.expert_up_bias, e), expert_bias(lw.expert_down_bias, e)};
      feed_forward(model, f, gathered_.data(), m, gathered_.data());
      for (int i = 0; i < m; ++i) {
        std::memcpy(expert_out_.data() + static_cast<size_t>(by_expert_[first + i]) * dim,
                    gathered_.data() + static_cast<size_t>(i) * dim, dim * sizeof(float));
      }
    }
    // each token's weighted sum, by rank
    for (int t = 0; t < n; ++t) {
      float* out = xb_.data() + static_cast<size_t>(t) * dim;
      for (int r = 0; r < k; ++r) {
        const size_t pick = static_cast<size_t>(t) * k + r;
        const float weight = chosen_weights_[pick];
        const float* y = expert_out_.data() + pick * dim;
        for (int i = 0; i < dim; ++i) out[i] = r == 0 ? weight * y[i] : out[i] + weight * y[i];
      }
    }
  }

  ThreadPool pool_;
  SimdLevel simd_;
  PackedWeights weights_;
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
  std::vector<float> sliding_cos_;  // (n_tokens, head_dim / 2): sliding layers' angles; empty without
  std::vector<float> sliding_sin_;  // (n_tokens, head_dim / 2)
  std::vector<float> scores_;  // (threads, heads per KV head, max_context)
  std::vector<const float*> attention_rows_;  // (threads, 2, max_context): cache rows attended
  std::vector<MatrixProduct> group_;          // the products of one input run as one job
  // a mixture of experts' routing of the current batch
  std::vector<float> router_logits_;   // (n_tokens, n_experts)
  std::vector<float> probs_;           // (n_experts): one token's softmax
  std::vector<int32_t> chosen_;        // (n_tokens, n_experts_used): experts by rank
  // the routing counted per mixture model, keyed by its first router's weights (statistics
  // only: a model loaded where a freed one lay starts from that one's counts); a few
  // additions per token and layer
  std::vector<std::pair<const void*, std::shared_ptr<RoutingCounts>>> routing_;
  std::shared_ptr<RoutingCounts> counts_for(const Model& model) {
    const ModelConfig& c = model.config;
    if (!c.has_experts() || model.weights.layers.empty()) return nullptr;
    const void* key = model.weights.layers.front().router.data;
    for (const auto& [k, counts] : routing_) {
      if (k == key) return counts;
    }
    routing_.emplace_back(key, std::make_shared<RoutingCounts>(c.n_layers, c.n_experts, c.n_experts_used));
    return routing_.back().second;
  }
  std::vector<float> chosen_weights_;  // (n_tokens, n_experts_used): their weights
  std::vector<int> group_start_;       // (n_experts + 1): each expert's first entry in by_expert_
  std::vector<int> fill_;              // (n_experts): scratch of the grouping
  std::vector<int32_t> by_expert_;     // (n_tokens * n_experts_used): picks (token * k + rank) by expert
  std::vector<float> gathered_;        // (n_tokens, dim): one expert's rows, then its outputs
  std::vector<float> expert_out_;      // (n_tokens * n_experts_used, dim): every pick's expert output
};

}  // namespace

std::unique_ptr<Backend> create_cpu_backend(int threads, SimdLevel simd, bool split_every_job) {
  return std::make_unique<CpuBackend>(threads, simd, split_every_job);
}

}  // namespace specula
