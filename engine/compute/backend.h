// Where arithmetic happens. The CPU and CUDA backends implement the same interface; the
// speculative decoder never knows which one it drives.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compute/batch.h"
#include "compute/cost_model.h"
#include "compute/expert_union.h"
#include "compute/kv_cache.h"
#include "compute/simd_level.h"
#include "model/model.h"
#include "compute/sampler.h"

namespace specula {

// How verification rows are accepted (compute/acceptance.h): greedy match, rejection
// sampling, or, for benchmarks only, forced acceptance.
struct AcceptanceRule {
  SamplingParams sampling;          // the target's distribution; greedy when sampling.greedy()
  double forced_acceptance = -1.0;  // >= 0: accept_forced with this alpha (benchmark only)
};
// One batch sequence's draft as its acceptance sees it; in the batch the sequence holds its
// last token, then its draft tokens, with logits for every row.
struct DraftRows {
  std::span<const float> probs;  // (draft length, vocab) distributions the tokens were drawn from; empty: one-hot
  Rng* rng = nullptr;            // the sequence's acceptance generator (sampled and forced rules)
};
// What a sequence keeps: `accepted` draft tokens, then the target's own token.
struct AcceptedRows {
  int accepted = 0;
  std::vector<int> tokens;      // (accepted + 1) the kept drafts, then the target's token
  std::vector<float> logprobs;  // (accepted + 1) the target's log-probability of each (T = 1)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu (avx512, 2 threads)", "cuda (NVIDIA H200)"

  // Makes `model` ready to run now rather than at its first forward: a device backend
  // uploads its weights, the CPU backend repacks them for its kernels, reporting the
  // fraction done to `progress` (returning false cancels: ModelError).
  virtual void prepare(const Model& model, const std::function<bool(double)>& progress = {}) {
    (void)model;
    (void)progress;
  }
  // Whether prepare() has work to do (and reports progress).
  virtual bool uploads_weights() const { return false; }

  // A cache for `model`'s first `n_layers` layers (all when -1) holding `max_tokens`
  // positions in total across sequences, in blocks of `block_size`.
  virtual std::unique_ptr<KvCache> create_cache(const Model& model, int max_tokens,
                                                int n_layers = -1, int block_size = 16) = 0;

  // Runs the batch through the model's first `n_layers` layers (all when -1; then the
  // final norm and output matrix), writing each sequence's keys and values into `cache`,
  // and returns the logits of the rows the batch asks for: (n_logit_rows, vocab), in
  // token order. A sequence's logits must not depend on the rest of the batch or on how
  // its tokens were split across calls. Not reentrant: one forward at a time per backend.
  virtual void forward(const Model& model, KvCache& cache, const RaggedBatch& batch,
                       std::vector<float>& logits, int n_layers = -1) = 0;

  // Runs a verification batch and accepts each sequence's draft by `rule` (drafts[i] for
  // batch sequence i), advancing each generator exactly as accept_sampled / accept_forced
  // do. Fills `out` (one per batch sequence). The default takes the logits from forward()
  // and accepts on the host; a device backend decides where the logits are and copies back
  // only what the sequences keep.
  virtual void forward_accept(const Model& model, KvCache& cache, const RaggedBatch& batch, const AcceptanceRule& rule,
                              std::span<const DraftRows> drafts, std::vector<AcceptedRows>& out);

  // forward() for greedy decoding: the index of the largest logit of each wanted row (the
  // lowest on ties) instead of the rows themselves. A device backend overrides it to copy
  // back one int per row rather than the logits.
  virtual void forward_argmax(const Model& model, KvCache& cache, const RaggedBatch& batch,
                              std::vector<int32_t>& tokens, int n_layers = -1) {
    std::vector<float> logits;
    forward(model, cache, batch, logits, n_layers);
    const size_t vocab = static_cast<size_t>(model.config.vocab_size);
    tokens.resize(logits.size() / vocab);
    for (size_t r = 0; r < tokens.size(); ++r) {
      tokens[r] = argmax(std::span<const float>(logits).subspan(r * vocab, vocab));
    }
  }

