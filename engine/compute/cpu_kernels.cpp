// Portable kernels, activation quantization, SIMD detection and the matmul driver.
#include "compute/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "compute/cpu_kernels_impl.h"
#include "compute/thread_pool.h"

namespace specula {

namespace kernels {
namespace {

// Portable tiles: one float accumulator per token, updated in column order.

template <int T>
void f32_tile(const uint8_t* w, const uint8_t* x, size_t x_stride, int64_t cols, float* out) {
  const auto* wf = reinterpret_cast<const float*>(w);
  float acc[T] = {};
  for (int64_t c = 0; c < cols; ++c) {
    for (int t = 0; t < T; ++t)
      acc[t] += wf[c] * reinterpret_cast<const float*>(x + t * x_stride)[c];
  }
  for (int t = 0; t < T; ++t) out[t] = acc[t];
}

template <int T>
void f16_tile(const uint8_t* w, const uint8_t* x, size_t x_stride, int64_t cols, float* out) {
  const auto* wh = reinterpret_cast<const uint16_t*>(w);
  float acc[T] = {};
  for (int64_t c = 0; c < cols; ++c) {
    const float wc = half_to_float(wh[c]);
    for (int t = 0; t < T; ++t) acc[t] += wc * reinterpret_cast<const float*>(x + t * x_stride)[c];
  }
  for (int t = 0; t < T; ++t) out[t] = acc[t];
}

template <int T>
void bf16_tile(const uint8_t* w, const uint8_t* x, size_t x_stride, int64_t cols, float* out) {
  const auto* wh = reinterpret_cast<const uint16_t*>(w);
  float acc[T] = {};
  for (int64_t c = 0; c < cols; ++c) {
    const uint32_t bits = static_cast<uint32_t>(wh[c]) << 16;
    float wc;
    std::memcpy(&wc, &bits, 4);
    for (int t = 0; t < T; ++t) acc[t] += wc * reinterpret_cast<const float*>(x + t * x_stride)[c];
  }
  for (int t = 0; t < T; ++t) out[t] = acc[t];
}

template <int T>
void q8_0_tile(const uint8_t* w, const uint8_t* x, size_t x_stride, int64_t cols, float* out) {
  const auto* wb = reinterpret_cast<const BlockQ8_0*>(w);
  float acc[T] = {};
  for (int64_t b = 0; b < cols / 32; ++b) {
    const float d = half_to_float(wb[b].d);
    for (int t = 0; t < T; ++t) {
      const Q8Row a = q8_row(x + t * x_stride, cols);
      acc[t] += (d * a.scales[8 * b]) * static_cast<float>(dot_i8(wb[b].q, a.values + 32 * b, 32));
    }
  }
  for (int t = 0; t < T; ++t) out[t] = acc[t];
}

template <int T>
void q4_0_tile(const uint8_t* w, const uint8_t* x, size_t x_stride, int64_t cols, float* out) {
  const auto* wb = reinterpret_cast<const BlockQ4_0*>(w);
  float acc[T] = {};
  int8_t values[32];
  for (int64_t b = 0; b < cols / 32; ++b) {
    for (int j = 0; j < 16; ++j) {
      values[j] = static_cast<int8_t>((wb[b].q[j] & 0xF) - 8);
      values[j + 16] = static_cast<int8_t>((wb[b].q[j] >> 4) - 8);
    }
    const float d = half_to_float(wb[b].d);
    for (int t = 0; t < T; ++t) {
      const Q8Row a = q8_row(x + t * x_stride, cols);
      acc[t] += (d * a.scales[8 * b]) * static_cast<float>(dot_i8(values, a.values + 32 * b, 32));
    }
  }
  for (int t = 0; t < T; ++t) out[t] = acc[t];
}

#define SPECULA_PORTABLE
SPECULA_ROWS_KERNEL(SPECULA_PORTABLE, f32_rows, f32_tile)
SPECULA_ROWS_KERNEL(SPECULA_PORTABLE, f16_rows, f16_tile)
SPECULA_ROWS_KERNEL(SPECULA_PORTABLE, bf16_rows, bf16_tile)
SPECULA_ROWS_KERNEL(SPECULA_PORTABLE, q8_0_rows, q8_0_tile)
SPECULA_ROWS_KERNEL(SPECULA_PORTABLE, q4_0_rows, q4_0_tile)
SPECULA_ROWS_KERNEL(SPECULA_PORTABLE, q4_k_rows, q4_k_tile)
SPECULA_ROWS_KERNEL(SPECULA_PORTABLE, q6_k_rows, q6_k_tile)
#undef SPECULA_PORTABLE

}  // namespace

const KernelTable& portable_kernels() {
  static const KernelTable table{f32_rows,  f16_rows,  bf16_rows, q8_0_rows,
                                 q4_0_rows, q4_k_rows, q6_k_rows};
  return table;
}

}  // namespace kernels

std::string_view simd_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::Scalar:
      return "scalar";
    case SimdLevel::Avx2:
      return "avx2";
    case SimdLevel::Avx512:
      return "avx512";
  }
  return "?";
}

