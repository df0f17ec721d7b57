// Error reporting for CUDA runtime and cuBLAS calls, and the sizes of the element types.
#include <stdexcept>
#include <string>

#include "kernels.h"

namespace specula::cuda {

size_t dtype_bytes(DType type) { return type == DType::F32 ? 4 : 2; }

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(status));
  }
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cuBLAS error in ") + what + ": " +
                             cublasGetStatusString(status));
  }
}

}  // namespace specula::cuda
