// The CUDA backend. Weights are uploaded once per model, in the type device_matrix_type
// picks, with wq|wk|wv and w_gate|w_up stacked so that each layer runs four products
// instead of seven (the q|k|v biases stacked the same way, the q/k norms and the rope
// frequency table beside them). A step uploads its packed metadata in one copy, runs the layers on one
// stream in the order of the CPU forward pass, and copies back only the logits it was
// asked for. The KV cache is device memory laid out by slot; the host KvCache decides
// which slot each token uses.
#include "compute/cuda_backend.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "compute/device_plan.h"
#include "kernels.h"

namespace specula {

namespace {

using cuda::check;
using cuda::DType;

DType dtype_of(TensorType type) {
  switch (type) {
    case TensorType::F32: return DType::F32;
    case TensorType::BF16: return DType::BF16;
    default: return DType::F16;
  }
}

// A device allocation, freed with its owner.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    if (const cudaError_t status = cudaMalloc(&data_, bytes); status != cudaSuccess) {
      cudaGetLastError();  // clear it, so the next launch check does not report it again
      check(status, ("allocating " + std::to_string(bytes >> 20) + " MiB of device memory").c_str());
    }
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  ~DeviceBuffer() {
    if (data_) cudaFree(data_);
  }
  // Grows to at least `bytes`; the contents are not kept.
  void reserve(size_t bytes) {
    if (bytes > bytes_) *this = DeviceBuffer(bytes);
  }
  template <typename T = void> T* get() const { return static_cast<T*>(data_); }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

struct DeviceLayer {
  DeviceBuffer attn_norm;  // (dim) f32
  DeviceBuffer wqkv;       // (q_dim + 2 kv_dim rows, dim cols): wq, wk, wv stacked
  DeviceBuffer qkv_bias;   // (q_dim + 2 kv_dim) f32, qkv_bias_row; empty without biases
  DeviceBuffer q_norm;     // (head_dim) f32; empty without q/k norms
  DeviceBuffer k_norm;     // (head_dim) f32; empty without q/k norms
  DeviceBuffer wo;         // (dim rows, q_dim cols)
  DeviceBuffer bo;         // (dim) f32; empty without an output bias
  DeviceBuffer ffn_norm;   // (dim) f32
  DeviceBuffer w_gate_up;  // (2 hidden_dim rows, dim cols): w_gate, w_up stacked
  DeviceBuffer w_down;     // (dim rows, hidden_dim cols)
};

struct DeviceModel {
  const void* source = nullptr;    // the host embedding this copy was made from
  DType type = DType::F16;         // of every matrix
  DeviceBuffer embedding;          // (vocab rows, dim cols)
  std::vector<DeviceLayer> layers; // (n_layers)
  DeviceBuffer final_norm;         // (dim) f32
  DeviceBuffer output;             // (vocab rows, dim cols); empty when tied
  DeviceBuffer rope_frequencies;   // (head_dim / 2) double: ModelConfig::rope_frequencies
  cuda::RopeLayout rope_layout = cuda::RopeLayout::AdjacentPairs;
};

// Uploads matrices stacked row-wise into one device buffer of type `type`.
DeviceBuffer upload(std::initializer_list<const TensorView*> parts, TensorType type) {
  size_t bytes = 0;
  for (const TensorView* p : parts) bytes += static_cast<size_t>(p->rows * p->cols) * row_bytes(type, 1);
  std::vector<uint8_t> host(bytes);
  size_t at = 0;
  for (const TensorView* p : parts) {
    convert_matrix(*p, type, host.data() + at);
    at += static_cast<size_t>(p->rows * p->cols) * row_bytes(type, 1);
  }
  DeviceBuffer buffer(bytes);
  check(cudaMemcpy(buffer.get(), host.data(), bytes, cudaMemcpyHostToDevice), "weight upload");
  return buffer;
}

// Uploads a host array as it is; an empty one gives an empty buffer.
template <typename T>
DeviceBuffer upload(const std::vector<T>& host) {
  DeviceBuffer buffer(host.size() * sizeof(T));
  if (!host.empty()) {
    check(cudaMemcpy(buffer.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "weight upload");
  }
  return buffer;
}

// An optional f32 vector (bias, norm): empty when the model has none.
DeviceBuffer upload_optional(const TensorView& v) {
  return v.empty() ? DeviceBuffer() : upload({&v}, TensorType::F32);
}

class CudaKvStorage : public KvStorage {
 public:
  CudaKvStorage(int n_layers, int num_blocks, int block_size, int kv_dim, DType type, cudaStream_t stream)
      : n_layers_(n_layers),
        kv_dim_(kv_dim),
        type_(type),
        block_bytes_(static_cast<size_t>(block_size) * kv_dim * cuda::dtype_bytes(type)),
        layer_bytes_(block_bytes_ * static_cast<size_t>(num_blocks)),
        keys_(layer_bytes_ * n_layers),
        values_(layer_bytes_ * n_layers),
        stream_(stream) {}

  void copy_block(int src_block, int dst_block) override {
    for (int l = 0; l < n_layers_; ++l) {
      for (void* base : {keys(l), values(l)}) {
        uint8_t* b = static_cast<uint8_t*>(base);
        check(cudaMemcpyAsync(b + dst_block * block_bytes_, b + src_block * block_bytes_, block_bytes_,
                              cudaMemcpyDeviceToDevice, stream_),
              "KV block copy");
      }
    }
  }
  void* keys(int layer) const { return keys_.get<uint8_t>() + layer * layer_bytes_; }
  void* values(int layer) const { return values_.get<uint8_t>() + layer * layer_bytes_; }
  int n_layers() const { return n_layers_; }
  int kv_dim() const { return kv_dim_; }
  DType type() const { return type_; }

 private:
  int n_layers_;
  int kv_dim_;
  DType type_;
  size_t block_bytes_;  // one block of one layer's keys (or values)
  size_t layer_bytes_;  // all blocks of one layer's keys (or values)
  DeviceBuffer keys_;   // (n_layers, num_blocks * block_size slots, kv_dim)
  DeviceBuffer values_; // (n_layers, num_blocks * block_size slots, kv_dim)
  cudaStream_t stream_;
};

class CudaBackend : public Backend {
 public:
  CudaBackend(int device, const CudaOptions& options)
      : mode_(options.batch_invariant ? cuda::GemmMode::Invariant : cuda::GemmMode::Cublas) {
    check(cudaSetDevice(device), "cudaSetDevice");
    cudaDeviceProp props{};
    check(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties");
    name_ = std::string("cuda (") + props.name + (options.batch_invariant ? ", batch-invariant)" : ")");
    check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    if (const cublasStatus_t status = cublasCreate(&cublas_); status != CUBLAS_STATUS_SUCCESS) {
      cudaStreamDestroy(stream_);
      check(status, "cublasCreate");
    }
  }
  ~CudaBackend() override {
    models_.clear();
    scratch_ = {};
    cublasDestroy(cublas_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return name_; }

  std::unique_ptr<KvCache> create_cache(const Model& model, int max_tokens, int n_layers,
                                        int block_size) override {
    const ModelConfig& c = model.config;
    const int layers = n_layers < 0 ? c.n_layers : n_layers;
    if (layers <= 0 || layers > c.n_layers || max_tokens <= 0 || block_size <= 0) {
      throw std::invalid_argument("bad KV cache request: " + std::to_string(layers) + " layers, " +
                                  std::to_string(max_tokens) + " tokens, blocks of " + std::to_string(block_size));
    }
    const int num_blocks = (max_tokens + block_size - 1) / block_size;
    auto storage = std::make_unique<CudaKvStorage>(layers, num_blocks, block_size, c.kv_dim(),
                                                   dtype_of(device_matrix_type(model.weights)), stream_);
    return std::make_unique<KvCache>(block_size, num_blocks, std::move(storage));
  }

  void forward(const Model& model, KvCache& cache, const RaggedBatch& batch, std::vector<float>& logits,
               int n_layers) override {
    const int rows = run(model, cache, batch, n_layers);
    logits.resize(static_cast<size_t>(rows) * model.config.vocab_size);
    if (rows > 0) {
      check(cudaMemcpyAsync(logits.data(), scratch_.logits.get(), logits.size() * sizeof(float),
                            cudaMemcpyDeviceToHost, stream_),
            "logits download");
    }
    check(cudaStreamSynchronize(stream_), "forward");
  }

  void forward_argmax(const Model& model, KvCache& cache, const RaggedBatch& batch, std::vector<int32_t>& tokens,
                      int n_layers) override {
    const int rows = run(model, cache, batch, n_layers);
    scratch_.tokens.reserve(sizeof(int32_t) * rows);
    cuda::argmax_rows(scratch_.logits.get<float>(), rows, model.config.vocab_size, scratch_.tokens.get<int32_t>(), stream_);
    tokens.resize(static_cast<size_t>(rows));
    if (rows > 0) {
      check(cudaMemcpyAsync(tokens.data(), scratch_.tokens.get(), tokens.size() * sizeof(int32_t),
                            cudaMemcpyDeviceToHost, stream_),
            "token download");
    }
    check(cudaStreamSynchronize(stream_), "forward");
  }

 private:
  // Runs the layers and the output matrix, leaving the wanted rows' logits in
  // scratch_.logits; returns their number.
  int run(const Model& model, KvCache& cache, const RaggedBatch& batch, int n_layers) {
    const ModelConfig& c = model.config;
    const int layers = n_layers < 0 ? c.n_layers : n_layers;
    auto* kv = dynamic_cast<CudaKvStorage*>(cache.storage());
    if (!kv) throw std::invalid_argument("the KV cache was not created by the CUDA backend");
    if (layers <= 0 || layers > kv->n_layers() || kv->kv_dim() != c.kv_dim()) {
      throw std::invalid_argument("the KV cache does not fit " + std::to_string(layers) + " layers of this model");
    }
    for (int32_t t : batch.tokens) {
      if (t < 0 || t >= c.vocab_size) throw std::invalid_argument("token id " + std::to_string(t) + " outside the vocabulary");
    }
    const DeviceModel& m = device_model(model);
    if (m.type != kv->type()) throw std::invalid_argument("the KV cache was created for another model");

    const BatchPlan plan = plan_batch(cache, batch, c.context_length > 0 ? c.context_length : INT_MAX);
    const PackedPlan packed =
        pack_plan(plan, batch.tokens, partition_attention(plan, cuda::attention_query_tile(c.n_heads, c.n_kv_heads)));
    const int n = plan.n_tokens, rows = static_cast<int>(plan.logit_rows.size());
    const int dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim, hd = c.head_dim();
    const int qkv_cols = q_dim + 2 * kv_dim;
    const size_t element = cuda::dtype_bytes(m.type);
    Scratch& s = scratch_;
    s.meta.reserve(packed.data.size() * sizeof(int32_t));
    s.x.reserve(sizeof(float) * n * dim);
    s.tmp.reserve(sizeof(float) * n * dim);
    s.normed.reserve(element * n * std::max(dim, hidden));
    s.qkv.reserve(sizeof(float) * n * qkv_cols);
    s.attention.reserve(element * n * q_dim);
    s.gate_up.reserve(sizeof(float) * n * 2 * hidden);
    s.logits.reserve(sizeof(float) * rows * c.vocab_size);
    check(cudaMemcpyAsync(s.meta.get(), packed.data.data(), packed.data.size() * sizeof(int32_t),
                          cudaMemcpyHostToDevice, stream_),
          "batch metadata upload");
    const int32_t* meta = s.meta.get<int32_t>();
    float* x = s.x.get<float>();
    float* tmp = s.tmp.get<float>();
    float* qkv = s.qkv.get<float>();
    float* gate_up = s.gate_up.get<float>();

    cuda::embedding(m.embedding.get(), m.type, dim, meta + packed.tokens, n, x, stream_);
    for (int l = 0; l < layers; ++l) {
      const DeviceLayer& w = m.layers[static_cast<size_t>(l)];
      // attention
      cuda::rmsnorm(x, w.attn_norm.get<float>(), nullptr, n, dim, c.norm_eps, s.normed.get(), m.type, stream_);
      cuda::gemm(cublas_, mode_, s.normed.get(), w.wqkv.get(), m.type, n, qkv_cols, dim, qkv, stream_);
      if (w.qkv_bias.get()) cuda::add_bias(qkv, qkv_cols, n, w.qkv_bias.get<float>(), qkv_cols, stream_);
      if (w.q_norm.get()) {  // qwen3: each head of q and k normalized before the rotation
        cuda::head_rmsnorm(qkv, qkv_cols, n, c.n_heads, hd, w.q_norm.get<float>(), c.norm_eps, stream_);
        cuda::head_rmsnorm(qkv + q_dim, qkv_cols, n, c.n_kv_heads, hd, w.k_norm.get<float>(), c.norm_eps, stream_);
      }
      cuda::rope(qkv, qkv_cols, meta + packed.positions, n, c.n_heads + c.n_kv_heads, hd,
                 m.rope_frequencies.get<double>(), m.rope_layout, stream_);
      cuda::kv_write(qkv, qkv_cols, q_dim, q_dim + kv_dim, meta + packed.cache_slots, n, kv_dim, kv->keys(l),
                     kv->values(l), m.type, stream_);
      cuda::AttentionArgs a;
      a.qkv = qkv;
      a.row_stride = qkv_cols;
      a.k_cache = kv->keys(l);
      a.v_cache = kv->values(l);
      a.cache_type = m.type;
      a.work = meta + packed.work;
      a.n_work = packed.n_work;
      a.positions = meta + packed.positions;
      a.table_offsets = meta + packed.table_offsets;
      a.block_tables = meta + packed.block_tables;
      a.block_size = cache.block_size();
      a.n_heads = c.n_heads;
      a.n_kv_heads = c.n_kv_heads;
      a.head_dim = hd;
      a.out = s.attention.get();
      cuda::paged_attention(a, stream_);
      cuda::gemm(cublas_, mode_, s.attention.get(), w.wo.get(), m.type, n, dim, q_dim, tmp, stream_);
      if (w.bo.get()) cuda::add_bias(tmp, dim, n, w.bo.get<float>(), dim, stream_);
      cuda::residual_add(x, tmp, static_cast<int64_t>(n) * dim, stream_);
      // feed-forward
      cuda::rmsnorm(x, w.ffn_norm.get<float>(), nullptr, n, dim, c.norm_eps, s.normed.get(), m.type, stream_);
      cuda::gemm(cublas_, mode_, s.normed.get(), w.w_gate_up.get(), m.type, n, 2 * hidden, dim, gate_up, stream_);
      cuda::swiglu(gate_up, n, hidden, s.normed.get(), m.type, stream_);
      cuda::gemm(cublas_, mode_, s.normed.get(), w.w_down.get(), m.type, n, dim, hidden, tmp, stream_);
      cuda::residual_add(x, tmp, static_cast<int64_t>(n) * dim, stream_);
    }
    // the final norm and the output matrix, on the wanted rows only
    cuda::rmsnorm(x, m.final_norm.get<float>(), meta + packed.logit_rows, rows, dim, c.norm_eps, s.normed.get(),
                  m.type, stream_);
    const DeviceBuffer& output = model.tied_output() ? m.embedding : m.output;
    cuda::gemm(cublas_, mode_, s.normed.get(), output.get(), m.type, rows, c.vocab_size, dim, s.logits.get<float>(),
               stream_);
    return rows;
  }

  struct Scratch {
    DeviceBuffer meta;       // PackedPlan::data
    DeviceBuffer x;          // (n_tokens, dim) f32 residual stream
    DeviceBuffer tmp;        // (n_tokens, dim) f32 product output before the residual add
    DeviceBuffer normed;     // (n_tokens, max(dim, hidden)) product input in the weights' type
    DeviceBuffer qkv;        // (n_tokens, q_dim + 2 kv_dim) f32
    DeviceBuffer attention;  // (n_tokens, q_dim) in the weights' type
    DeviceBuffer gate_up;    // (n_tokens, 2 hidden) f32
    DeviceBuffer logits;     // (n_logit_rows, vocab) f32
    DeviceBuffer tokens;     // (n_logit_rows) argmax of each row
  };

  const DeviceModel& device_model(const Model& model) {
    auto it = models_.find(&model);
    if (it != models_.end() && it->second.source == model.weights.token_embedding.data) return it->second;
    const Weights& w = model.weights;
    const TensorType type = device_matrix_type(w);
    DeviceModel m;
    m.source = w.token_embedding.data;
    m.type = dtype_of(type);
    m.embedding = upload({&w.token_embedding}, type);
    for (const LayerWeights& l : w.layers) {
      DeviceLayer d;
      d.attn_norm = upload({&l.attn_norm}, TensorType::F32);
      d.wqkv = upload({&l.wq, &l.wk, &l.wv}, type);
      d.qkv_bias = upload(qkv_bias_row(l));
      d.q_norm = upload_optional(l.q_norm);
      d.k_norm = upload_optional(l.k_norm);
      d.wo = upload({&l.wo}, type);
      d.bo = upload_optional(l.bo);
      d.ffn_norm = upload({&l.ffn_norm}, TensorType::F32);
      d.w_gate_up = upload({&l.w_gate, &l.w_up}, type);
      d.w_down = upload({&l.w_down}, type);
      m.layers.push_back(std::move(d));
    }
    m.final_norm = upload({&w.final_norm}, TensorType::F32);
    if (!model.tied_output()) m.output = upload({&w.output}, type);
    m.rope_frequencies = upload(model.config.rope_frequencies());
    m.rope_layout = model.config.rope_style == RopeStyle::Halves ? cuda::RopeLayout::Halves : cuda::RopeLayout::AdjacentPairs;
    models_.erase(&model);
    return models_.emplace(&model, std::move(m)).first->second;
  }

  std::string name_;
  cuda::GemmMode mode_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::map<const Model*, DeviceModel> models_;
  Scratch scratch_;
};

}  // namespace

std::unique_ptr<Backend> create_cuda_backend(std::string* why_not, const CudaOptions& options) {
  const auto refuse = [why_not](const std::string& why) {
    if (why_not) *why_not = why;
    return std::unique_ptr<Backend>();
  };
  int count = 0;
  if (const cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess) {
    cudaGetLastError();  // clear it, so later runtime calls do not report it again
    return refuse(std::string("no usable CUDA device: ") + cudaGetErrorString(status));
  }
  if (count == 0) return refuse("no CUDA device found");
  try {
    return std::make_unique<CudaBackend>(0, options);
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
}

std::unique_ptr<Backend> create_cuda_backend(std::string* why_not) { return create_cuda_backend(why_not, {}); }

}  // namespace specula
