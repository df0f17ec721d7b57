// Timings of the CUDA backend on random-weight fp16 models of TinyLlama-1.1B and Llama-7B
// shape: plain batched greedy decoding, the same in the batch-invariant mode, and
// speculative decoding with a `layers:K` draft (the target's first K layers) at a forced
// acceptance rate alpha (each draft token accepted with probability alpha until the first
// rejection), which measures the system at a known acceptance rate whatever the weights.
// Prints a markdown table last; exits 0 with a note when no GPU is usable.
//
//   bench_cuda [--shapes 1.1b,7b]
#include <algorithm>
#include <chrono>
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
  auto cache = backend.create_cache(model, (n + 1) * (kPrompt + kPlainSteps + 32));
  const std::vector<int> seqs = forked_prompt(backend, model, *cache, n, -1, some_tokens(kPrompt, rng));
  std::vector<int32_t> last = some_tokens(n, rng), next;
  Result r;
  for (int step = -2; step < kPlainSteps; ++step) {  // two untimed warm-up steps
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
  const int capacity = (n + 1) * (kPrompt + (kRounds + 2) * (k + 1) + 32);
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
  for (int round = -2; round < kRounds; ++round) {
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

void row(const std::string& model, int n, const std::string& mode, const Result& r, double baseline_ms, double weight_gbs,
         double copy_gbs) {
  const double ms = 1000.0 * r.seconds / (static_cast<double>(r.tokens) / n);
  std::printf("| %s | %d | %s | %.2f | %.0f | %.2fx |", model.c_str(), n, mode.c_str(), ms, r.tokens / r.seconds, baseline_ms / ms);
  if (weight_gbs > 0) {
    std::printf(" %.0f | %.0f%% |\n", weight_gbs, 100.0 * weight_gbs / copy_gbs);
  } else {
    std::printf(" - | - |\n");
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string shapes = "1.1b,7b";
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--shapes") shapes = argv[i + 1];
  }
  std::string why;
  if (!create_cuda_backend(&why)) {
    std::printf("bench_cuda: skipped, %s\n", why.c_str());
    return 0;
  }
  const double copy_gbs = copy_bandwidth() / 1e9;
  std::printf("device-to-device copy: %.0f GB/s\n", copy_gbs);
  std::printf("\n| model | N | mode | ms/token/seq | tokens/s | speed-up | weight GB/s | of copy |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const std::string key : {"1.1b", "7b"}) {
    if (shapes.find(key) == std::string::npos) continue;
    const ModelConfig config = random_model_config(key);
    const auto model = make_random_model(config, TensorType::F16, 1);
    const double weight_bytes = static_cast<double>(device_weight_bytes(*model));
    const int draft_layers = std::max(1, config.n_layers / 8);
    const std::string name = key + " f16";
    auto fast = create_cuda_backend(&why);
    auto invariant = create_cuda_backend(&why, CudaOptions{true});
    for (int n : {1, 8, 16}) {
      std::mt19937 rng(static_cast<uint32_t>(n));
      const Result base = plain(*fast, *model, n, rng);
      const double base_ms = 1000.0 * base.seconds / (static_cast<double>(base.tokens) / n);
      const double step_s = base.seconds / (static_cast<double>(base.tokens) / n);
      row(name, n, "plain", base, base_ms, weight_bytes / step_s / 1e9, copy_gbs);
      const Result inv = plain(*invariant, *model, n, rng);
      const double inv_step_s = inv.seconds / (static_cast<double>(inv.tokens) / n);
      row(name, n, "plain, batch-invariant", inv, base_ms, weight_bytes / inv_step_s / 1e9, copy_gbs);
      for (const auto& [k, alpha] : {std::pair{4, 0.6}, std::pair{4, 0.8}, std::pair{6, 0.8}}) {
        const Result spec = speculative(*fast, *model, n, draft_layers, k, alpha, rng);
        char mode[96];
        std::snprintf(mode, sizeof(mode), "layers:%d k=%d alpha=%.1f", draft_layers, k, alpha);
        row(name, n, mode, spec, base_ms, 0.0, copy_gbs);
      }
    }
  }
  return 0;
}