  // The model a layers:K self-draft of `target` runs (`n_layers` = K): the target's first
  // K layers, final norm and output matrix with every matrix stored wider than 4.5 bits
  // requantized to Q4_0 (model/model_prefix.h: the draft reads half the bytes of Q8_0),
  // made at the first call for (target, K) and kept while the target lives. `target`
  // itself where narrowing would not pay or cannot be had: the prefix's matrices fit in
  // narrow_drafts_above() bytes (a cache holds them: arithmetic, not bytes, is their cost,
  // and 4 bits cost the draft some of its acceptance), none of them is wider, or the memory
  // cannot hold the copy and the backend's own copy of it. The draft then reads the
  // target's matrices: the output is the same either way. Not reentrant, like forward().
  virtual const Model& self_draft_model(const Model& target, int n_layers);
  // Prefixes of at most this many bytes of matrices are not narrowed: the last-level cache
  // (compute/cost_model.h's last_level_cache_bytes) unless set (tests set 0).
  uint64_t narrow_drafts_above() const;
  void set_narrow_drafts_above(uint64_t bytes) { narrow_drafts_above_ = bytes; }

  // Threads a CPU backend computes with; 0 for a backend whose work runs elsewhere (a GPU).
  // The cost model then times forwards by CPU time per thread too, which a busy machine's
  // other programs do not inflate.
  virtual int cpu_threads() const { return 0; }
  // CPU seconds the backend's threads have run so far, read exactly (ThreadPool::cpu_seconds;
  // call it from the thread that runs the forwards); 0 where cpu_threads() is 0.
  virtual double cpu_seconds() const { return 0.0; }

  // What forwards of `model` cost on this backend (compute/cost_model.h): read from the
  // user's cost cache, or measured on the first call for the model (a few whole forwards
  // per batch size: 0.4 s for the demo target, 1.5 s for a 1.1B model on 2 cores)
  // and stored there; then kept for the backend's lifetime. A test backend may return a
  // controlled cost instead.
  // `progress` hears how far a measurement has come (nothing when the cost is known).
  virtual std::shared_ptr<const ForwardCost> forward_cost(const Model& model, const CostProgress& progress = {});

  // A mixture of experts' routing as this backend's forwards of `model` have counted it
  // (compute/expert_union.h), which forward_cost's cost prices verifications by; null where
  // the model is dense or the backend does not count. Counted and read on the thread that
  // runs the forwards (decoding asks its draft policy between two forwards).
  virtual std::shared_ptr<const RoutingCounts> routing_counts(const Model&) { return nullptr; }

 private:
  struct KnownCost {
    const Model* model;                      // the model measured ...
    const void* weights;                     // ... while its output matrix lay here (a new model at the old address is another)
    std::shared_ptr<const ForwardCost> cost;
  };
  std::vector<KnownCost> known_costs_;
  struct SelfDraft {
    std::weak_ptr<const void> target;   // the target's first storage: expired once the target is gone
    int n_layers;
    std::shared_ptr<const Model> model; // the narrowed prefix
  };
  std::vector<SelfDraft> self_drafts_;
  std::optional<uint64_t> narrow_drafts_above_;
};

// Throws std::invalid_argument unless `batch` is a verification batch for `n_drafts` drafts:
// one per sequence, every row's logits wanted.
void check_verification(const RaggedBatch& batch, size_t n_drafts);

enum class DeviceChoice { Auto, Cpu, Cuda };

// The backend for `choice`: Auto takes a usable GPU, else the CPU; Cuda throws
// std::runtime_error with the reason when no GPU can be used. `note` receives a line
// saying what was chosen and why.
std::unique_ptr<Backend> create_backend(DeviceChoice choice, std::string* note = nullptr);
// The CPU backend on `threads` threads (0: one per core) with the kernels of `simd`
// (default: the best this processor has; simd_level_from_name parses "portable", "avx2",
// "avx512"); throws std::invalid_argument when the processor cannot run that level. It
// repacks quantized weight matrices at their first use and keeps the copies (about the
// size of those matrices, see docs/cpu_backend.md) while the model lives. Small jobs (a
// tiny model's matrices) run on the calling thread; `split_every_job` splits them too, for
// tests that compare what several threads compute.
std::unique_ptr<Backend> create_cpu_backend(int threads = 0, SimdLevel simd = best_simd_level(),
                                            bool split_every_job = false);
// Defined by the CUDA backend when the build has one: a backend on the first usable GPU,
// or null with the reason in `why_not` ("this build has no CUDA support" otherwise).
std::unique_ptr<Backend> create_cuda_backend(std::string* why_not);

}  // namespace specula
