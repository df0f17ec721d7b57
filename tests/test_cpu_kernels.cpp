// The CPU kernels against float64 references written here (GGML's block layouts for the
// matrix kernels, softmax attention over a paged cache), for every weight type, every
// token count from 1 to 17 and every SIMD level this processor runs (the 16-lane AVX-512
// algorithms too, emulated on AVX2); and their batch invariance: a token's outputs are the
// same bits whatever else is in the call, however the rows are split and on any thread count.
#include <QtTest>
#include <atomic>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "compute/cpu_kernels.h"
#include "model/tensor.h"
#include "common/thread_pool.h"

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
    case TensorType::Q4_1:
      for (int64_t b = 0; b < n / 32; ++b, p += 20) {
        put16(p, random_half(rng, 0.01f, 0.1f));
        put16(p + 2, random_half(rng, -0.8f, 0.1f));
        for (int i = 0; i < 16; ++i) p[4 + i] = static_cast<uint8_t>(byte(rng));
      }
      break;
    case TensorType::Q5_0:
      for (int64_t b = 0; b < n / 32; ++b, p += 22) {
        put16(p, random_half(rng, 0.005f, 0.05f));
        for (int i = 0; i < 20; ++i) p[2 + i] = static_cast<uint8_t>(byte(rng));
      }
      break;
    case TensorType::Q5_1:
      for (int64_t b = 0; b < n / 32; ++b, p += 24) {
        put16(p, random_half(rng, 0.005f, 0.05f));
        put16(p + 2, random_half(rng, -0.8f, 0.1f));
        for (int i = 0; i < 20; ++i) p[4 + i] = static_cast<uint8_t>(byte(rng));
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
          p[192 + i] = static_cast<uint8_t>(std::uniform_int_distribution<int>(-128, 127)(rng));
        put16(p + 208, random_half(rng, 0.0005f, 0.002f));
      }
      break;
    case TensorType::Q5_K:
      for (int64_t b = 0; b < n / 256; ++b, p += 176) {
        put16(p, random_half(rng, 0.001f, 0.003f));
        put16(p + 2, random_half(rng, 0.001f, 0.003f));
        for (int i = 4; i < 176; ++i) p[i] = static_cast<uint8_t>(byte(rng));
      }
      break;
    case TensorType::Q2_K:
      for (int64_t b = 0; b < n / 256; ++b, p += 84) {
        for (int i = 0; i < 80; ++i) p[i] = static_cast<uint8_t>(byte(rng));
        put16(p + 80, random_half(rng, 0.002f, 0.02f));
        put16(p + 82, random_half(rng, 0.002f, 0.02f));
      }
      break;
    case TensorType::Q3_K:
      for (int64_t b = 0; b < n / 256; ++b, p += 110) {
        for (int i = 0; i < 108; ++i) p[i] = static_cast<uint8_t>(byte(rng));
        put16(p + 108, random_half(rng, 0.0005f, 0.005f));
      }
      break;
    case TensorType::IQ4_XS:
      for (int64_t b = 0; b < n / 256; ++b, p += 136) {
        put16(p, random_half(rng, 0.0002f, 0.001f));
        for (int i = 2; i < 136; ++i) p[i] = static_cast<uint8_t>(byte(rng));
      }
      break;
    case TensorType::IQ4_NL:
      for (int64_t b = 0; b < n / 32; ++b, p += 18) {
        put16(p, random_half(rng, 0.0002f, 0.001f));
        for (int i = 0; i < 16; ++i) p[2 + i] = static_cast<uint8_t>(byte(rng));
      }
      break;
    case TensorType::MXFP4:  // half scales 2^-28 .. 2^-8: some below f16's range, which once made the matrix f32
      for (int64_t b = 0; b < n / 32; ++b, p += 17) {
        p[0] = static_cast<uint8_t>(std::uniform_int_distribution<int>(100, 120)(rng));
        for (int i = 0; i < 16; ++i) p[1 + i] = static_cast<uint8_t>(byte(rng));
      }
      break;
    default:  // the types the loader converts into these (kAllTypes has none of them)
      qFatal("no random %s matrix", type_traits(type).name.data());
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
    case TensorType::Q4_1:  // q · d + m, q the nibbles as Q4_0's
      for (int64_t b = 0; b < m.cols / 32; ++b, p += 20) {
        const double d = fp16_to_fp32(get16(p)), mn = fp16_to_fp32(get16(p + 2));
        for (int i = 0; i < 16; ++i) {
          out[32 * b + i] = d * (p[4 + i] & 0xF) + mn;
          out[32 * b + i + 16] = d * (p[4 + i] >> 4) + mn;
        }
      }
      break;
    case TensorType::Q5_0:  // (q - 16) · d, q the nibbles as Q4_0's and the fifth bit of value i in bit i of qh
      for (int64_t b = 0; b < m.cols / 32; ++b, p += 22) {
        const double d = fp16_to_fp32(get16(p));
        const uint32_t qh = p[2] | p[3] << 8 | p[4] << 16 | static_cast<uint32_t>(p[5]) << 24;
        for (int i = 0; i < 16; ++i) {
          out[32 * b + i] = d * (static_cast<int>((p[6 + i] & 0xF) | ((qh >> i) & 1) << 4) - 16);
          out[32 * b + i + 16] = d * (static_cast<int>((p[6 + i] >> 4) | ((qh >> (i + 16)) & 1) << 4) - 16);
        }
      }
      break;
    case TensorType::Q5_1:  // as Q4_1, the fifth bit of value i in bit i of the 32-bit qh
      for (int64_t b = 0; b < m.cols / 32; ++b, p += 24) {
        const double d = fp16_to_fp32(get16(p)), mn = fp16_to_fp32(get16(p + 2));
        const uint32_t qh = p[4] | p[5] << 8 | p[6] << 16 | static_cast<uint32_t>(p[7]) << 24;
        for (int i = 0; i < 16; ++i) {
          out[32 * b + i] = d * ((p[8 + i] & 0xF) | ((qh >> i) & 1) << 4) + mn;
          out[32 * b + i + 16] = d * ((p[8 + i] >> 4) | ((qh >> (i + 16)) & 1) << 4) + mn;
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
    case TensorType::Q5_K:  // Q4_K's scales and nibbles, plus bit j of qh[l] for value l of sub-block j
      for (int64_t b = 0; b < m.cols / 256; ++b, p += 176) {
        const double d = fp16_to_fp32(get16(p)), dmin = fp16_to_fp32(get16(p + 2));
        const uint8_t* s = p + 4;
        const uint8_t* qh = p + 16;
        const uint8_t* q = p + 48;
        for (int j = 0; j < 8; ++j) {
          int sc, mn;
          if (j < 4) {
            sc = s[j] & 63;
            mn = s[j + 4] & 63;
          } else {
            sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
            mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
          }
          for (int l = 0; l < 32; ++l) {
            const int nibble = (j % 2 == 0) ? (q[32 * (j / 2) + l] & 0xF) : (q[32 * (j / 2) + l] >> 4);
            out[256 * b + 32 * j + l] = d * sc * (nibble + 16 * ((qh[l] >> j) & 1)) - dmin * mn;
          }
        }
      }
      break;
    case TensorType::Q2_K:  // per 16 values d · (scale & 15) · q - dmin · (scale >> 4), q 2 bits of qs
      for (int64_t b = 0; b < m.cols / 256; ++b, p += 84) {
        const double d = fp16_to_fp32(get16(p + 80)), dmin = fp16_to_fp32(get16(p + 82));
        for (int i = 0; i < 256; ++i) {
          const int half = i / 128, shift = (i % 128) / 32, l = i % 32;
          const int q = (p[16 + 32 * half + l] >> (2 * shift)) & 3;
          const int sc = p[i / 16];
          out[256 * b + i] = d * (sc & 0xF) * q - dmin * (sc >> 4);
        }
      }
      break;
    case TensorType::Q3_K:  // per 16 values d · (6-bit scale - 32) · (2 bits of qs + 4 · hmask bit - 4)
      for (int64_t b = 0; b < m.cols / 256; ++b, p += 110) {
        const double d = fp16_to_fp32(get16(p + 108));
        const uint8_t* hmask = p;
        const uint8_t* qs = p + 32;
        const uint8_t* sc = p + 96;  // low nibbles in bytes 0..7 (sub-blocks j and j + 8), top 2 bits in 8..11
        for (int i = 0; i < 256; ++i) {
          const int j = i / 16;
          const int scale = ((sc[j % 8] >> (4 * (j / 8))) & 0xF) | ((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4;
          const int half = i / 128, shift = (i % 128) / 32, l = i % 32;
          const int low = (qs[32 * half + l] >> (2 * shift)) & 3;
          const int high = (hmask[l] >> (4 * half + shift)) & 1;
          out[256 * b + i] = d * (scale - 32) * (low + 4 * high - 4);
        }
      }
      break;
    case TensorType::IQ4_XS: {  // per 32 values d · (6-bit scale - 32) · level[nibble]
      static const int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
      for (int64_t b = 0; b < m.cols / 256; ++b, p += 136) {
        const double d = fp16_to_fp32(get16(p));
        const int high = get16(p + 2);
        for (int j = 0; j < 8; ++j) {
          const int sc = ((p[4 + j / 2] >> (4 * (j % 2))) & 0xF) | (((high >> (2 * j)) & 3) << 4);
          for (int l = 0; l < 16; ++l) {
            const uint8_t q = p[8 + 16 * j + l];
            out[256 * b + 32 * j + l] = d * (sc - 32) * kLevels[q & 0xF];
            out[256 * b + 32 * j + l + 16] = d * (sc - 32) * kLevels[q >> 4];
          }
        }
      }
      break;
    }
    case TensorType::IQ4_NL:  // per 32 values d · level[nibble]
      for (int64_t b = 0; b < m.cols / 32; ++b, p += 18) {
        static const int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
        const double d = fp16_to_fp32(get16(p));
        for (int l = 0; l < 16; ++l) {
          out[32 * b + l] = d * kLevels[p[2 + l] & 0xF];
          out[32 * b + l + 16] = d * kLevels[p[2 + l] >> 4];
        }
      }
      break;
    case TensorType::MXFP4:  // per 32 values 2^(e - 127) · E2M1[nibble] (OCP MX: bit 3 the sign)
      for (int64_t b = 0; b < m.cols / 32; ++b, p += 17) {
        static const double kE2M1[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
        const double scale = std::ldexp(1.0, p[0] - 127);
        const auto value = [&](int q) { return (q & 8 ? -1.0 : 1.0) * kE2M1[q & 7] * scale; };
        for (int l = 0; l < 16; ++l) {
          out[32 * b + l] = value(p[1 + l] & 0xF);
          out[32 * b + l + 16] = value(p[1 + l] >> 4);
        }
      }
      break;
    default:
      qFatal("no reference decoder for %s", type_traits(m.type).name.data());
  }
  return out;
}

bool quantized(TensorType type) {
  return type != TensorType::F32 && type != TensorType::F16 && type != TensorType::BF16;
}

// The activations the kernel multiplies: x itself, or x after 8-bit quantization.
std::vector<double> effective_activations(TensorType type, const std::vector<float>& x) {
  std::vector<double> out(x.begin(), x.end());
  const int64_t n = static_cast<int64_t>(x.size());
  if (type == TensorType::Q8_0 || type == TensorType::Q4_0 || type == TensorType::Q4_1 || type == TensorType::Q5_0 ||
      type == TensorType::Q5_1 || type == TensorType::Q5_K || type == TensorType::IQ4_XS || type == TensorType::IQ4_NL ||
      type == TensorType::MXFP4) {
    std::vector<uint8_t> row(q8_row_bytes(n));
    quantize_activations_q8(x.data(), row.data(), n, 0);
    const Q8Row a = q8_row(row.data(), n);
    for (size_t i = 0; i < x.size(); ++i) out[i] = double(a.scales[i / 32]) * a.values[i];
  } else if (type == TensorType::Q4_K || type == TensorType::Q6_K || type == TensorType::Q2_K ||
             type == TensorType::Q3_K) {
    std::vector<BlockQ8K> blocks(x.size() / 256);
    quantize_activations_q8k(x.data(), blocks.data(), n);
    for (size_t i = 0; i < x.size(); ++i) {
      out[i] = double(blocks[i / 256].d) * blocks[i / 256].q[i % 256];
    }
  }
  return out;
}

// The types with a kernel of their own (the others the loader converts into one of these).
const TensorType kAllTypes[] = {TensorType::F32,  TensorType::F16,  TensorType::BF16,
                                TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_1,
                                TensorType::Q5_0, TensorType::Q5_1, TensorType::Q2_K, TensorType::Q3_K,
                                TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::IQ4_XS,
                                TensorType::IQ4_NL, TensorType::MXFP4};

int64_t test_cols(TensorType type) {
  // Odd widths where the type allows, to exercise vector tails.
  if (type_traits(type).block_elements == 256) return 512;
  if (quantized(type)) return 160;
  return 136 + 7;
}

QString label(SimdLevel level, TensorType type) {
  return QStringLiteral("%1 %2").arg(QString::fromLatin1(simd_name(level).data(), int(simd_name(level).size())),
                                     QString::fromLatin1(type_traits(type).name.data(),
                                                         int(type_traits(type).name.size())));
}

std::vector<float> normal_values(std::mt19937& rng, size_t n, float sigma = 1.0f) {
  std::vector<float> x(n);
  for (float& v : x) v = std::normal_distribution<float>(0.0f, sigma)(rng);
  return x;
}

constexpr int kMaxTokens = 17;  // token counts 1..17 cover every tile of every level

// The float64 attention of one query head over positions 0..length-1 of a paged cache.
std::vector<double> reference_attention(const AttentionArgs& a, int head) {
  std::vector<double> scores(static_cast<size_t>(a.length)), out(static_cast<size_t>(a.head_dim));
  const auto row = [&](const float* base, int p) {
    const int slot = a.block_table[p / a.block_size] * a.block_size + p % a.block_size;
    return base + static_cast<size_t>(slot) * a.kv_dim + a.kv_offset;
  };
  double max_score = -INFINITY;
  for (int p = 0; p < a.length; ++p) {
    double s = 0.0;
    for (int d = 0; d < a.head_dim; ++d) s += double(a.q[head * a.head_dim + d]) * row(a.keys, p)[d];
    scores[p] = s * a.scale;
    max_score = std::max(max_score, scores[p]);
  }
  double sum = 0.0;
  for (double& s : scores) sum += (s = std::exp(s - max_score));
  for (int p = 0; p < a.length; ++p) {
    for (int d = 0; d < a.head_dim; ++d) out[d] += scores[p] / sum * row(a.values, p)[d];
  }
  return out;
}

// A paged cache of random keys and values with `heads_kv` KV heads and a shuffled block table.
struct RandomCache {
  int head_dim, kv_heads, block_size, blocks;
  std::vector<float> keys, values;
  std::vector<int32_t> table;

  RandomCache(std::mt19937& rng, int head_dim_, int kv_heads_, int block_size_, int positions)
      : head_dim(head_dim_), kv_heads(kv_heads_), block_size(block_size_),
        blocks((positions + block_size_ - 1) / block_size_ + 3) {
    const size_t floats = static_cast<size_t>(blocks) * block_size * head_dim * kv_heads;
    keys = normal_values(rng, floats);
    values = normal_values(rng, floats);
    table.resize(static_cast<size_t>(blocks));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
  }
  AttentionArgs args(const float* q, int kv_head, int heads, int length) const {
    AttentionArgs a;
    a.q = q;
    a.keys = keys.data();
    a.values = values.data();
    a.kv_dim = head_dim * kv_heads;
    a.kv_offset = kv_head * head_dim;
    a.block_table = table.data();
    a.block_size = block_size;
    a.length = length;
    a.heads = heads;
    a.head_dim = head_dim;
    a.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    return a;
  }
};

// `m`'s panels with the other choice of prefetching in one-token tiles (packing makes the
// one this processor runs faster).
PackedMatrix with_other_prefetch(const PackedMatrix& m) {
  PackedMatrix other = m;
  other.one_token_prefetch = !m.one_token_prefetch;
  return other;
}

}  // namespace

class TestCpuKernels : public QObject {
  Q_OBJECT

 private slots:
  // Each output equals the float64 dot product of the decoded weight row with the
  // activations the kernel sees (quantized ones for quantized weights), up to float32
  // rounding: |error| <= 1e-5 * sum |w| |x|. 37 rows leave partial panels of 4 (float
  // types), 8 and 16 rows (quantized); every token count from 1 to 17 runs, with one-token
  // tiles prefetching their weights and without.
  void matchesFloat64Reference() {
    ThreadPool pool(2);
    std::mt19937 rng(7);
    for (SimdLevel level : testable_simd_levels()) {
      for (TensorType type : kAllTypes) {
        const int64_t rows = 37, cols = test_cols(type);
        const RandomMatrix w = random_matrix(type, rows, cols, rng);
        const PackedMatrix packed = pack_matrix(w.view(), level, pool);
        const std::vector<float> x = normal_values(rng, static_cast<size_t>(kMaxTokens * cols));
        std::vector<std::vector<double>> exact(kMaxTokens), magnitude(kMaxTokens);
        for (int t = 0; t < kMaxTokens; ++t) {
          const std::vector<float> xt(x.begin() + t * cols, x.begin() + (t + 1) * cols);
          const std::vector<double> a = effective_activations(type, xt);
          for (int64_t r = 0; r < rows; ++r) {
            const std::vector<double> wr = decode_row(w, r);
            if (t == 0) {  // the reference decoder agrees with dequantize_row (checked against gguf in test_quant)
              std::vector<float> dq(static_cast<size_t>(cols));
              dequantize_row(type, w.view().row(r), dq.data(), cols);
              for (int64_t c = 0; c < cols; ++c) {
                QVERIFY2(std::fabs(dq[c] - wr[c]) <= 1e-6 * std::fabs(wr[c]) + 1e-30,
                         qPrintable(QStringLiteral("%1 row %2 value %3: %4 vs %5").arg(label(level, type)).arg(r).arg(c).arg(dq[c]).arg(wr[c])));
              }
            }
            double e = 0.0, m = 0.0;
            for (int64_t c = 0; c < cols; ++c) e += wr[c] * a[c], m += std::fabs(wr[c] * a[c]);
            exact[t].push_back(e);
            magnitude[t].push_back(m);
          }
        }
        const PackedMatrix other_prefetch = with_other_prefetch(packed);
        for (int run = 0; run < 2 * kMaxTokens; ++run) {
          const int n = run / 2 + 1;
          const PackedMatrix& m = run % 2 ? other_prefetch : packed;
          std::vector<float> y(static_cast<size_t>(n * rows));
          matmul(m, x.data(), n, y.data(), pool);
          for (int t = 0; t < n; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const double error = std::fabs(y[t * rows + r] - exact[t][r]);
              if (!(error <= 1e-5 * magnitude[t][r])) {
                QFAIL(qPrintable(QStringLiteral("%1, %2 tokens (one-token prefetch %7), token %3 row %4: %5 vs %6")
                                     .arg(label(level, type))
                                     .arg(n)
                                     .arg(t)
                                     .arg(r)
                                     .arg(y[t * rows + r])
                                     .arg(exact[t][r])
                                     .arg(m.one_token_prefetch)));
              }
            }
          }
        }
      }
    }
  }

  // Every MXFP4 exponent byte 0..255 (scales 2^-127 .. 2^128, the smallest subnormal in
  // GGML's f32 half scale) reaches the product exactly: one row per exponent, against
  // activations scaled by the inverse power so each product stays a normal float.
  void mxfp4EveryExponent() {
    ThreadPool pool(1);
    std::mt19937 rng(11);
    const int64_t cols = 64;
    for (SimdLevel level : testable_simd_levels()) {
      for (int e = 0; e < 256; ++e) {
        RandomMatrix w = random_matrix(TensorType::MXFP4, 1, cols, rng);
        w.bytes[0] = w.bytes[17] = static_cast<uint8_t>(e);
        const PackedMatrix packed = pack_matrix(w.view(), level, pool);
        std::vector<float> x = normal_values(rng, static_cast<size_t>(cols));
        for (float& v : x) v = std::ldexp(v, std::clamp(127 - e, -100, 100));
        const std::vector<double> a = effective_activations(TensorType::MXFP4, x);
        const std::vector<double> wr = decode_row(w, 0);
        double exact = 0.0, magnitude = 0.0;
        for (int64_t c = 0; c < cols; ++c) exact += wr[c] * a[c], magnitude += std::fabs(wr[c] * a[c]);
        float y = 0.0f;
        matmul(packed, x.data(), 1, &y, pool);
        QVERIFY2(std::fabs(y - exact) <= 1e-5 * magnitude,
                 qPrintable(QStringLiteral("%1 e = %2: %3 vs %4").arg(label(level, TensorType::MXFP4)).arg(e).arg(y).arg(exact)));
      }
    }
  }

  // Quantizing activations to 8 bits costs at most half a step per value.
  void activationQuantizationIsWithinHalfAStep() {
    std::mt19937 rng(3);
    std::vector<float> x = normal_values(rng, 512, 2.0f);
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

  // Every level quantizes activations to the same bits, and the sums and offsets are
  // those of the values.
  void activationQuantizationIsTheSameOnEveryLevel() {
    std::mt19937 rng(4);
    const int64_t n = 1024;
    std::vector<float> x = normal_values(rng, n, 3.0f);
    std::fill(x.begin() + 256, x.begin() + 288, 0.0f);  // an all-zero block
    std::vector<uint8_t> q8(q8_row_bytes(n)), q8_reference(q8_row_bytes(n));
    std::vector<BlockQ8K> q8k(n / 256), q8k_reference(n / 256);
    quantize_activations_q8(x.data(), q8_reference.data(), n, 8, SimdLevel::Portable);
    quantize_activations_q8k(x.data(), q8k_reference.data(), n, SimdLevel::Portable);
    const Q8Row a = q8_row(q8_reference.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      int sum = 0;
      for (int i = 0; i < 32; ++i) sum += a.values[32 * b + i];
      QCOMPARE(a.offsets[b], -8 * sum);
    }
    for (const BlockQ8K& block : q8k_reference) {
      for (int j = 0; j < 16; ++j) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += block.q[16 * j + i];
        QCOMPARE(int(block.sums16[j]), sum);
        if (j % 2 == 1) QCOMPARE(int(block.sums32[j / 2]), block.sums16[j - 1] + sum);
      }
    }
    for (SimdLevel level : testable_simd_levels()) {
      quantize_activations_q8(x.data(), q8.data(), n, 8, level);
      quantize_activations_q8k(x.data(), q8k.data(), n, level);
      QVERIFY2(q8 == q8_reference, simd_name(level).data());
      QVERIFY2(std::memcmp(q8k.data(), q8k_reference.data(), q8k.size() * sizeof(BlockQ8K)) == 0,
               simd_name(level).data());
    }
  }

  // The quantized kernels' products are exact integers, each block's summed into one 32-bit
  // lane per row and then scaled in the same float operations on every vector level, so
  // AVX2's products (maddubs, 16-bit sums) and the VNNI levels' (dpbusd into 32 bits, the
  // K-quants' sub-blocks multiplied by their scales) give the same bits. (The portable level
  // multiplies and adds without fusing: other roundings.)
  void quantizedOutputsAreTheSameOnEveryVectorLevel() {
    std::vector<SimdLevel> levels = testable_simd_levels();
    std::erase(levels, SimdLevel::Portable);
    if (levels.size() < 2) QSKIP("one vector level on this processor: nothing to compare");
    ThreadPool pool(2);
    std::mt19937 rng(13);
    for (TensorType type : {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K, TensorType::Q3_K}) {
      const int64_t rows = 37, cols = test_cols(type);
      const RandomMatrix w = random_matrix(type, rows, cols, rng);
      const std::vector<float> x = normal_values(rng, static_cast<size_t>(kMaxTokens * cols));
      for (const int n : {1, 3, kMaxTokens}) {
        std::vector<float> first;
        for (SimdLevel level : levels) {
          const PackedMatrix packed = pack_matrix(w.view(), level, pool);
          std::vector<float> y(static_cast<size_t>(n * rows));
          matmul(packed, x.data(), n, y.data(), pool);
          if (first.empty()) {
            first = y;
            continue;
          }
          QVERIFY2(std::memcmp(y.data(), first.data(), y.size() * 4) == 0,
                   qPrintable(QStringLiteral("%1 against %2, %3 tokens")
                                  .arg(label(level, type))
                                  .arg(label(levels.front(), type))
                                  .arg(n)));
        }
      }
    }
  }

  // A token's outputs are the same bits alone, within 1..17 tokens from any start, and on
  // 1 or 2 threads (which split the rows differently; the two-thread pool splits even the
  // jobs a forward would run on the calling thread), whether one-token tiles prefetch their
  // weights or not (the processor decides which in packing: both run here).
  void batchInvariant() {
    ThreadPool one(1), two(2, 0);
    std::mt19937 rng(11);
    for (SimdLevel level : testable_simd_levels()) {
      for (TensorType type : kAllTypes) {
        const int64_t rows = 75, cols = test_cols(type);
        const RandomMatrix w = random_matrix(type, rows, cols, rng);
        const PackedMatrix packed = pack_matrix(w.view(), level, two);
        const int n = kMaxTokens;
        const std::vector<float> x = normal_values(rng, static_cast<size_t>(n * cols));
        std::vector<float> all(static_cast<size_t>(n * rows));
        matmul(packed, x.data(), n, all.data(), two);
        const PackedMatrix other_prefetch = with_other_prefetch(packed);
        for (const PackedMatrix* m : {&packed, &other_prefetch}) {
          for (int count = 1; count <= n; ++count) {
            for (int start = 0; start + count <= n; start += std::max(1, count / 2)) {
              std::vector<float> part(static_cast<size_t>(count * rows));
              matmul(*m, x.data() + start * cols, count, part.data(), count % 2 ? one : two);
              QVERIFY2(std::memcmp(part.data(), all.data() + start * rows, part.size() * 4) == 0,
                       qPrintable(QStringLiteral("%1, %2 tokens from %3, one-token prefetch %4")
                                      .arg(label(level, type))
                                      .arg(count)
                                      .arg(start)
                                      .arg(m->one_token_prefetch)));
            }
          }
        }
      }
    }
  }

  // A group of products of one input (a layer's q, k, v; its gate and up) gives each matrix
  // the bits matmul() gives it alone, whatever types the group mixes (one input format or
  // several, float panels and quantized ones), on 1 or 2 threads (the two-thread pool splits
  // even a small job, so panels of every matrix run on the worker too); a group whose
  // column counts differ is refused.
  void sharedInputGroupsGiveEachMatrixItsOwnBits() {
    ThreadPool one(1), two(2, 0);
    std::mt19937 rng(17);
    const std::vector<std::vector<TensorType>> groups = {
        {TensorType::Q4_K, TensorType::Q4_K, TensorType::Q6_K},  // Q4_K_M's q, k, v
        {TensorType::Q8_0, TensorType::Q4_0, TensorType::F16},
        {TensorType::Q4_1, TensorType::Q5_1, TensorType::Q8_0},  // Q4_1 files' q, k, v beside a Q8_0
        {TensorType::Q5_K, TensorType::Q5_K, TensorType::Q6_K},  // Q5_K_M's q, k, v
        {TensorType::Q5_0, TensorType::Q4_0, TensorType::Q5_1},  // three offsets: -16, -8 and +1 times Σqx
        {TensorType::IQ4_XS, TensorType::Q4_K},
        {TensorType::Q2_K, TensorType::Q4_K},  // Q2_K files' layers
        {TensorType::Q3_K, TensorType::Q3_K, TensorType::Q5_K},  // Q3_K_M's q, k, v (v in Q4_K or Q5_K)
        {TensorType::F32, TensorType::BF16},
        {TensorType::Q6_K},
    };
    for (SimdLevel level : testable_simd_levels()) {
      for (const std::vector<TensorType>& types : groups) {
        const int64_t cols = 256;
        std::vector<RandomMatrix> weights;
        std::vector<PackedMatrix> packed;
        for (size_t i = 0; i < types.size(); ++i) {
          weights.push_back(random_matrix(types[i], 19 + 24 * static_cast<int64_t>(i), cols, rng));
        }
        for (const RandomMatrix& w : weights) packed.push_back(pack_matrix(w.view(), level, two));
        for (const int n : {1, 4, kMaxTokens}) {
          const std::vector<float> x = normal_values(rng, static_cast<size_t>(n * cols));
          for (ThreadPool* pool : {&one, &two}) {
            std::vector<std::vector<float>> alone(packed.size()), grouped(packed.size());
            std::vector<MatrixProduct> products;
            for (size_t i = 0; i < packed.size(); ++i) {
              alone[i].resize(static_cast<size_t>(n * packed[i].rows));
              grouped[i].assign(alone[i].size(), std::nanf(""));
              matmul(packed[i], x.data(), n, alone[i].data(), *pool);
              products.push_back({&packed[i], grouped[i].data()});
            }
            matmul_shared_input(products, x.data(), n, *pool);
            for (size_t i = 0; i < packed.size(); ++i) {
              QVERIFY2(std::memcmp(grouped[i].data(), alone[i].data(), alone[i].size() * 4) == 0,
                       qPrintable(QStringLiteral("%1, matrix %2 of %3, %4 tokens, %5 threads")
                                      .arg(label(level, types[i]))
                                      .arg(i)
                                      .arg(packed.size())
                                      .arg(n)
                                      .arg(pool->size())));
            }
          }
        }
      }
      const RandomMatrix narrow = random_matrix(TensorType::F32, 8, 32, rng);
      const RandomMatrix wide = random_matrix(TensorType::F32, 8, 64, rng);
      const PackedMatrix a = pack_matrix(narrow.view(), level, one), b = pack_matrix(wide.view(), level, one);
      std::vector<float> x(64), ya(8), yb(8);
      const MatrixProduct mixed[] = {{&a, ya.data()}, {&b, yb.data()}};
      QVERIFY_THROWS_EXCEPTION(std::invalid_argument, matmul_shared_input(mixed, x.data(), 1, one));
    }
  }

  // Attention equals the float64 softmax attention within float rounding, for group sizes
  // 1..8, head sizes with and without a partial vector, and lengths across block edges.
  void attentionMatchesFloat64Reference() {
    std::mt19937 rng(13);
    for (SimdLevel level : testable_simd_levels()) {
      for (int head_dim : {8, 12, 64}) {
        for (int heads : {1, 3, 8}) {
          const RandomCache cache(rng, head_dim, 2, 4, 41);
          const std::vector<float> q = normal_values(rng, static_cast<size_t>(heads * head_dim));
          for (int length : {1, 2, 7, 8, 9, 41}) {
            std::vector<float> scores(static_cast<size_t>(heads * length));
            std::vector<float> out(static_cast<size_t>(heads * head_dim));
            std::vector<const float*> rows(static_cast<size_t>(2 * length));
            AttentionArgs a = cache.args(q.data(), 1, heads, length);
            a.scores = scores.data();
            a.rows = rows.data();
            a.out = out.data();
            attend(a, level);
            for (int h = 0; h < heads; ++h) {
              const std::vector<double> exact = reference_attention(a, h);
              for (int d = 0; d < head_dim; ++d) {
                const double error = std::fabs(out[h * head_dim + d] - exact[d]);
                QVERIFY2(error <= 1e-5 * (1.0 + std::fabs(exact[d])),
                         qPrintable(QStringLiteral("%1: head_dim %2, %3 heads, length %4, head %5 "
                                                   "dim %6: %7 vs %8")
                                        .arg(simd_name(level).data())
                                        .arg(head_dim)
                                        .arg(heads)
                                        .arg(length)
                                        .arg(h)
                                        .arg(d)
                                        .arg(out[h * head_dim + d])
                                        .arg(exact[d])));
              }
            }
          }
        }
      }
    }
  }

  // log Σ exp equals the float64 sum within 1e-6 for rows short and long (tails of every
  // length, a Qwen-sized vocabulary), spread wide, with -inf entries and terms far below
  // the maximum; a row of equal values gives log n.
  void logSumExpMatchesFloat64Reference() {
    std::mt19937 rng(19);
    for (SimdLevel level : testable_simd_levels()) {
      for (int64_t n : {1, 2, 7, 8, 15, 16, 17, 33, 255, 256, 257, 4096, 152064}) {
        for (float spread : {0.5f, 8.0f, 60.0f}) {
          std::vector<float> x(static_cast<size_t>(n));
          std::normal_distribution<float> normal(3.0f, spread);
          for (float& v : x) v = normal(rng);
          if (n > 2) x[1] = -INFINITY;
          const double max_value = *std::max_element(x.begin(), x.end());
          double sum = 0.0;
          for (const float v : x) sum += std::exp(static_cast<double>(v) - max_value);
          const double exact = max_value + std::log(sum);
          const double got = log_sum_exp(x.data(), n, level);
          QVERIFY2(std::fabs(got - exact) <= 1e-6 * (1.0 + std::fabs(exact)),
                   qPrintable(QStringLiteral("%1: n %2, spread %3: %4 vs %5")
                                  .arg(simd_name(level).data())
                                  .arg(n)
                                  .arg(spread)
                                  .arg(got, 0, 'g', 12)
                                  .arg(exact, 0, 'g', 12)));
        }
      }
      const std::vector<float> equal(1000, -2.5f);
      QVERIFY(std::fabs(log_sum_exp(equal.data(), 1000, level) - (-2.5 + std::log(1000.0))) < 1e-6);
    }
  }

  // A head's attention is the same bits whether its group is computed together or each
  // head alone (the heads of a group share accumulator tiles).
  void attentionIsTheSameForEachHeadAlone() {
    std::mt19937 rng(17);
    for (SimdLevel level : testable_simd_levels()) {
      for (int head_dim : {12, 64}) {
        const int heads = 6, length = 23;
        const RandomCache cache(rng, head_dim, 1, 4, length);
        const std::vector<float> q = normal_values(rng, static_cast<size_t>(heads * head_dim));
        std::vector<float> scores(static_cast<size_t>(heads * length));
        std::vector<float> together(static_cast<size_t>(heads * head_dim)), alone(together.size());
        std::vector<const float*> rows(static_cast<size_t>(2 * length));
        AttentionArgs a = cache.args(q.data(), 0, heads, length);
        a.scores = scores.data();
        a.rows = rows.data();
        a.out = together.data();
        attend(a, level);
        for (int h = 0; h < heads; ++h) {
          AttentionArgs b = cache.args(q.data() + h * head_dim, 0, 1, length);
          b.scores = scores.data();
          b.rows = rows.data();
          b.out = alone.data() + h * head_dim;
          attend(b, level);
        }
        QVERIFY2(std::memcmp(together.data(), alone.data(), alone.size() * 4) == 0,
                 simd_name(level).data());
      }
    }
  }

  void rejectsPartialBlocks() {
    ThreadPool pool(1);
    std::vector<uint8_t> bytes(34 * 4);
    const TensorView w{TensorType::Q8_0, 48, 2, bytes.data()};
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, pack_matrix(w, SimdLevel::Portable, pool));
  }

  // The pool's CPU time counts every thread's work as it is done: each of two threads burns
  // 3 ms of its own CPU clock inside one job, and the pool reports at least 6 ms more after
  // it. (The process clock, which sees another thread's time only at a scheduler tick, saw
  // little more than the calling thread's 3 ms.)
  void poolCountsEveryThreadsCpuTime() {
    ThreadPool pool(2);
    const auto thread_seconds = [] {
      timespec ts{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
    };
    constexpr double kBurn = 0.003;
    std::atomic<int> arrived{0};
    const double before = pool.cpu_seconds();
    pool.parallel_for(2, [&](int64_t, int64_t, int) {
      arrived.fetch_add(1);
      while (arrived.load() < 2) {}  // both chunks run at once, on both threads
      const double start = thread_seconds();
      while (thread_seconds() - start < kBurn) {}
    });
    const double counted = pool.cpu_seconds() - before;
    QVERIFY2(counted >= 2 * kBurn, qPrintable(QString("counted %1 ms").arg(counted * 1e3)));
  }

  // A job of less work than the pool's serial work runs on the calling thread as one chunk;
  // a job of unknown work, or of more, is split into the pool's chunks (4 per thread), which
  // cover the range in order.
  void smallJobsRunOnTheCallingThread() {
    ThreadPool pool(2);
    const auto chunks_of = [&](int64_t work) {
      std::mutex m;
      std::vector<std::pair<int64_t, int64_t>> chunks;
      std::set<std::thread::id> threads;
      pool.parallel_for(
          64,
          [&](int64_t begin, int64_t end, int) {
            const std::lock_guard lock(m);
            chunks.emplace_back(begin, end);
            threads.insert(std::this_thread::get_id());
          },
          1, work);
      std::sort(chunks.begin(), chunks.end());
      return std::pair{chunks, threads};
    };
    const auto [small, small_threads] = chunks_of(ThreadPool::kSerialWork - 1);
    QCOMPARE(small.size(), size_t(1));
    QCOMPARE(small[0], (std::pair<int64_t, int64_t>{0, 64}));
    QCOMPARE(small_threads, std::set<std::thread::id>{std::this_thread::get_id()});
    for (const int64_t work : {int64_t{-1}, ThreadPool::kSerialWork}) {
      const std::vector<std::pair<int64_t, int64_t>> split = chunks_of(work).first;
      QCOMPARE(split.size(), size_t(8));
      for (size_t c = 0; c < split.size(); ++c) QCOMPARE(split[c].first, c == 0 ? 0 : split[c - 1].second);
      QCOMPARE(split.back().second, int64_t{64});
    }
  }

  // The register-only loops run and report a positive rate for every type and level.
  void peakLoopsRun() {
    for (SimdLevel level : testable_simd_levels()) {
      for (TensorType type : kAllTypes) {
        const double rate = peak_multiply_adds_per_second(type, level, 0.001);
        QVERIFY2(rate > 0 && std::isfinite(rate), qPrintable(label(level, type)));
      }
    }
  }

  // The in-cache loops run every kernel and report a positive rate, for a slice smaller
  // than the matrix (a cache of one byte still holds one panel) and for the whole of it.
  void inCacheRatesRun() {
    std::mt19937 rng(11);
    for (SimdLevel level : testable_simd_levels()) {
      for (TensorType type : kAllTypes) {
        const RandomMatrix w = random_matrix(type, 37, test_cols(type), rng);
        for (const int tokens : {1, 5, 17}) {
          for (const size_t cache : {size_t{1}, size_t{1} << 20}) {
            const double rate = in_cache_multiply_adds_per_second(w.view(), level, tokens, cache, 0.001);
            QVERIFY2(rate > 0 && std::isfinite(rate), qPrintable(label(level, type)));
          }
        }
      }
    }
  }
};

QTEST_GUILESS_MAIN(TestCpuKernels)
#include "test_cpu_kernels.moc"
