// Shared pieces of the device checks: whether a GPU is usable (and why not), device
// buffers that are poisoned before every run, data rounded to a device type, and the
// error measure every comparison uses.
#pragma once

#include <QtTest>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels.h"
#include "model/tensor.h"

namespace specula::test {

// Empty when a CUDA device is usable, else the reason.
inline std::string gpu_unavailable() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device: ") + cudaGetErrorString(status);
  }
  return count == 0 ? "no CUDA device found" : "";
}

// Skips the test (also under CI: a machine without a GPU is not missing reference data).
#define SPECULA_REQUIRE_GPU()                                              \
  if (const std::string why = ::specula::test::gpu_unavailable(); !why.empty()) \
  QSKIP(why.c_str())

// A device array; poison() fills it with 0xff bytes, a NaN in f32, f16 and bf16, so an
// element a kernel forgets to write fails the comparison.
template <typename T>
class Device {
 public:
  explicit Device(size_t n) : n_(n) { cuda::check(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(1, n) * sizeof(T)), "test cudaMalloc"); }
  explicit Device(const std::vector<T>& v) : Device(v.size()) { upload(v); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device() { cudaFree(p_); }
  T* get() const { return p_; }
  void upload(const std::vector<T>& v) {
    cuda::check(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "test upload");
  }
  void poison() { cuda::check(cudaMemset(p_, 0xff, n_ * sizeof(T)), "test poison"); }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    cuda::check(cudaDeviceSynchronize(), "kernel");
    cuda::check(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "test download");
    return v;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

inline const char* dtype_name(cuda::DType t) {
  return t == cuda::DType::F32 ? "f32" : t == cuda::DType::F16 ? "f16" : "bf16";
}

// Values in a device type: the raw bytes to upload and the exact floats they hold.
struct Typed {
  cuda::DType type;
  std::vector<uint8_t> raw;
  std::vector<float> values;
};

inline Typed to_typed(cuda::DType type, const std::vector<float>& v) {
  Typed t{type, std::vector<uint8_t>(v.size() * cuda::dtype_bytes(type)), v};
  for (size_t i = 0; i < v.size(); ++i) {
    if (type == cuda::DType::F32) {
      std::memcpy(t.raw.data() + 4 * i, &v[i], 4);
      continue;
    }
    const uint16_t h = type == cuda::DType::F16 ? fp32_to_fp16(v[i]) : fp32_to_bf16(v[i]);
    t.values[i] = type == cuda::DType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
    std::memcpy(t.raw.data() + 2 * i, &h, 2);
  }
  return t;
}

inline std::vector<float> random_floats(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

inline std::vector<float> from_typed_raw(cuda::DType type, const std::vector<uint8_t>& raw) {
  std::vector<float> v(raw.size() / cuda::dtype_bytes(type));
  for (size_t i = 0; i < v.size(); ++i) {
    if (type == cuda::DType::F32) {
      std::memcpy(&v[i], raw.data() + 4 * i, 4);
      continue;
    }
    uint16_t h;
    std::memcpy(&h, raw.data() + 2 * i, 2);
    v[i] = type == cuda::DType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
  }
  return v;
}

// Largest |got - want| over the largest |want|: one number per comparison, NaN when any
// element is NaN or infinite (so it never passes a bound).
inline double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return NAN;
  double worst = 0.0, scale = 1e-30;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return NAN;
    worst = std::max(worst, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return worst / scale;
}

// Bound for results rounded to `type` once or computed with fp32 accumulation.
inline double bound_for(cuda::DType type) {
  switch (type) {
    case cuda::DType::F32: return 2e-5;
    case cuda::DType::F16: return 2e-3;
    case cuda::DType::BF16: return 1.6e-2;
  }
  return 0.0;
}

#define SPECULA_EXPECT_CLOSE(got, want, bound, what)                                         \
  do {                                                                                       \
    const double err_ = ::specula::test::relative_error(got, want);                          \
    if (!(err_ <= (bound))) {                                                                \
      QFAIL(qPrintable(QStringLiteral("%1: relative error %2 above %3")                      \
                           .arg(QString::fromStdString(what)).arg(err_).arg(bound)));        \
    }                                                                                        \
  } while (0)

}  // namespace specula::test
