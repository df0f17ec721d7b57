// The CUDA backend (built when nvcc is found): the forward pass of model.h on an NVIDIA GPU,
// with the dense products on cuBLAS and the rest in the kernels of kernels/.
#pragma once

#include <memory>
#include <string>

#include "compute/backend.h"

namespace specula {

struct CudaOptions {
  // Products through our own kernel whose reduction order depends on the shapes of the
  // weights alone, so a sequence's logits are the same bits whatever the batch holds
  // (greedy speculative == plain greedy exactly); slower than cuBLAS for long prompts.
  bool batch_invariant = false;
  // Decode and verification steps (up to 64 tokens) replay a CUDA graph captured per bucket of
  // shapes instead of launching about ten kernels per layer; the same kernels, the same bits.
  bool graphs = true;
};

// The backend on the first CUDA device, or null with `why_not` saying why none is usable
// (no driver, no device, device error). Never throws.
std::unique_ptr<Backend> create_cuda_backend(std::string* why_not);
std::unique_ptr<Backend> create_cuda_backend(std::string* why_not, const CudaOptions& options);

}  // namespace specula
