// The CPU matrix kernels against a float64 reference written here from GGML's block
// layouts, for every weight type and every SIMD level this processor has; and their
// batch invariance: a token's outputs are the same bits whatever else is in the call and
// whatever the thread count.
#include <QtTest>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "compute/cpu_kernels.h"
#include "model/tensor.h"
#include "compute/thread_pool.h"

using namespace specula;

namespace {

struct RandomMatrix {
  TensorType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  TensorView view() const { return {type, cols, rows, bytes.data()}; }
};

uint16_t random_half(std::mt19937& rng, float lo, float hi) {
  return fp32_to_fp16(std::uniform_real_distribution<float>(lo, hi)(rng));
}

void put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
uint16_t get16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Random weights in `type`'s encoding: floats for float types, random codes and scales
// for quantized ones (every bit pattern of the codes is a valid block).
RandomMatrix random_matrix(TensorType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  RandomMatrix m{type, rows, cols, std::vector<uint8_t>(row_bytes(type, cols) * rows)};
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  uint8_t* p = m.bytes.data();
  const int64_t n = rows * cols;
  switch (type) {
    case TensorType::F32:
      for (int64_t i = 0; i < n; ++i) {
        const float v = value(rng);
        std::memcpy(p + 4 * i, &v, 4);
      }
      break;
    case TensorType::F16:
      for (int64_t i = 0; i < n; ++i) put16(p + 2 * i, fp32_to_fp16(value(rng)));
      break;
    case TensorType::BF16:
      for (int64_t i = 0; i < n; ++i) put16(p + 2 * i, fp32_to_bf16(value(rng)));
      break;
    case TensorType::Q8_0:
      for (int64_t b = 0; b < n / 32; ++b, p += 34) {
        put16(p, random_half(rng, 0.001f, 0.01f));
        for (int i = 0; i < 32; ++i) p[2 + i] = static_cast<uint8_t>(byte(rng));
      }
      break;
    case TensorType::Q4_0:
      for (int64_t b = 0; b < n / 32; ++b, p += 18) {
        put16(p, random_half(rng, 0.01f, 0.1f));
        for (int i = 0; i < 16; ++i) p[2 + i] = static_cast<uint8_t>(byte(rng));
      }
      break;
    case TensorType::Q4_K:
      for (int64_t b = 0; b < n / 256; ++b, p += 144) {
        put16(p, random_half(rng, 0.001f, 0.003f));
        put16(p + 2, random_half(rng, 0.001f, 0.003f));
        for (int i = 4; i < 144; ++i) p[i] = static_cast<uint8_t>(byte(rng));
      }
      break;
    case TensorType::Q6_K:
      for (int64_t b = 0; b < n / 256; ++b, p += 210) {
        for (int i = 0; i < 192; ++i) p[i] = static_cast<uint8_t>(byte(rng));
        for (int i = 0; i < 16; ++i)
          p[192 + i] = static_cast<uint8_t>(std::uniform_int_distribution<int>(-64, 64)(rng));
        put16(p + 208, random_half(rng, 0.0005f, 0.002f));
      }
      break;
  }
  return m;
}

// Decodes one row, following GGML's reference dequantizers.
std::vector<double> decode_row(const RandomMatrix& m, int64_t r) {
  const uint8_t* p = m.view().row(r);
  std::vector<double> out(static_cast<size_t>(m.cols));
  switch (m.type) {
    case TensorType::F32:
      for (int64_t i = 0; i < m.cols; ++i) {
        float v;
        std::memcpy(&v, p + 4 * i, 4);
        out[i] = v;
      }
      break;
    case TensorType::F16:
      for (int64_t i = 0; i < m.cols; ++i) out[i] = fp16_to_fp32(get16(p + 2 * i));
      break;
    case TensorType::BF16:
      for (int64_t i = 0; i < m.cols; ++i) out[i] = bf16_to_fp32(get16(p + 2 * i));
      break;
    case TensorType::Q8_0:
      for (int64_t b = 0; b < m.cols / 32; ++b, p += 34) {
        const double d = fp16_to_fp32(get16(p));
        for (int i = 0; i < 32; ++i) out[32 * b + i] = d * static_cast<int8_t>(p[2 + i]);
      }
      break;
    case TensorType::Q4_0:
      for (int64_t b = 0; b < m.cols / 32; ++b, p += 18) {
        const double d = fp16_to_fp32(get16(p));
        for (int i = 0; i < 16; ++i) {
          out[32 * b + i] = d * ((p[2 + i] & 0xF) - 8);
          out[32 * b + i + 16] = d * ((p[2 + i] >> 4) - 8);
        }
      }
      break;
    case TensorType::Q4_K:
      for (int64_t b = 0; b < m.cols / 256; ++b, p += 144) {
        const double d = fp16_to_fp32(get16(p)), dmin = fp16_to_fp32(get16(p + 2));
        const uint8_t* s = p + 4;
        const uint8_t* q = p + 16;
        for (int j = 0; j < 8; ++j) {  // 32-value sub-blocks
          int sc, mn;
          if (j < 4) {
            sc = s[j] & 63;
            mn = s[j + 4] & 63;
          } else {
            sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
            mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
          }
          const uint8_t* qj = q + 32 * (j / 2);
          for (int l = 0; l < 32; ++l) {
            const int nibble = (j % 2 == 0) ? (qj[l] & 0xF) : (qj[l] >> 4);
            out[256 * b + 32 * j + l] = d * sc * nibble - dmin * mn;
          }
        }
      }
      break;
    case TensorType::Q6_K:
      for (int64_t b = 0; b < m.cols / 256; ++b, p += 210) {
        const double d = fp16_to_fp32(get16(p + 208));
        const auto* sc = reinterpret_cast<const int8_t*>(p + 192);
        for (int i = 0; i < 256; ++i) {
          const int half = i / 128, k = i % 128, l = k % 32, quarter = k / 32;
          const uint8_t ql = p[64 * half + l + (quarter % 2) * 32];
          const int low = quarter < 2 ? (ql & 0xF) : (ql >> 4);
          const int high = (p[128 + 32 * half + l] >> (2 * quarter)) & 3;
          out[256 * b + i] = d * sc[8 * half + 2 * quarter + l / 16] * ((low | (high << 4)) - 32);
        }
      }
      break;
  }
  return out;
}

bool quantized(TensorType type) {
  return type != TensorType::F32 && type != TensorType::F16 && type != TensorType::BF16;
}

// The activations the kernel multiplies: x itself, or x after 8-bit quantization.
std::vector<double> effective_activations(TensorType type, const std::vector<float>& x) {
  std::vector<double> out(x.begin(), x.end());
  if (type == TensorType::Q8_0 || type == TensorType::Q4_0) {
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> row(q8_row_bytes(n));
    quantize_activations_q8(x.data(), row.data(), n);
    const Q8Row a = q8_row(row.data(), n);
    for (size_t i = 0; i < x.size(); ++i) out[i] = double(a.scales[i / 4]) * a.values[i];
  } else if (type == TensorType::Q4_K || type == TensorType::Q6_K) {
    std::vector<BlockQ8K> blocks(x.size() / 256);
    quantize_activations_q8k(x.data(), blocks.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      out[i] = double(blocks[i / 256].d) * blocks[i / 256].q[i % 256];
    }
  }
  return out;
}

const TensorType kAllTypes[] = {TensorType::F32,  TensorType::F16,  TensorType::BF16,
                                TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K,
                                TensorType::Q6_K};

int64_t test_cols(TensorType type) {
  // Odd widths where the type allows, to exercise vector tails.
  if (type == TensorType::Q4_K || type == TensorType::Q6_K) return 512;
  if (quantized(type)) return 160;
  return 136 + 7;
}

}  // namespace

