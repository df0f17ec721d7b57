// Timings of the CUDA backend on random-weight models of TinyLlama-1.1B and Llama-7B shape
// in every weight type: plain batched greedy decoding (also in the batch-invariant mode) and
// speculative decoding with a `layers:K` draft (the target's first K = n_layers / 8 layers)
// at a forced acceptance rate (each draft token accepted with probability alpha until the
// first rejection), which measures the system at a known acceptance rate whatever the
// weights. Every timed row starts after untimed warm-up steps on weights already uploaded.
// Prints one markdown table; exits 0 with a note when no GPU is usable.
//
//   bench_cuda [--shapes 1.1b,7b] [--types f16,q8_0,q4_0,q4_K,q6_K,q4_K_M]
//   bench_cuda --versions    the runtime and driver versions and the device, and whether they fit
//   bench_cuda --roofline    bytes per step and the times they allow (arithmetic only, no GPU)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "compute/cuda_backend.h"
#include "compute/device_plan.h"
#include "kernels.h"
#include "model/random_model.h"

using namespace specula;

namespace {

constexpr int kPrompt = 128;     // shared prompt, prefilled once and forked
constexpr int kPlainSteps = 48;  // timed decoding steps
constexpr int kRounds = 16;      // timed speculative rounds
constexpr int kWarmup = 2;       // untimed steps (rounds) before each timed row
constexpr int kDraftTokens = 4;
constexpr double kAlpha = 0.8;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<int32_t> some_tokens(int n, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> id(3, 31999);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = id(rng);
  return t;
}

// Device-to-device copy bandwidth (bytes read + written per second), the ceiling for reading weights.
double copy_bandwidth() {
  const size_t bytes = size_t{2} << 30;
  void *a = nullptr, *b = nullptr;
  cuda::check(cudaMalloc(&a, bytes), "cudaMalloc");
  cuda::check(cudaMalloc(&b, bytes), "cudaMalloc");
  cuda::check(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice), "copy");
  cuda::check(cudaDeviceSynchronize(), "copy");
  const auto start = Clock::now();
  for (int i = 0; i < 10; ++i) cuda::check(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice), "copy");
  cuda::check(cudaDeviceSynchronize(), "copy");
  const double s = seconds_since(start);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * 10 * static_cast<double>(bytes) / s;
}

struct Result {
  double seconds = 0.0;
  long tokens = 0;  // generated, over all sequences
  double ms_per_token(int n) const { return 1000.0 * seconds / (static_cast<double>(tokens) / n); }
};

// A prompt prefilled once in `cache` (through `layers` layers) and forked into n sequences.
std::vector<int> forked_prompt(Backend& backend, const Model& model, KvCache& cache, int n, int layers,
                               const std::vector<int32_t>& prompt) {
  const int root = cache.create();
  RaggedBatch b;
  b.add(root, prompt, false);
  std::vector<int32_t> out;
  backend.forward_argmax(model, cache, b, out, layers);
  std::vector<int> seqs;
  for (int i = 0; i < n; ++i) seqs.push_back(cache.fork(root));
  return seqs;
}

Result plain(Backend& backend, const Model& model, int n, std::mt19937& rng) {
  auto cache = backend.create_cache(model, (n + 1) * (kPrompt + kPlainSteps + kWarmup + 32));
  const std::vector<int> seqs = forked_prompt(backend, model, *cache, n, -1, some_tokens(kPrompt, rng));
  std::vector<int32_t> last = some_tokens(n, rng), next;
  Result r;
  for (int step = -kWarmup; step < kPlainSteps; ++step) {
    const auto start = Clock::now();
    RaggedBatch b;
    for (int i = 0; i < n; ++i) b.add(seqs[static_cast<size_t>(i)], std::vector<int32_t>{last[static_cast<size_t>(i)]}, false);
    backend.forward_argmax(model, *cache, b, next);
    last = next;
    if (step >= 0) {
      r.seconds += seconds_since(start);
      r.tokens += n;
    }
  }
  return r;
}

