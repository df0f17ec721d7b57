// Choosing a backend. The CUDA backend, when this build has one, provides
// create_cuda_backend; otherwise the stub below explains why there is none.
#include "compute/backend.h"

#include <stdexcept>

#include "compute/host_memory.h"
#include "compute/acceptance.h"
#include "model/model_prefix.h"

namespace specula {

void Backend::forward_accept(const Model& model, KvCache& cache, const RaggedBatch& batch, const AcceptanceRule& rule,
                             std::span<const DraftRows> drafts, std::vector<AcceptedRows>& out) {
  check_verification(batch, drafts.size());
  std::vector<float> logits;
  forward(model, cache, batch, logits);
  const int vocab = model.config.vocab_size;
  out.assign(drafts.size(), AcceptedRows{});
  for (size_t i = 0; i < drafts.size(); ++i) {
    const std::span<const int> draft(batch.tokens.data() + batch.offsets[i] + 1,
                                     static_cast<size_t>(batch.offsets[i + 1] - batch.offsets[i] - 1));
    const std::span<const float> rows(logits.data() + static_cast<size_t>(batch.offsets[i]) * vocab,
                                      (draft.size() + 1) * static_cast<size_t>(vocab));
    Acceptance v;
    if (rule.forced_acceptance >= 0) {
      v = accept_forced(rule.forced_acceptance, rule.sampling, draft, rows, vocab, *drafts[i].rng);
    } else if (rule.sampling.greedy()) {
      v = accept_greedy(draft, rows, vocab);
    } else {
      v = accept_sampled(rule.sampling, draft, drafts[i].probs, rows, vocab, *drafts[i].rng);
    }
    AcceptedRows& a = out[i];
    a.accepted = v.accepted;
    a.tokens.assign(draft.begin(), draft.begin() + v.accepted);
    a.tokens.push_back(v.next);
    for (size_t t = 0; t < a.tokens.size(); ++t) {
      a.logprobs.push_back(token_logprob(rows.subspan(t * static_cast<size_t>(vocab), static_cast<size_t>(vocab)), a.tokens[t]));
    }
  }
}

void check_verification(const RaggedBatch& batch, size_t n_drafts) {
  if (n_drafts != batch.seqs.size() || batch.offsets.size() != batch.seqs.size() + 1 ||
      batch.want_logits.size() != batch.tokens.size()) {
    throw std::invalid_argument("a verification needs one draft per batch sequence");
  }
  for (const uint8_t w : batch.want_logits) {
    if (!w) throw std::invalid_argument("a verification batch needs the logits of every row");
  }
}

#if !defined(SPECULA_HAVE_CUDA)
std::unique_ptr<Backend> create_cuda_backend(std::string* why_not) {
  if (why_not) *why_not = "this build has no CUDA support";
  return nullptr;
}
#endif

std::shared_ptr<const ForwardCost> Backend::forward_cost(const Model& model, const CostProgress& progress) {
  for (const KnownCost& known : known_costs_) {
    if (known.model == &model && known.weights == model.weights.output.data) return known.cost;
  }
  ForwardCost measured = load_or_measure_forward_cost(*this, model, default_cost_cache_dir(), machine_load(), progress);
  measured.routing = routing_counts(model);  // a mixture's union from the routing seen, as it accrues
  auto cost = std::make_shared<const ForwardCost>(std::move(measured));
  known_costs_.push_back({&model, model.weights.output.data, cost});
  return cost;
}

uint64_t Backend::narrow_drafts_above() const {
  return narrow_drafts_above_ ? *narrow_drafts_above_ : last_level_cache_bytes();
}

const Model& Backend::self_draft_model(const Model& target, int n_layers) {
  std::erase_if(self_drafts_, [](const SelfDraft& d) { return d.target.expired(); });
  // a model without storage (headers alone) has nothing to narrow, nor a lifetime to follow
  if (target.storage.empty()) return target;
  for (const SelfDraft& d : self_drafts_) {
    if (d.n_layers == n_layers && !d.target.owner_before(target.storage.front()) &&
        !target.storage.front().owner_before(d.target)) {
      return *d.model;
    }
  }
  if (prefix_matrix_bytes(target, n_layers) <= narrow_drafts_above()) return target;
  const uint64_t bytes = narrowed_prefix_bytes(target, n_layers);
  if (bytes == 0) return target;
  // the copy and, on the CPU, the kernels' repacked copy of it
  if (!memory_shortfall(2 * bytes, "a narrowed draft", host_memory_room()).empty()) return target;
  self_drafts_.push_back({target.storage.front(), n_layers, narrowed_prefix(target, n_layers)});
  return *self_drafts_.back().model;
}

std::unique_ptr<Backend> create_backend(DeviceChoice choice, std::string* note) {
  std::string why_not;
  if (choice != DeviceChoice::Cpu) {
    if (std::unique_ptr<Backend> cuda = create_cuda_backend(&why_not)) {
      if (note) *note = "using " + cuda->name();
      return cuda;
    }
    if (choice == DeviceChoice::Cuda) throw std::runtime_error("no CUDA backend: " + why_not);
  }
  std::unique_ptr<Backend> cpu = create_cpu_backend();
  if (note) {
    *note = "using " + cpu->name() +
            (choice == DeviceChoice::Auto ? " (no GPU: " + why_not + ")" : std::string());
  }
  return cpu;
}

}  // namespace specula