std::vector<SimdLevel> supported_simd_levels() {
  std::vector<SimdLevel> levels{SimdLevel::Scalar};
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  if (avx2) levels.push_back(SimdLevel::Avx2);
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")) {
    levels.push_back(SimdLevel::Avx512);
  }
#endif
  return levels;
}

SimdLevel best_simd_level() {
  static const SimdLevel best = supported_simd_levels().back();
  return best;
}

void quantize_activations_q8(const float* x, uint8_t* out, int64_t n) {
  auto* values = reinterpret_cast<int8_t*>(out);
  auto* scales = reinterpret_cast<float*>(out + n);
  auto* offsets = reinterpret_cast<int32_t*>(out + 2 * n);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* v = x + 32 * b;
    int8_t* q = values + 32 * b;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(std::nearbyint(v[i] * id));
    for (int i = 0; i < 8; ++i) {
      scales[8 * b + i] = d;
      offsets[8 * b + i] = -8 * (q[4 * i] + q[4 * i + 1] + q[4 * i + 2] + q[4 * i + 3]);
    }
  }
}

void quantize_activations_q8k(const float* x, BlockQ8K* out, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* v = x + 256 * b;
    float amax = 0.0f;
    for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = d;
    for (int i = 0; i < 256; ++i) out[b].q[i] = static_cast<int8_t>(std::nearbyint(v[i] * id));
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += out[b].q[16 * j + i];
      out[b].sums[j] = static_cast<int16_t>(sum);
    }
  }
}

void matmul(const TensorView& w, const float* x, int n, float* y, ThreadPool& pool,
            SimdLevel level) {
  using namespace kernels;
  const KernelTable& table = level == SimdLevel::Avx512 ? avx512_kernels()
                             : level == SimdLevel::Avx2 ? avx2_kernels()
                                                        : portable_kernels();
  const int64_t cols = w.cols;
  if (cols % type_traits(w.type).block_elements != 0) {
    throw std::invalid_argument("matmul: " + std::to_string(cols) + " columns are not whole " +
                                std::string(type_traits(w.type).name) + " blocks");
  }
  // Activations in the weight type's input format. One buffer per calling thread,
  // reused across calls.
  thread_local std::vector<uint8_t> scratch;
  const uint8_t* xa = reinterpret_cast<const uint8_t*>(x);
  size_t x_stride = static_cast<size_t>(cols) * sizeof(float);
  RowsKernel kernel = nullptr;
  switch (w.type) {
    case TensorType::F32:
      kernel = table.f32;
      break;
    case TensorType::F16:
      kernel = table.f16;
      break;
    case TensorType::BF16:
      kernel = table.bf16;
      break;
    case TensorType::Q8_0:
    case TensorType::Q4_0: {
      kernel = w.type == TensorType::Q8_0 ? table.q8_0 : table.q4_0;
      x_stride = q8_row_bytes(cols);
      scratch.resize(x_stride * static_cast<size_t>(n));
      for (int t = 0; t < n; ++t)
        quantize_activations_q8(x + t * cols, scratch.data() + t * x_stride, cols);
      xa = scratch.data();
      break;
    }
    case TensorType::Q4_K:
    case TensorType::Q6_K: {
      kernel = w.type == TensorType::Q4_K ? table.q4_k : table.q6_k;
      x_stride = static_cast<size_t>(cols / 256) * sizeof(BlockQ8K);
      scratch.resize(x_stride * static_cast<size_t>(n));
      for (int t = 0; t < n; ++t) {
        quantize_activations_q8k(x + t * cols,
                                 reinterpret_cast<BlockQ8K*>(scratch.data() + t * x_stride), cols);
      }
      xa = scratch.data();
      break;
    }
  }
  const size_t w_stride = w.row_size();
  const auto* w0 = static_cast<const uint8_t*>(w.data);
  const int64_t out_stride = w.rows;
  pool.parallel_for(
      w.rows,
      [&](int64_t begin, int64_t end, int) {
        kernel(w0 + static_cast<size_t>(begin) * w_stride, w_stride, end - begin, cols, xa,
               x_stride, n, y + begin, out_stride);
      },
      16);
}

}  // namespace specula