// Rounds of: k draft steps through the first `draft_layers` layers, one ragged verification
// of every sequence's k + 1 tokens, then each sequence keeps a forced-acceptance prefix.
Result speculative(Backend& backend, const Model& model, int n, int draft_layers, int k, double alpha,
                   std::mt19937& rng) {
  const int capacity = (n + 1) * (kPrompt + (kRounds + kWarmup) * (k + 1) + 32);
  auto target = backend.create_cache(model, capacity);
  auto draft = backend.create_cache(model, capacity, draft_layers);
  const std::vector<int32_t> prompt = some_tokens(kPrompt, rng);
  const std::vector<int> seqs = forked_prompt(backend, model, *target, n, -1, prompt);
  const std::vector<int> dseqs = forked_prompt(backend, model, *draft, n, draft_layers, prompt);
  std::vector<int32_t> last = some_tokens(n, rng);
  std::vector<std::vector<int32_t>> pending(static_cast<size_t>(n));  // committed, not yet in the draft cache
  std::bernoulli_distribution accept(alpha);
  Result r;
  std::vector<int32_t> out;
  for (int round = -kWarmup; round < kRounds; ++round) {
    const auto start = Clock::now();
    std::vector<std::vector<int32_t>> drafted(static_cast<size_t>(n));
    for (int j = 0; j < k; ++j) {  // the draft: k ragged steps through the first K layers
      RaggedBatch b;
      for (int i = 0; i < n; ++i) {
        std::vector<int32_t> feed;
        if (j == 0) {
          feed = pending[static_cast<size_t>(i)];
          feed.push_back(last[static_cast<size_t>(i)]);
        } else {
          feed = {drafted[static_cast<size_t>(i)].back()};
        }
        b.add(dseqs[static_cast<size_t>(i)], feed, false);
      }
      backend.forward_argmax(model, *draft, b, out, draft_layers);
      for (int i = 0; i < n; ++i) drafted[static_cast<size_t>(i)].push_back(out[static_cast<size_t>(i)]);
    }
    RaggedBatch verify;  // one ragged pass of the target over every sequence's draft
    for (int i = 0; i < n; ++i) {
      std::vector<int32_t> feed{last[static_cast<size_t>(i)]};
      feed.insert(feed.end(), drafted[static_cast<size_t>(i)].begin(), drafted[static_cast<size_t>(i)].end());
      verify.add(seqs[static_cast<size_t>(i)], feed, true);
    }
    backend.forward_argmax(model, *target, verify, out);
    long emitted = 0;
    for (int i = 0; i < n; ++i) {
      int a = 0;
      while (a < k && accept(rng)) ++a;
      const int committed = target->length(seqs[static_cast<size_t>(i)]) - (k + 1) + a + 1;
      target->truncate(seqs[static_cast<size_t>(i)], committed);
      const int draft_length = draft->length(dseqs[static_cast<size_t>(i)]);
      draft->truncate(dseqs[static_cast<size_t>(i)], std::min(draft_length, committed));
      pending[static_cast<size_t>(i)].clear();
      if (a == k) pending[static_cast<size_t>(i)].push_back(drafted[static_cast<size_t>(i)].back());
      last[static_cast<size_t>(i)] = out[static_cast<size_t>(i * (k + 1) + a)];
      emitted += a + 1;
    }
    if (round >= 0) {
      r.seconds += seconds_since(start);
      r.tokens += emitted;
    }
  }
  return r;
}

struct WeightType {
  std::string name;
  TensorType type, second;  // second: wv, w_down and output (Q4_K_M's Q6_K)
};
const WeightType kTypes[] = {
    {"f16", TensorType::F16, TensorType::F16},     {"q8_0", TensorType::Q8_0, TensorType::Q8_0},
    {"q4_0", TensorType::Q4_0, TensorType::Q4_0},  {"q4_K", TensorType::Q4_K, TensorType::Q4_K},
    {"q6_K", TensorType::Q6_K, TensorType::Q6_K},  {"q4_K_M", TensorType::Q4_K, TensorType::Q6_K},
};