class TestCpuKernels : public QObject {
  Q_OBJECT

 private slots:
  // Each output equals the float64 dot product of the decoded weight row with the
  // activations the kernel sees (quantized ones for quantized weights), up to float32
  // rounding: |error| <= 1e-5 * sum |w| |x|.
  void matchesFloat64Reference() {
    ThreadPool pool(2);
    std::mt19937 rng(7);
    for (SimdLevel level : supported_simd_levels()) {
      for (TensorType type : kAllTypes) {
        const int64_t rows = 37, cols = test_cols(type);
        const int n = 6;
        const RandomMatrix w = random_matrix(type, rows, cols, rng);
        std::vector<float> x(static_cast<size_t>(n * cols));
        for (float& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
        std::vector<float> y(static_cast<size_t>(n * rows));
        matmul(w.view(), x.data(), n, y.data(), pool, level);
        for (int t = 0; t < n; ++t) {
          const std::vector<float> xt(x.begin() + t * cols, x.begin() + (t + 1) * cols);
          const std::vector<double> a = effective_activations(type, xt);
          for (int64_t r = 0; r < rows; ++r) {
            const std::vector<double> wr = decode_row(w, r);
            double exact = 0.0, magnitude = 0.0;
            for (int64_t c = 0; c < cols; ++c) {
              exact += wr[c] * a[c];
              magnitude += std::fabs(wr[c] * a[c]);
            }
            const double error = std::fabs(y[t * rows + r] - exact);
            if (!(error <= 1e-5 * magnitude)) {
              QFAIL(qPrintable(QStringLiteral("%1 %2 token %3 row %4: %5 vs %6")
                                   .arg(QString::fromLatin1(simd_name(level).data(),
                                                            int(simd_name(level).size())))
                                   .arg(QString::fromLatin1(type_traits(type).name.data(),
                                                            int(type_traits(type).name.size())))
                                   .arg(t)
                                   .arg(r)
                                   .arg(y[t * rows + r])
                                   .arg(exact)));
            }
          }
        }
      }
    }
  }

  // Quantizing activations to 8 bits costs at most half a step per value.
  void activationQuantizationIsWithinHalfAStep() {
    std::mt19937 rng(3);
    std::vector<float> x(512);
    for (float& v : x) v = std::normal_distribution<float>(0.0f, 2.0f)(rng);
    x[5] = 0.0f;
    const std::vector<double> q8 = effective_activations(TensorType::Q8_0, x);
    const std::vector<double> q8k = effective_activations(TensorType::Q6_K, x);
    for (size_t i = 0; i < x.size(); ++i) {
      float amax32 = 0.0f, amax256 = 0.0f;
      for (size_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j)
        amax32 = std::max(amax32, std::fabs(x[j]));
      for (size_t j = i / 256 * 256; j < i / 256 * 256 + 256; ++j)
        amax256 = std::max(amax256, std::fabs(x[j]));
      QVERIFY(std::fabs(q8[i] - x[i]) <= 0.5 * amax32 / 127 * (1 + 1e-6));
      QVERIFY(std::fabs(q8k[i] - x[i]) <= 0.5 * amax256 / 127 * (1 + 1e-6));
    }
  }

  // A token's outputs are the same bits alone, within 1..13 tokens, and on 1 or 2 threads.
  void batchInvariant() {
    ThreadPool one(1), two(2);
    std::mt19937 rng(11);
    for (SimdLevel level : supported_simd_levels()) {
      for (TensorType type : kAllTypes) {
        const int64_t rows = 45, cols = test_cols(type);
        const int n = 13;
        const RandomMatrix w = random_matrix(type, rows, cols, rng);
        std::vector<float> x(static_cast<size_t>(n * cols));
        for (float& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
        std::vector<float> all(static_cast<size_t>(n * rows));
        matmul(w.view(), x.data(), n, all.data(), two, level);
        for (int count : {1, 2, 3, 5, 8}) {
          for (int start = 0; start + count <= n; start += count) {
            std::vector<float> part(static_cast<size_t>(count * rows));
            matmul(w.view(), x.data() + start * cols, count, part.data(), count % 2 ? one : two,
                   level);
            QVERIFY2(std::memcmp(part.data(), all.data() + start * rows, part.size() * 4) == 0,
                     qPrintable(QStringLiteral("type %1, %2 tokens from %3")
                                    .arg(int(type))
                                    .arg(count)
                                    .arg(start)));
          }
        }
      }
    }
  }

  void rejectsPartialBlocks() {
    ThreadPool pool(1);
    std::vector<uint8_t> bytes(34 * 4);
    const TensorView w{TensorType::Q8_0, 48, 2, bytes.data()};
    std::vector<float> x(48), y(2);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             matmul(w, x.data(), 1, y.data(), pool, SimdLevel::Scalar));
  }
};

QTEST_GUILESS_MAIN(TestCpuKernels)
#include "test_cpu_kernels.moc"
