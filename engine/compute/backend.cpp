// Choosing a backend. The CUDA backend, when this build has one, provides
// create_cuda_backend; otherwise the stub below explains why there is none.
#include "compute/backend.h"

#include <stdexcept>

namespace specula {

#if !defined(SPECULA_HAVE_CUDA)
std::unique_ptr<Backend> create_cuda_backend(std::string* why_not) {
  if (why_not) *why_not = "this build has no CUDA support";
  return nullptr;
}
#endif

std::shared_ptr<const ForwardCost> Backend::forward_cost(const Model& model) {
  for (const KnownCost& known : known_costs_) {
    if (known.model == &model && known.weights == model.weights.output.data) return known.cost;
  }
  auto cost = std::make_shared<const ForwardCost>(load_or_measure_forward_cost(*this, model, default_cost_cache_dir()));
  known_costs_.push_back({&model, model.weights.output.data, cost});
  return cost;
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