bool listed(const std::string& list, const std::string& name) {
  return ("," + list + ",").find("," + name + ",") != std::string::npos;
}

// Random weights of a type without building them: what a step reads depends on shapes and
// types alone, so a model of views without data will do.
std::shared_ptr<const Model> shape_only(const ModelConfig& c, const WeightType& t) {
  auto m = std::make_shared<Model>();
  m->config = c;
  static const uint8_t data[2] = {};  // two addresses: the output matrix is not tied
  const auto view = [](TensorType type, int64_t rows, int64_t cols, int at = 0) {
    TensorView v;
    v.type = type;
    v.rows = rows;
    v.cols = cols;
    v.data = data + at;
    return v;
  };
  Weights& w = m->weights;
  const int64_t dim = c.dim, kv = c.kv_dim(), q = static_cast<int64_t>(c.n_heads) * c.head_dim(), hidden = c.hidden_dim;
  w.token_embedding = view(t.type, c.vocab_size, dim);
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights lw;
    lw.attn_norm = lw.ffn_norm = view(TensorType::F32, 1, dim);
    lw.wq = view(t.type, q, dim);
    lw.wk = view(t.type, kv, dim);
    lw.wv = view(t.second, kv, dim);
    lw.wo = view(t.type, dim, q);
    lw.w_gate = lw.w_up = view(t.type, hidden, dim);
    lw.w_down = view(t.second, dim, hidden);
    w.layers.push_back(lw);
  }
  w.final_norm = view(TensorType::F32, 1, dim);
  w.output = view(t.second, c.vocab_size, dim, 1);
  return m;
}

// The arithmetic of docs/cuda.md, from the same byte counts the table's weight GB/s uses.
// A plain step reads the weights once and every sequence's keys and values; it yields one
// token per sequence, so its time is the time per token per sequence. A speculative round
// (k draft steps of the first K layers, each with the final norm and output matrix, then one
// verification) yields (1 - alpha^(k+1)) / (1 - alpha) tokens per sequence on average.
// Times at 80 % of the HBM bandwidth, for contexts of 256 and 4,096 positions.
int roofline() {
  const struct {
    const char* name;
    double bytes_per_s;
  } devices[] = {{"A100", 2.039e12}, {"H200", 4.8e12}};
  const double per_round = (1.0 - std::pow(kAlpha, kDraftTokens + 1)) / (1.0 - kAlpha);
  std::printf("speculative: layers:K (K = n_layers / 8), k = %d, alpha %.1f: %.2f tokens per round\n\n", kDraftTokens,
              kAlpha, per_round);
  std::printf("| model | type | weights/step GB | N | context | KV/step GB | plain A100 | plain H200 | speculative A100 | "
              "speculative H200 |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string key : {"1.1b", "7b"}) {
    const ModelConfig c = random_model_config(key);
    const int k_layers = std::max(1, c.n_layers / 8);
    for (const WeightType& t : kTypes) {
      const auto m = shape_only(c, t);
      const double weights = static_cast<double>(step_weight_bytes(*m));
      const double head = weights - static_cast<double>(step_weight_bytes(*m, c.n_layers));  // final norm, output
      const double draft = static_cast<double>(step_weight_bytes(*m, k_layers)) + head;
      for (int n : {1, 8, 16}) {
        for (int context : {256, 4096}) {
          const std::vector<int> contexts(static_cast<size_t>(n), context);
          const TensorType compute = device_compute_type(m->weights);
          const double kv = static_cast<double>(step_kv_bytes(c, compute, contexts));
          const double draft_kv = static_cast<double>(step_kv_bytes(c, compute, contexts, k_layers));
          std::printf("| %s | %s | %.3f | %d | %d | %.3f |", key.c_str(), t.name.c_str(), weights / 1e9, n, context, kv / 1e9);
          for (const auto& d : devices) std::printf(" %.3f |", 1000.0 * (weights + kv) / (0.8 * d.bytes_per_s));
          for (const auto& d : devices) {
            const double round = (weights + kv + kDraftTokens * (draft + draft_kv)) / (0.8 * d.bytes_per_s);
            std::printf(" %.3f |", 1000.0 * round / per_round);
          }
          std::printf("\n");
        }
      }
    }
  }
  return 0;
}

