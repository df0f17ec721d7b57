// The CUDA backend. Each model's weights are uploaded once per process and device, in the
// layouts of device_plan.h: Q8_0, Q4_0, Q4_K and Q6_K matrices stay quantized (in tiles the
// product kernels decode in registers), the others are in the compute type; wq|wk|wv and
// w_gate|w_up are stacked where their types agree, so a layer runs four products. Every
// backend object (a batch-invariant twin, the one a layers:K draft runs on) shares that
// copy (with the q|k|v biases stacked like their rows, the q/k norms and the rope frequency
// table beside the matrices). A step uploads its packed metadata in one copy, runs the
// layers on one stream in the order of the CPU forward pass, and copies back only what it
// was asked for. The KV cache is
// device memory laid out by slot; the host KvCache decides which slot each token uses.
#include "compute/cuda_backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "compute/device_plan.h"
#include "common/thread_pool.h"
#include "acceptance_rule.h"
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

// Memory freed with its owner: on the device, or page-locked on the host (the only kind of
// host memory a copy runs asynchronously from).
enum class Memory { Device, Pinned };

template <Memory kind>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t status = kind == Memory::Device ? cudaMalloc(&data_, bytes) : cudaMallocHost(&data_, bytes);
    if (status != cudaSuccess) {
      cudaGetLastError();  // clear it, so the next launch check does not report it again
      const char* what = kind == Memory::Device ? " MiB of device memory" : " MiB of pinned host memory";
      check(status, ("allocating " + std::to_string(bytes >> 20) + what).c_str());
    }
  }
  Buffer(Buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  Buffer& operator=(Buffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  ~Buffer() {
    if (!data_) return;
    if constexpr (kind == Memory::Device) cudaFree(data_);
    else cudaFreeHost(data_);
  }
  // Grows to at least `bytes`, the contents not kept; returns whether it moved. Pinned
  // staging grows by half again, so steps of growing sizes allocate rarely.
  bool reserve(size_t bytes) {
    if (bytes <= bytes_) return false;
    *this = Buffer(kind == Memory::Pinned ? bytes + bytes / 2 : bytes);
    return true;
  }
  template <typename T = void> T* get() const { return static_cast<T*>(data_); }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = Buffer<Memory::Device>;
using PinnedBuffer = Buffer<Memory::Pinned>;

// One matrix (or several stacked) in its device layout.
struct DeviceMatrix {
  DeviceMatrixLayout layout;
  DeviceBuffer data;
  cuda::QuantMatrix quant() const {
    return {device_tile_format(layout.type), data.get(), static_cast<int>(layout.rows), static_cast<int>(layout.cols)};
  }
};

// The weights of one product: matrices whose outputs fill consecutive columns of its output
// (one, or one per run of equal types when stacked parts differ, as Q4_K_M's wq|wk and wv).
struct DeviceProduct {
  std::vector<DeviceMatrix> parts;
  int rows = 0;  // outputs of all parts
  int cols = 0;  // inputs
};

struct DeviceLayer {
  DeviceBuffer attn_norm;  // (dim) f32
  DeviceProduct qkv;       // (q_dim + 2 kv_dim outputs, dim inputs)
  DeviceBuffer qkv_bias;   // (q_dim + 2 kv_dim) f32, qkv_bias_row; empty without biases
  DeviceBuffer q_norm;     // (head_dim) f32; empty without q/k norms
  DeviceBuffer k_norm;     // (head_dim) f32; empty without q/k norms
  DeviceProduct wo;        // (dim, q_dim)
  DeviceBuffer bo;         // (dim) f32; empty without an output bias
  DeviceBuffer ffn_norm;   // (dim) f32
  DeviceProduct gate_up;   // (2 hidden_dim, dim)
  DeviceProduct down;      // (dim, hidden_dim)
};

// A number no other object of its kind in this process had: captured graphs name the weights
// and caches they read by it (an address may be reused).
uint64_t next_serial() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}

struct DeviceModel {
  uint64_t serial = next_serial();
  const void* source = nullptr;     // the host embedding this copy was made from
  DType compute = DType::F16;       // activations, KV cache and dense matrices
  DeviceProduct embedding;          // (vocab, dim)
  std::vector<DeviceLayer> layers;  // (n_layers)
  DeviceBuffer final_norm;          // (dim) f32
  DeviceProduct output;             // (vocab, dim); no parts when tied
  DeviceBuffer rope_frequencies;    // (head_dim / 2) double: ModelConfig::rope_frequencies
  cuda::RopeLayout rope_layout = cuda::RopeLayout::AdjacentPairs;
  const DeviceProduct& logits() const { return output.parts.empty() ? embedding : output; }
};

// Copies weights to the device through two pinned staging buffers: the host converts one
// piece (in parallel) while the previous one is in flight, and reports the bytes done.
class Uploader {
 public:
  static constexpr size_t kPieceBytes = size_t{16} << 20;

  Uploader(cudaStream_t stream, size_t total_bytes, const std::function<bool(double)>& progress)
      : stream_(stream), total_(std::max<size_t>(1, total_bytes)), progress_(progress) {
    for (int b = 0; b < 2; ++b) {
      staging_[b] = PinnedBuffer(kPieceBytes);
      check(cudaEventCreateWithFlags(&free_[b], cudaEventDisableTiming), "cudaEventCreate");
    }
  }
  ~Uploader() {
    cudaStreamSynchronize(stream_);
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
  }

  DeviceMatrix matrix(const DeviceMatrixPlan& plan) {
    DeviceMatrix m{plan.layout, DeviceBuffer(plan.layout.bytes())};
    for (const UploadChunk& piece : plan_upload(plan.layout, kPieceBytes)) {
      if (piece.bytes > kPieceBytes) throw std::runtime_error("a weight matrix row is larger than the upload buffer");
      const int b = next_;
      next_ ^= 1;
      check(cudaEventSynchronize(free_[b]), "weight upload");  // its previous copy is done
      uint8_t* staging = staging_[b].get<uint8_t>();
      pool_.parallel_for(piece.n_units, [&](int64_t begin, int64_t end, int) {
        write_device_units(plan.parts, plan.layout, piece.first_unit + begin, end - begin,
                           staging + static_cast<size_t>(begin) * plan.layout.unit_bytes);
      });
      check(cudaMemcpyAsync(m.data.get<uint8_t>() + piece.offset, staging, piece.bytes, cudaMemcpyHostToDevice, stream_),
            "weight upload");
      check(cudaEventRecord(free_[b], stream_), "weight upload");
      done_ += piece.bytes;
      if (progress_ && !progress_(static_cast<double>(done_) / static_cast<double>(total_))) {
        throw ModelError("weight upload cancelled");
      }
    }
    return m;
  }

  DeviceProduct product(const std::vector<DeviceMatrixPlan>& plans) {
    DeviceProduct p;
    for (const DeviceMatrixPlan& plan : plans) {
      p.parts.push_back(matrix(plan));
      p.rows += static_cast<int>(plan.layout.rows);
      p.cols = static_cast<int>(plan.layout.cols);
    }
    return p;
  }

  DeviceBuffer norm(const TensorView& v) {
    const TensorView* parts[] = {&v};
    return std::move(matrix({{parts[0]}, device_layout(TensorType::F32, TensorType::F32, 1, v.cols)}).data);
  }
  // An optional f32 vector (bias, norm): empty when the model has none.
  DeviceBuffer optional(const TensorView& v) { return v.empty() ? DeviceBuffer() : norm(v); }
  // A host array as it is; an empty one gives an empty buffer.
  template <typename T>
  DeviceBuffer array(const std::vector<T>& host) {
    DeviceBuffer buffer(host.size() * sizeof(T));
    if (!host.empty()) {
      check(cudaMemcpy(buffer.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "weight upload");
    }
    return buffer;
  }

 private:
  cudaStream_t stream_;
  size_t total_;
  size_t done_ = 0;
  const std::function<bool(double)>& progress_;
  PinnedBuffer staging_[2];
  cudaEvent_t free_[2] = {};
  int next_ = 0;
  ThreadPool pool_;
};

std::shared_ptr<const DeviceModel> upload_model(const Model& model, cudaStream_t stream,
                                                const std::function<bool(double)>& progress) {
  const DeviceModelPlan plan = plan_device_model(model);
  Uploader up(stream, device_weight_bytes(model), progress);
  auto m = std::make_shared<DeviceModel>();
  m->source = model.weights.token_embedding.data;
  m->compute = dtype_of(plan.compute);
  m->embedding = up.product({plan.embedding});
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    const DeviceLayerPlan& p = plan.layers[l];
    DeviceLayer d;
    const LayerWeights& lw = model.weights.layers[l];
    d.attn_norm = up.norm(lw.attn_norm);
    d.qkv = up.product(p.qkv);
    d.qkv_bias = up.array(qkv_bias_row(lw));
    d.q_norm = up.optional(lw.q_norm);
    d.k_norm = up.optional(lw.k_norm);
    d.wo = up.product({p.wo});
    d.bo = up.optional(lw.bo);
    d.ffn_norm = up.norm(lw.ffn_norm);
    d.gate_up = up.product(p.gate_up);
    d.down = up.product({p.down});
    m->layers.push_back(std::move(d));
  }
  m->final_norm = up.norm(model.weights.final_norm);
  if (!model.tied_output()) m->output = up.product({plan.output});
  m->rope_frequencies = up.array(model.config.rope_frequencies());
  m->rope_layout = model.config.rope_style == RopeStyle::Halves ? cuda::RopeLayout::Halves : cuda::RopeLayout::AdjacentPairs;
  return m;
}

// One device copy of each model's weights per process and device, shared by every backend
// object: the registry holds weak references, the backends the strong ones, so the copy
// goes when the last backend using it does.
class WeightRegistry {
 public:
  std::shared_ptr<const DeviceModel> get(int device, const Model& model, cudaStream_t stream,
                                         const std::function<bool(double)>& progress) {
    std::lock_guard lock(mutex_);
    auto& entry = models_[{device, &model}];
    if (auto m = entry.lock(); m && m->source == model.weights.token_embedding.data) return m;
    auto m = upload_model(model, stream, progress);
    check(cudaStreamSynchronize(stream), "weight upload");
    entry = m;
    return m;
  }

 private:
  std::mutex mutex_;
  std::map<std::pair<int, const Model*>, std::weak_ptr<const DeviceModel>> models_;
};

WeightRegistry& registry() {
  static WeightRegistry r;
  return r;
}

// Keys and values of every layer by slot, with one block more than the cache hands out: the
// trash slot the padding tokens of a replayed graph write to.
class CudaKvStorage : public KvStorage {
 public:
  CudaKvStorage(int n_layers, int num_blocks, int block_size, int kv_dim, DType type, cudaStream_t stream)
      : n_layers_(n_layers),
        kv_dim_(kv_dim),
        type_(type),
        trash_slot_(num_blocks * block_size),
        block_bytes_(static_cast<size_t>(block_size) * kv_dim * cuda::dtype_bytes(type)),
        layer_bytes_(block_bytes_ * static_cast<size_t>(num_blocks + 1)),
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
  int32_t trash_slot() const { return trash_slot_; }
  uint64_t serial() const { return serial_; }

 private:
  uint64_t serial_ = next_serial();
  int n_layers_;
  int kv_dim_;
  DType type_;
  int32_t trash_slot_;  // the first slot of the extra block
  size_t block_bytes_;  // one block of one layer's keys (or values)
  size_t layer_bytes_;  // all blocks of one layer's keys (or values)
  DeviceBuffer keys_;   // (n_layers, (num_blocks + 1) * block_size slots, kv_dim)
  DeviceBuffer values_; // (n_layers, (num_blocks + 1) * block_size slots, kv_dim)
  cudaStream_t stream_;
};

// Quantized products of more rows than this run as fp16 tiles of the matrix on cuBLAS in
// the default mode (prefill); fewer, and always in the batch-invariant mode, on quant_gemm.
constexpr int kQuantKernelRows = 64;
constexpr size_t kDequantBytes = size_t{64} << 20;  // fp16 rows of a matrix at a time for cuBLAS

int max_positions(const ModelConfig& c) { return c.context_length > 0 ? c.context_length : INT_MAX; }

class CudaBackend : public Backend {
 public:
  CudaBackend(int device, const CudaOptions& options)
      : device_(device),
        mode_(options.batch_invariant ? cuda::GemmMode::Invariant : cuda::GemmMode::Cublas),
        graphs_enabled_(options.graphs) {
    check(cudaSetDevice(device), "cudaSetDevice");
    cudaDeviceProp props{};
    check(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties");
    name_ = std::string("cuda (") + props.name + (options.batch_invariant ? ", batch-invariant)" : ")");
    check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    if (const cublasStatus_t status = cublasCreate(&cublas_); status != CUBLAS_STATUS_SUCCESS) {
      cudaStreamDestroy(stream_);
      check(status, "cublasCreate");
    }
    // once: every product runs on stream_, cuBLAS in a workspace of ours (no allocation while
    // a graph is being captured), the kernels' attributes set
    check(cublasSetStream(cublas_, stream_), "cublasSetStream");
    cublas_workspace_ = DeviceBuffer(kCublasWorkspace);
    check(cublasSetWorkspace(cublas_, cublas_workspace_.get(), kCublasWorkspace), "cublasSetWorkspace");
    cuda::prepare_kernels();
  }
  ~CudaBackend() override {
    clear_graphs();
    models_.clear();
    scratch_ = {};
    cublasDestroy(cublas_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return name_; }

  void prepare(const Model& model, const std::function<bool(double)>& progress) override {
    device_model(model, progress);
  }
  bool uploads_weights() const override { return true; }
  // A layers:K draft reads the target's own device copy: device memory, not the bytes a
  // draft reads, is what a GPU runs short of first, and a narrowed copy would be a second
  // upload of those layers.
  const Model& self_draft_model(const Model& target, int) override { return target; }

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
                                                   dtype_of(device_compute_type(model.weights)), stream_);
    return std::make_unique<KvCache>(block_size, num_blocks, std::move(storage));
  }

  void forward(const Model& model, KvCache& cache, const RaggedBatch& batch, std::vector<float>& logits,
               int n_layers) override {
    const DeviceModel& m = checked_model(model, cache, batch, n_layers);
    PlannedBatch step(cache, batch, max_positions(model.config));
    const int rows = run(model, m, cache, batch, step.plan(), n_layers);
    logits.resize(static_cast<size_t>(rows) * model.config.vocab_size);
    if (rows > 0) {
      check(cudaMemcpyAsync(logits.data(), scratch_.logits.get(), logits.size() * sizeof(float),
                            cudaMemcpyDeviceToHost, stream_),
            "logits download");
    }
    check(cudaStreamSynchronize(stream_), "forward");
    step.commit();
  }

  void forward_accept(const Model& model, KvCache& cache, const RaggedBatch& batch, const AcceptanceRule& rule,
                      std::span<const DraftRows> drafts, std::vector<AcceptedRows>& out) override {
    check_verification(batch, drafts.size());
    const DeviceModel& m = checked_model(model, cache, batch, -1);
    const int vocab = model.config.vocab_size, n_seqs = batch.n_seqs(), n_rows = batch.n_tokens();
    const acceptance::Rule kind = rule.forced_acceptance >= 0 ? acceptance::Rule::Forced
                                  : rule.sampling.greedy()    ? acceptance::Rule::Greedy
                                                              : acceptance::Rule::Sampled;
    const bool sampled_rows = kind == acceptance::Rule::Sampled || (kind == acceptance::Rule::Forced && !rule.sampling.greedy());
    int stride = 1;
    for (int i = 0; i < n_seqs; ++i) stride = std::max(stride, batch.offsets[i + 1] - batch.offsets[i]);
    // the step's acceptance inputs in one pinned buffer and one copy: per sequence its first row
    // and first draft distribution row, then per sequence `stride` uniforms peeked from a copy
    // of its generator, per row the sampling parameters, then the draft distributions
    size_t q_rows = 0;
    for (const DraftRows& d : drafts) q_rows += d.probs.size() / static_cast<size_t>(vocab);
    const size_t ints = static_cast<size_t>(2 * n_seqs + 1 + n_rows), doubles = static_cast<size_t>(n_seqs) * stride;
    const size_t ints_bytes = (ints * sizeof(int32_t) + 7) / 8 * 8;
    const size_t floats = static_cast<size_t>(3 * n_rows) + q_rows * vocab;
    const size_t in_bytes = ints_bytes + doubles * sizeof(double) + floats * sizeof(float);
    pinned_in_.reserve(in_bytes);
    int32_t* seq_rows = pinned_in_.get<int32_t>();
    int32_t* draft_rows = seq_rows + n_seqs + 1;
    int32_t* top_k = draft_rows + n_seqs;
    double* uniforms = reinterpret_cast<double*>(pinned_in_.get<uint8_t>() + ints_bytes);
    float* temperature = reinterpret_cast<float*>(uniforms + doubles);
    float* top_p = temperature + n_rows;
    float* min_p = top_p + n_rows;
    float* q = min_p + n_rows;
    size_t q_at = 0;
    for (int i = 0; i < n_seqs; ++i) {
      seq_rows[i] = batch.offsets[i];
      const DraftRows& d = drafts[static_cast<size_t>(i)];
      draft_rows[i] = d.probs.empty() ? -1 : static_cast<int32_t>(q_at);
      std::copy(d.probs.begin(), d.probs.end(), q + q_at * vocab);
      q_at += d.probs.size() / static_cast<size_t>(vocab);
      Rng peek = d.rng ? *d.rng : Rng();
      for (int j = 0; j < stride; ++j) uniforms[static_cast<size_t>(i) * stride + j] = d.rng ? peek.uniform() : 0.0;
    }
    seq_rows[n_seqs] = n_rows;
    std::fill_n(top_k, n_rows, rule.sampling.top_k);
    std::fill_n(temperature, n_rows, rule.sampling.temperature);
    std::fill_n(top_p, n_rows, rule.sampling.top_p);
    std::fill_n(min_p, n_rows, rule.sampling.min_p);

    PlannedBatch step(cache, batch, max_positions(model.config));
    run(model, m, cache, batch, step.plan(), -1);  // every row's logits: rows are tokens
    Scratch& s = scratch_;
    s.accept_in.reserve(in_bytes);
    check(cudaMemcpyAsync(s.accept_in.get(), pinned_in_.get(), in_bytes, cudaMemcpyHostToDevice, stream_),
          "acceptance upload");
    const uint8_t* in = s.accept_in.get<uint8_t>();
    const auto device_at = [&](const void* host) { return in + (static_cast<const uint8_t*>(host) - pinned_in_.get<uint8_t>()); };
    cuda::AcceptArgs a;
    a.logits = s.logits.get<float>();
    if (sampled_rows) {
      s.probs.reserve(sizeof(float) * static_cast<size_t>(n_rows) * vocab);
      cuda::sampling_probs(a.logits, n_rows, vocab, reinterpret_cast<const float*>(device_at(temperature)),
                           reinterpret_cast<const int32_t*>(device_at(top_k)), reinterpret_cast<const float*>(device_at(top_p)),
                           reinterpret_cast<const float*>(device_at(min_p)), s.probs.get<float>(), stream_);
      a.probs = s.probs.get<float>();
    }
    a.draft_probs = reinterpret_cast<const float*>(device_at(q));
    a.seq_rows = reinterpret_cast<const int32_t*>(device_at(seq_rows));
    a.draft_rows = reinterpret_cast<const int32_t*>(device_at(draft_rows));
    a.tokens = s.meta.get<int32_t>() + last_packed_tokens_;
    a.uniforms = reinterpret_cast<const double*>(device_at(uniforms));
    a.stride = stride;
    a.n_seqs = n_seqs;
    a.vocab = vocab;
    a.rule = static_cast<int>(kind);
    a.greedy_sampling = rule.sampling.greedy() ? 1 : 0;
    a.alpha = rule.forced_acceptance;
    const size_t out_ints = static_cast<size_t>(n_seqs) * (stride + 1), out_floats = static_cast<size_t>(n_seqs) * stride;
    const size_t out_bytes = out_ints * sizeof(int32_t) + out_floats * sizeof(float);
    s.accept_out.reserve(out_bytes);
    a.out_tokens = s.accept_out.get<int32_t>();
    a.out_logprobs = reinterpret_cast<float*>(a.out_tokens + out_ints);
    cuda::accept_rows(a, stream_);
    pinned_out_.reserve(out_bytes);
    check(cudaMemcpyAsync(pinned_out_.get(), s.accept_out.get(), out_bytes, cudaMemcpyDeviceToHost, stream_),
          "acceptance download");
    check(cudaStreamSynchronize(stream_), "forward_accept");
    step.commit();

    const int32_t* kept = pinned_out_.get<int32_t>();
    const float* logprobs = reinterpret_cast<const float*>(kept + out_ints);
    out.assign(static_cast<size_t>(n_seqs), AcceptedRows{});
    for (int i = 0; i < n_seqs; ++i) {
      AcceptedRows& r = out[static_cast<size_t>(i)];
      const int32_t* row = kept + static_cast<size_t>(i) * (stride + 1);
      r.accepted = row[0];
      r.tokens.assign(row + 1, row + 2 + r.accepted);
      r.logprobs.assign(logprobs + static_cast<size_t>(i) * stride, logprobs + static_cast<size_t>(i) * stride + r.accepted + 1);
      const int d = batch.offsets[i + 1] - batch.offsets[i] - 1;
      if (Rng* g = drafts[static_cast<size_t>(i)].rng) {
        for (int k = acceptance::draws(kind, rule.sampling.greedy(), d, r.accepted); k > 0; --k) g->uniform();
      }
    }
  }

  void forward_argmax(const Model& model, KvCache& cache, const RaggedBatch& batch, std::vector<int32_t>& tokens,
                      int n_layers) override {
    const DeviceModel& m = checked_model(model, cache, batch, n_layers);
    PlannedBatch step(cache, batch, max_positions(model.config));
    const int rows = run(model, m, cache, batch, step.plan(), n_layers);
    scratch_.tokens.reserve(sizeof(int32_t) * rows);
    cuda::argmax_rows(scratch_.logits.get<float>(), rows, model.config.vocab_size, scratch_.tokens.get<int32_t>(), stream_);
    tokens.resize(static_cast<size_t>(rows));
    if (rows > 0) {
      check(cudaMemcpyAsync(tokens.data(), scratch_.tokens.get(), tokens.size() * sizeof(int32_t),
                            cudaMemcpyDeviceToHost, stream_),
            "token download");
    }
    check(cudaStreamSynchronize(stream_), "forward");
    step.commit();
  }

 private:
  // The device copy of `model` after checking that `cache` and `batch` fit it.
  const DeviceModel& checked_model(const Model& model, KvCache& cache, const RaggedBatch& batch, int n_layers) {
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
    const DeviceModel& m = device_model(model, {});
    if (m.compute != kv->type()) throw std::invalid_argument("the KV cache was created for another model");
    return m;
  }

  // y[:, j] for the outputs of `w`, from x (m rows in the compute type).
  void product(const DeviceModel& model, const DeviceProduct& w, const void* x, int m, float* y, int ldy) {
    int col = 0;
    for (const DeviceMatrix& part : w.parts) {
      const int rows = static_cast<int>(part.layout.rows), cols = static_cast<int>(part.layout.cols);
      if (!part.layout.tiled()) {
        cuda::gemm(cublas_, mode_, x, part.data.get(), model.compute, m, rows, cols, y + col, ldy, stream_);
      } else if (mode_ == cuda::GemmMode::Invariant || m <= kQuantKernelRows) {
        cuda::quant_gemm(part.quant(), x, m, y + col, ldy, scratch_.split.get<float>(), stream_);
      } else {
        const int chunk = std::max(16, static_cast<int>(kDequantBytes / (2 * static_cast<size_t>(cols))) / 16 * 16);
        for (int r = 0; r < rows; r += chunk) {
          const int n = std::min(chunk, rows - r);
          cuda::dequantize_rows(part.quant(), r, n, scratch_.dequant.get(), stream_);
          cuda::gemm(cublas_, cuda::GemmMode::Cublas, x, scratch_.dequant.get(), DType::F16, m, n, cols, y + col + r, ldy,
                     stream_);
        }
      }
      col += rows;
    }
  }

  // Scratch for the products of a step with m rows through these weights; whether a buffer moved.
  bool reserve_products(const DeviceModel& model, int m, int layers) {
    size_t split = 0;
    bool dequant = false;
    const auto need = [&](const DeviceProduct& p) {
      for (const DeviceMatrix& part : p.parts) {
        if (!part.layout.tiled()) continue;
        split = std::max(split, cuda::quant_gemm_scratch(part.quant(), m));
        dequant = dequant || (mode_ == cuda::GemmMode::Cublas && m > kQuantKernelRows);
      }
    };
    for (int l = 0; l < layers; ++l) {
      const DeviceLayer& w = model.layers[static_cast<size_t>(l)];
      for (const DeviceProduct* p : {&w.qkv, &w.wo, &w.gate_up, &w.down}) need(*p);
    }
    need(model.logits());
    bool moved = scratch_.split.reserve(split * sizeof(float));
    if (dequant) moved |= scratch_.dequant.reserve(kDequantBytes);
    return moved;
  }

  // Runs the layers and the output matrix, leaving the wanted rows' logits in
  // scratch_.logits; returns their number. Decode and verification steps replay a CUDA
  // graph captured for their bucket of shapes (their metadata padded to it, device_plan.h);
  // longer steps launch the kernels one by one.
  int run(const Model& model, const DeviceModel& m, KvCache& cache, const RaggedBatch& batch, const BatchPlan& plan,
          int n_layers) {
    const ModelConfig& c = model.config;
    const int layers = n_layers < 0 ? c.n_layers : n_layers;
    auto* kv = static_cast<CudaKvStorage*>(cache.storage());
    const AttentionShape shape{cuda::attention_query_tile(c.n_heads, c.n_kv_heads), cuda::attention_piece_keys(),
                               kParallelQueries, c.n_heads / c.n_kv_heads};
    PackedPlan packed = pack_plan(plan, batch.tokens, shape);
    const bool replay = graphs_enabled_ && plan.n_tokens <= kGraphTokens;
    StepBucket bucket = exact_bucket(packed, plan);
    if (replay) {
      bucket = step_bucket(bucket);
      packed = pack_plan(plan, batch.tokens, shape, bucket, kv->trash_slot());
    }
    reserve_step(c, m, bucket, packed.data.size(), layers);
    std::memcpy(pinned_meta_.get(), packed.data.data(), packed.data.size() * sizeof(int32_t));
    last_packed_tokens_ = packed.tokens;
    if (!replay) {
      enqueue_step(c, m, *kv, cache.block_size(), packed, bucket, layers);
      return static_cast<int>(plan.logit_rows.size());
    }
    const GraphKey key{m.serial, kv->serial(), layers, bucket, scratch_generation_};
    auto it = graphs_.find(key);
    if (it == graphs_.end()) {
      if (graphs_.size() >= kMaxGraphs) clear_graphs();
      cudaGraph_t graph = nullptr;
      check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "graph capture");
      try {
        enqueue_step(c, m, *kv, cache.block_size(), packed, bucket, layers);
      } catch (...) {
        cudaStreamEndCapture(stream_, &graph);
        if (graph) cudaGraphDestroy(graph);
        cudaGetLastError();
        throw;
      }
      check(cudaStreamEndCapture(stream_, &graph), "graph capture");
      cudaGraphExec_t exec = nullptr;
      const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      check(status, "graph instantiation");
      it = graphs_.emplace(key, exec).first;
    }
    check(cudaGraphLaunch(it->second, stream_), "graph launch");
    return static_cast<int>(plan.logit_rows.size());
  }

  // Every buffer a step of this bucket uses, before anything is enqueued (a captured graph
  // keeps their addresses: a buffer that moves retires the graphs).
  void reserve_step(const ModelConfig& c, const DeviceModel& m, const StepBucket& b, size_t meta_ints, int layers) {
    const int n = b.tokens, rows = b.rows, dim = c.dim, hidden = c.hidden_dim, hd = c.head_dim();
    const int q_dim = c.q_dim(), qkv_cols = q_dim + 2 * c.kv_dim();
    const size_t element = cuda::dtype_bytes(m.compute);
    Scratch& s = scratch_;
    bool moved = pinned_meta_.reserve(meta_ints * sizeof(int32_t));
    moved |= s.meta.reserve(meta_ints * sizeof(int32_t));
    moved |= s.x.reserve(sizeof(float) * n * dim);
    moved |= s.tmp.reserve(sizeof(float) * n * dim);
    moved |= s.normed.reserve(element * n * std::max({dim, hidden, q_dim}));
    moved |= s.qkv.reserve(sizeof(float) * n * qkv_cols);
    moved |= s.attention.reserve(element * n * q_dim);
    moved |= s.gate_up.reserve(sizeof(float) * n * 2 * hidden);
    moved |= s.logits.reserve(sizeof(float) * rows * c.vocab_size);
    moved |= s.partials.reserve(sizeof(float) * static_cast<size_t>(b.partial_rows) * c.n_kv_heads * (hd + 2));
    moved |= reserve_products(m, std::max(n, rows), layers);
    if (moved) {
      clear_graphs();
      ++scratch_generation_;
    }
  }

  // The step's work on stream_, from the metadata upload to the logits: what a graph captures.
  void enqueue_step(const ModelConfig& c, const DeviceModel& m, CudaKvStorage& kv, int block_size, const PackedPlan& packed,
                    const StepBucket& b, int layers) {
    const int hd = c.head_dim(), q_dim = c.q_dim(), kv_dim = c.kv_dim();
    const int qkv_cols = q_dim + 2 * kv_dim, dim = c.dim, hidden = c.hidden_dim, n = b.tokens, rows = b.rows;
    Scratch& s = scratch_;
    check(cudaMemcpyAsync(s.meta.get(), pinned_meta_.get(), packed.data.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                          stream_),
          "batch metadata upload");
    const int32_t* meta = s.meta.get<int32_t>();
    float* x = s.x.get<float>();
    float* tmp = s.tmp.get<float>();
    float* qkv = s.qkv.get<float>();
    float* gate_up = s.gate_up.get<float>();

    const DeviceMatrix& table = m.embedding.parts.front();
    if (table.layout.tiled()) {
      cuda::embedding(table.quant(), meta + packed.tokens, n, x, stream_);
    } else {
      cuda::embedding(table.data.get(), m.compute, dim, meta + packed.tokens, n, x, stream_);
    }
    cuda::RopeKvArgs r;
    r.qkv = qkv;
    r.row_stride = qkv_cols;
    r.n_tokens = n;
    r.positions = meta + packed.positions;
    r.cache_slots = meta + packed.cache_slots;
    r.n_heads = c.n_heads;
    r.n_kv_heads = c.n_kv_heads;
    r.head_dim = hd;
    r.frequencies = m.rope_frequencies.get<double>();
    r.layout = m.rope_layout;
    r.cache_type = m.compute;
    cuda::AttentionArgs a;
    a.qkv = qkv;
    a.row_stride = qkv_cols;
    a.n_tokens = n;
    a.cache_type = m.compute;
    a.work = meta + packed.work;
    a.tasks = meta + packed.tasks;
    a.n_tasks = packed.n_tasks;
    a.token_work = meta + packed.token_work;
    a.positions = meta + packed.positions;
    a.table_offsets = meta + packed.table_offsets;
    a.block_tables = meta + packed.block_tables;
    a.block_size = block_size;
    a.n_heads = c.n_heads;
    a.n_kv_heads = c.n_kv_heads;
    a.head_dim = hd;
    a.partial_rows = packed.partial_rows;
    a.partial_values = s.partials.get<float>();
    a.partial_stats = a.partial_values + static_cast<size_t>(packed.partial_rows) * c.n_kv_heads * hd;
    a.out = s.attention.get();
    cuda::rmsnorm(x, m.layers[0].attn_norm.get<float>(), nullptr, n, dim, c.norm_eps, s.normed.get(), m.compute, stream_);
    for (int l = 0; l < layers; ++l) {
      const DeviceLayer& w = m.layers[static_cast<size_t>(l)];
      // attention (its input normed by the previous layer's last step)
      product(m, w.qkv, s.normed.get(), n, qkv, qkv_cols);
      if (w.qkv_bias.get()) cuda::add_bias(qkv, qkv_cols, n, w.qkv_bias.get<float>(), qkv_cols, stream_);
      if (w.q_norm.get()) {  // qwen3: each head of q and k normalized before the rotation
        cuda::head_rmsnorm(qkv, qkv_cols, n, c.n_heads, hd, w.q_norm.get<float>(), c.norm_eps, stream_);
        cuda::head_rmsnorm(qkv + q_dim, qkv_cols, n, c.n_kv_heads, hd, w.k_norm.get<float>(), c.norm_eps, stream_);
      }
      a.k_cache = r.k_cache = kv.keys(l);
      a.v_cache = r.v_cache = kv.values(l);
      cuda::rope_kv_write(r, stream_);
      cuda::paged_attention(a, stream_);
      product(m, w.wo, s.attention.get(), n, tmp, dim);
      if (w.bo.get()) cuda::add_bias(tmp, dim, n, w.bo.get<float>(), dim, stream_);
      // feed-forward
      cuda::residual_rmsnorm(x, tmp, w.ffn_norm.get<float>(), n, dim, c.norm_eps, s.normed.get(), m.compute, stream_);
      product(m, w.gate_up, s.normed.get(), n, gate_up, 2 * hidden);
      cuda::swiglu(gate_up, n, hidden, s.normed.get(), m.compute, stream_);
      product(m, w.down, s.normed.get(), n, tmp, dim);
      if (l + 1 < layers) {
        cuda::residual_rmsnorm(x, tmp, m.layers[static_cast<size_t>(l) + 1].attn_norm.get<float>(), n, dim, c.norm_eps,
                               s.normed.get(), m.compute, stream_);
      } else {
        cuda::residual_add(x, tmp, static_cast<int64_t>(n) * dim, stream_);
      }
    }
    // the final norm and the output matrix, on the wanted rows only
    cuda::rmsnorm(x, m.final_norm.get<float>(), meta + packed.logit_rows, rows, dim, c.norm_eps, s.normed.get(),
                  m.compute, stream_);
    product(m, m.logits(), s.normed.get(), rows, s.logits.get<float>(), c.vocab_size);
  }

  void clear_graphs() {
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    graphs_.clear();
  }

  // A captured step: which weights, cache, layer count and shapes, and which scratch buffers.
  struct GraphKey {
    uint64_t model;
    uint64_t cache;
    int layers;
    StepBucket bucket;
    uint64_t scratch;
    auto operator<=>(const GraphKey&) const = default;
  };
  static constexpr int kGraphTokens = 64;  // steps up to this many tokens replay graphs
  static constexpr size_t kMaxGraphs = 64;

  // Decode and verification items (at most this many tokens) spread their keys over blocks.
  static constexpr int kParallelQueries = 8;

  struct Scratch {
    DeviceBuffer meta;       // PackedPlan::data
    DeviceBuffer x;          // (n_tokens, dim) f32 residual stream
    DeviceBuffer tmp;        // (n_tokens, dim) f32 product output before the residual add
    DeviceBuffer normed;     // (n_tokens, max(dim, hidden, q_dim)) product input in the compute type
    DeviceBuffer qkv;        // (n_tokens, q_dim + 2 kv_dim) f32
    DeviceBuffer attention;  // (n_tokens, q_dim) in the compute type
    DeviceBuffer gate_up;    // (n_tokens, 2 hidden) f32
    DeviceBuffer logits;     // (n_logit_rows, vocab) f32
    DeviceBuffer tokens;     // (n_logit_rows) argmax of each row
    DeviceBuffer partials;   // attention pieces run in parallel: values, then (max, sum)
    DeviceBuffer split;      // quant_gemm's split-K partial sums
    DeviceBuffer dequant;    // fp16 rows of a quantized matrix for cuBLAS
    DeviceBuffer probs;      // (n_rows, vocab) target distributions for sampled acceptance
    DeviceBuffer accept_in;  // the acceptance inputs (forward_accept)
    DeviceBuffer accept_out; // what each sequence keeps
  };

  const DeviceModel& device_model(const Model& model, const std::function<bool(double)>& progress) {
    auto it = models_.find(&model);
    if (it != models_.end() && it->second->source == model.weights.token_embedding.data) return *it->second;
    if (const std::string refusal = device_refusal(model); !refusal.empty()) {
      throw ModelError((model.path.empty() ? std::string() : model.path + ": ") + refusal);
    }
    auto m = registry().get(device_, model, stream_, progress);
    models_[&model] = m;
    return *m;
  }

  int device_;
  std::string name_;
  cuda::GemmMode mode_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  bool graphs_enabled_;
  std::map<const Model*, std::shared_ptr<const DeviceModel>> models_;
  Scratch scratch_;
  uint64_t scratch_generation_ = 0;  // bumped when a scratch buffer moves
  std::map<GraphKey, cudaGraphExec_t> graphs_;
  PinnedBuffer pinned_meta_;         // the step's metadata, the source of its (captured) upload
  static constexpr size_t kCublasWorkspace = size_t{32} << 20;
  DeviceBuffer cublas_workspace_;
  size_t last_packed_tokens_ = 0;  // where the last step's tokens are in scratch_.meta
  PinnedBuffer pinned_in_;         // acceptance inputs, staged for one asynchronous copy
  PinnedBuffer pinned_out_;        // acceptance results, copied back asynchronously
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
    // The runtime says "driver version is insufficient" both where the driver is old and
    // where there is none at all: on a machine without an NVIDIA GPU, the second.
    if (status == cudaErrorNoDevice) return refuse("no CUDA device found");
    if (status == cudaErrorInsufficientDriver) {
      void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
      if (!driver) return refuse("no CUDA device: no NVIDIA driver on this machine");
      dlclose(driver);
      return refuse("no usable CUDA device: the NVIDIA driver is older than the CUDA runtime of this build; update the driver");
    }
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