// The CUDA runtime this was built against, the driver's, the device's compute capability,
// and what is missing when they do not fit. Exit 0 when a device is usable, 1 otherwise.
int versions() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  const auto text = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  std::printf("CUDA runtime %s (this build), driver supports CUDA %s\n", text(runtime).c_str(),
              driver ? text(driver).c_str() : "none (no driver)");
  if (driver == 0) {
    std::printf("no NVIDIA driver is loaded: this build needs one for CUDA %s or newer\n", text(runtime).c_str());
    return 1;
  }
  if (driver < runtime) {
    std::printf("the driver is older than the runtime: install an NVIDIA driver for CUDA %s or newer, or build with a "
                "CUDA %s toolkit (tests/device/pack.sh with that nvcc)\n",
                text(runtime).c_str(), text(driver).c_str());
    return 1;
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no CUDA device found\n");
    return 1;
  }
  cudaDeviceProp p{};
  cuda::check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  std::printf("device 0: %s, compute capability %d.%d, %.0f GiB, %d multiprocessors\n", p.name, p.major, p.minor,
              static_cast<double>(p.totalGlobalMem) / (1 << 30), p.multiProcessorCount);
  if (p.major < 8) {
    std::printf("compute capability %d.%d is below 8.0: the tensor-core kernels need an A100 (sm_80) or newer\n", p.major,
                p.minor);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string shapes = "1.1b,7b", types = "f16,q8_0,q4_0,q4_K,q6_K,q4_K_M";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--roofline") return roofline();
    if (arg == "--versions") return versions();
    if (arg == "--shapes" && i + 1 < argc) shapes = argv[++i];
    if (arg == "--types" && i + 1 < argc) types = argv[++i];
  }
  std::string why;
  if (!create_cuda_backend(&why)) {
    std::printf("bench_cuda: skipped, %s\n", why.c_str());
    return 0;
  }
  const double copy_gbs = copy_bandwidth() / 1e9;
  std::printf("device-to-device copy: %.0f GB/s (read + write)\n", copy_gbs);
  std::printf("speculative: layers:K (K = n_layers / 8), k = %d draft tokens, forced acceptance %.1f\n", kDraftTokens,
              kAlpha);
  std::printf("\n| model | type | N | plain ms/token/seq | invariant | speculative | speed-up | weight GB/s | of copy |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string key : {"1.1b", "7b"}) {
    if (!listed(shapes, key)) continue;
    const ModelConfig config = random_model_config(key);
    const int draft_layers = std::max(1, config.n_layers / 8);
    for (const WeightType& t : kTypes) {
      if (!listed(types, t.name)) continue;
      const auto model = make_random_model(config, t.type, t.second, 1);
      const double step_bytes = static_cast<double>(step_weight_bytes(*model));
      auto fast = create_cuda_backend(&why);
      auto invariant = create_cuda_backend(&why, CudaOptions{true});
      fast->prepare(*model);  // one upload, shared by both backends, before anything is timed
      invariant->prepare(*model);
      for (int n : {1, 8, 16}) {
        std::mt19937 rng(static_cast<uint32_t>(n));
        const Result base = plain(*fast, *model, n, rng);
        const Result inv = plain(*invariant, *model, n, rng);
        const Result spec = speculative(*fast, *model, n, draft_layers, kDraftTokens, kAlpha, rng);
        const double base_ms = base.ms_per_token(n);
        const double weight_gbs = step_bytes / (base_ms / 1000.0) / 1e9;
        std::printf("| %s | %s | %d | %.3f | %.3f | %.3f | %.2fx | %.0f | %.0f%% |\n", key.c_str(), t.name.c_str(), n, base_ms,
                    inv.ms_per_token(n), spec.ms_per_token(n), base_ms / spec.ms_per_token(n), weight_gbs,
                    100.0 * weight_gbs / copy_gbs);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
