#include "model/random_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "common/thread_pool.h"

namespace specula {

namespace {

struct NamedShape {
  std::string_view name;
  std::string_view architecture;
  int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, context_length;
  int explicit_head_dim;  // 0: dim / n_heads
  int n_experts = 0, n_experts_used = 0;  // a mixture of experts of hidden_dim each; 0: dense
};

constexpr NamedShape kShapes[] = {
    {"tiny", "llama", 64, 160, 3, 4, 2, 97, 256, 0},
    {"tiny-qwen2", "qwen2", 64, 160, 3, 4, 2, 97, 256, 0},
    {"tiny-qwen3", "qwen3", 64, 160, 3, 4, 2, 97, 256, 32},
    {"tiny-qwen3moe", "qwen3moe", 64, 32, 3, 4, 2, 97, 256, 32, 8, 2},
    // Qwen3-Coder-30B-A3B's mixture (128 experts, 8 per token, head dim 128, 8 query heads per
    // key-value head) at half its width and a sixth of its depth, with a 32 000-word vocabulary:
    // 1.3 B parameters, 0.11 B of them read per token (1.4 GB as Q8_0)
    {"qwen3moe-1.3b", "qwen3moe", 1024, 384, 8, 16, 2, 32000, 4096, 128, 128, 8},
    {"110m", "llama", 768, 2048, 12, 12, 12, 32000, 1024, 0},
    {"1.1b", "llama", 2048, 5632, 22, 32, 4, 32000, 2048, 0},
    {"7b", "llama", 4096, 11008, 32, 32, 32, 32000, 4096, 0},
};

// splitmix64: a counter-based generator, so every row is seeded independently and rows
// can be generated in any order on any thread.
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1) from the top 24 bits.
float uniform_pm1(uint64_t bits) {
  return static_cast<float>(bits >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

// A plain encoder for the K-quants of random models (tensor.h has no quantizer for them):
// per 32-value sub-block a scale and minimum spanning its range, quantized to 6 bits
// against the block's f16 scales, then the nearest code. Valid blocks of every field,
// which is all the benchmarks and tests need; llama.cpp's quantizer searches for better ones.
// Q5_K (kLevels 32) is written as Q4_K (16) is, its codes' fifth bits in qh.
template <int kLevels = 16>
void encode_q4_k(const float* x, uint8_t* block) {
  float scale[8], minimum[8];
  for (int j = 0; j < 8; ++j) {
    const float lo = std::min(0.0f, *std::min_element(x + 32 * j, x + 32 * j + 32));
    const float hi = *std::max_element(x + 32 * j, x + 32 * j + 32);
    scale[j] = (hi - lo) / static_cast<float>(kLevels - 1);
    minimum[j] = -lo;
  }
  const uint16_t d = fp32_to_fp16(*std::max_element(scale, scale + 8) / 63.0f);
  const uint16_t dmin = fp32_to_fp16(*std::max_element(minimum, minimum + 8) / 63.0f);
  const float fd = fp16_to_fp32(d), fdmin = fp16_to_fp32(dmin);
  uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(fd > 0 ? std::clamp(std::lround(scale[j] / fd), 0L, 63L) : 0);
    mn[j] = static_cast<uint8_t>(fdmin > 0 ? std::clamp(std::lround(minimum[j] / fdmin), 0L, 63L) : 0);
  }
  std::memcpy(block, &d, 2);
  std::memcpy(block + 2, &dmin, 2);
  uint8_t* s = block + 4;  // the inverse of GGML's get_scale_min_k4
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
    s[j + 4] = static_cast<uint8_t>(mn[j] | (mn[j + 4] >> 4) << 6);
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | (mn[j + 4] & 0xF) << 4);
  }
  uint8_t* qh = block + 16;  // Q5_K only
  uint8_t* q = kLevels == 32 ? block + 48 : block + 16;
  std::memset(block + 16, 0, kLevels == 32 ? 160 : 128);
  for (int j = 0; j < 8; ++j) {
    const float step = fd * sc[j], offset = fdmin * mn[j];
    for (int l = 0; l < 32; ++l) {
      const long code = step > 0 ? std::clamp(std::lround((x[32 * j + l] + offset) / step), 0L, kLevels - 1L) : 0;
      q[32 * (j / 2) + l] |= static_cast<uint8_t>((code & 0xF) << (4 * (j % 2)));
      if (kLevels == 32) qh[l] |= static_cast<uint8_t>((code >> 4) << j);
    }
  }
}

// Q2_K: per 16 values a scale and minimum spanning the range (codes 0..3), quantized to 4
// bits against the block's f16 scales.
void encode_q2_k(const float* x, uint8_t* block) {
  float scale[16], minimum[16];
  for (int j = 0; j < 16; ++j) {
    const float lo = std::min(0.0f, *std::min_element(x + 16 * j, x + 16 * j + 16));
    const float hi = *std::max_element(x + 16 * j, x + 16 * j + 16);
    scale[j] = (hi - lo) / 3.0f;
    minimum[j] = -lo;
  }
  const uint16_t d = fp32_to_fp16(*std::max_element(scale, scale + 16) / 15.0f);
  const uint16_t dmin = fp32_to_fp16(*std::max_element(minimum, minimum + 16) / 15.0f);
  const float fd = fp16_to_fp32(d), fdmin = fp16_to_fp32(dmin);
  std::memset(block, 0, 84);
  for (int j = 0; j < 16; ++j) {
    const long sc = fd > 0 ? std::clamp(std::lround(scale[j] / fd), 0L, 15L) : 0;
    const long mn = fdmin > 0 ? std::clamp(std::lround(minimum[j] / fdmin), 0L, 15L) : 0;
    block[j] = static_cast<uint8_t>(sc | mn << 4);
    const float step = fd * static_cast<float>(sc), offset = fdmin * static_cast<float>(mn);
    for (int l = 0; l < 16; ++l) {
      const int i = 16 * j + l, half = i / 128, shift = (i % 128) / 32;
      const long code = step > 0 ? std::clamp(std::lround((x[i] + offset) / step), 0L, 3L) : 0;
      block[16 + 32 * half + i % 32] |= static_cast<uint8_t>(code << (2 * shift));
    }
  }
  std::memcpy(block + 80, &d, 2);
  std::memcpy(block + 82, &dmin, 2);
}

// Q3_K: per 16 values a scale for codes -4..3, quantized to 6 bits (stored + 32) against the
// block's f16 scale; the codes plus 4 as a third bit (hmask) and 2 low bits (as Q2_K's).
void encode_q3_k(const float* x, uint8_t* block) {
  float scale[16];
  for (int j = 0; j < 16; ++j) {
    float amax = 0.0f;
    for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(x[16 * j + i]));
    scale[j] = amax / 4.0f;
  }
  const uint16_t d = fp32_to_fp16(*std::max_element(scale, scale + 16) / 31.0f);
  const float fd = fp16_to_fp32(d);
  uint8_t* hmask = block;
  uint8_t* qs = block + 32;
  uint8_t* packed = block + 96;
  std::memset(block, 0, 108);
  for (int j = 0; j < 16; ++j) {
    const long sc = fd > 0 ? std::clamp(std::lround(scale[j] / fd), 0L, 31L) : 0;
    const long stored = sc + 32;  // GGML's packing: low nibbles in bytes 0..7, top 2 bits in 8..11
    packed[j % 8] |= static_cast<uint8_t>((stored & 0xF) << (4 * (j / 8)));
    packed[8 + j % 4] |= static_cast<uint8_t>((stored >> 4) << (2 * (j / 4)));
    const float step = fd * static_cast<float>(sc);
    for (int l = 0; l < 16; ++l) {
      const int i = 16 * j + l, half = i / 128, shift = (i % 128) / 32;
      const long code = (step > 0 ? std::clamp(std::lround(x[i] / step), -4L, 3L) : 0) + 4;
      qs[32 * half + i % 32] |= static_cast<uint8_t>((code & 3) << (2 * shift));
      hmask[i % 32] |= static_cast<uint8_t>((code >> 2) << (i / 32));
    }
  }
  std::memcpy(block + 108, &d, 2);
}

// IQ4_XS: per 32 values a scale making the largest magnitude level 127, quantized to 6 bits
// (stored + 32) against the block's f16 scale, then the nearest of the 16 levels.
void encode_iq4_xs(const float* x, uint8_t* block) {
  float scale[8];
  for (int j = 0; j < 8; ++j) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * j + i]));
    scale[j] = amax / 127.0f;
  }
  const uint16_t d = fp32_to_fp16(*std::max_element(scale, scale + 8) / 31.0f);
  const float fd = fp16_to_fp32(d);
  std::memset(block, 0, 136);
  std::memcpy(block, &d, 2);
  uint16_t high = 0;
  for (int j = 0; j < 8; ++j) {
    const long ls = fd > 0 ? std::clamp(std::lround(scale[j] / fd), 0L, 31L) + 32 : 32;
    block[4 + j / 2] |= static_cast<uint8_t>((ls & 0xF) << (4 * (j % 2)));
    high |= static_cast<uint16_t>((ls >> 4) << (2 * j));
    const float step = fd * static_cast<float>(ls - 32);
    for (int i = 0; i < 32; ++i) {
      int best = 0;
      for (int k = 1; k < 16; ++k) {
        if (std::fabs(step * kIq4Levels[k] - x[32 * j + i]) < std::fabs(step * kIq4Levels[best] - x[32 * j + i])) best = k;
      }
      block[8 + 16 * j + i % 16] |= static_cast<uint8_t>(best << (i < 16 ? 0 : 4));
    }
  }
  std::memcpy(block + 2, &high, 2);
}

// Q6_K likewise: per 16 values a scale for codes -32..31, quantized to 8 bits against the
// block's f16 scale.
void encode_q6_k(const float* x, uint8_t* block) {
  float scale[16];
  for (int j = 0; j < 16; ++j) {
    float amax = 0.0f;
    for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(x[16 * j + i]));
    scale[j] = amax / 31.0f;
  }
  const uint16_t d = fp32_to_fp16(*std::max_element(scale, scale + 16) / 127.0f);
  const float fd = fp16_to_fp32(d);
  uint8_t* ql = block;
  uint8_t* qh = block + 128;
  auto* sc = reinterpret_cast<int8_t*>(block + 192);
  std::memset(block, 0, 192);
  for (int j = 0; j < 16; ++j) {
    sc[j] = static_cast<int8_t>(fd > 0 ? std::clamp(std::lround(scale[j] / fd), 0L, 127L) : 0);
  }
  for (int i = 0; i < 256; ++i) {
    const float step = fd * sc[i / 16];
    const long q = step > 0 ? std::clamp(std::lround(x[i] / step) + 32, 0L, 63L) : 32;
    const int half = i / 128, l = i % 32, quarter = (i % 128) / 32;
    ql[64 * half + l + (quarter % 2) * 32] |= static_cast<uint8_t>((q & 0xF) << (quarter < 2 ? 0 : 4));
    qh[32 * half + l] |= static_cast<uint8_t>((q >> 4) << (2 * quarter));
  }
  std::memcpy(block + 208, &d, 2);
}

// IQ4_NL: per 32 values the f16 scale making the largest magnitude level 127, then the
// nearest of the 16 levels.
void encode_iq4_nl(const float* x, uint8_t* block) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const uint16_t d = fp32_to_fp16(amax / 127.0f);
  const float step = fp16_to_fp32(d);
  std::memset(block, 0, 18);
  std::memcpy(block, &d, 2);
  for (int i = 0; i < 32; ++i) {
    int best = 0;
    for (int k = 1; k < 16; ++k) {
      if (std::fabs(step * kIq4Levels[k] - x[i]) < std::fabs(step * kIq4Levels[best] - x[i])) best = k;
    }
    block[2 + i % 16] |= static_cast<uint8_t>(best << (i < 16 ? 0 : 4));
  }
}

// MXFP4: per 32 values the smallest power-of-two scale whose largest value (6, stored
// doubled as 12 times half the scale) reaches the largest magnitude, then the nearest value.
void encode_mxfp4(const float* x, uint8_t* block) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  int e = 1;
  while (e < 254 && 12.0f * mxfp4_half_scale(static_cast<uint8_t>(e)) < amax) ++e;
  const float half = mxfp4_half_scale(static_cast<uint8_t>(e));
  std::memset(block, 0, 17);
  block[0] = static_cast<uint8_t>(e);
  for (int i = 0; i < 32; ++i) {
    int best = 0;
    for (int k = 1; k < 16; ++k) {
      if (std::fabs(half * kMxfp4Values[k] - x[i]) < std::fabs(half * kMxfp4Values[best] - x[i])) best = k;
    }
    block[1 + i % 16] |= static_cast<uint8_t>(best << (i < 16 ? 0 : 4));
  }
}

void encode_row(TensorType type, const float* x, uint8_t* out, int64_t n) {
  if (type == TensorType::IQ4_NL || type == TensorType::MXFP4) {
    const size_t bytes = type_traits(type).block_bytes;
    for (int64_t b = 0; b < n / 32; ++b) {
      (type == TensorType::IQ4_NL ? encode_iq4_nl : encode_mxfp4)(x + 32 * b, out + b * bytes);
    }
  } else if (type_traits(type).block_elements == 256) {
    const size_t bytes = type_traits(type).block_bytes;
    void (*encode)(const float*, uint8_t*) = type == TensorType::Q4_K   ? encode_q4_k<16>
                                             : type == TensorType::Q5_K ? encode_q4_k<32>
                                             : type == TensorType::Q6_K ? encode_q6_k
                                             : type == TensorType::Q2_K ? encode_q2_k
                                             : type == TensorType::Q3_K ? encode_q3_k
                                                                        : encode_iq4_xs;
    for (int64_t b = 0; b < n / 256; ++b) encode(x + 256 * b, out + b * bytes);
  } else {
    quantize_row(type, x, out, n);
  }
}

constexpr TensorType kRandomTypes[] = {TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q8_0,
                                       TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                                       TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K,
                                       TensorType::Q6_K, TensorType::IQ4_XS, TensorType::IQ4_NL, TensorType::MXFP4};

class Builder {
 public:
  Builder(Model& model, uint64_t seed, int threads) : model_(model), seed_(seed), pool_(threads) {}

  // A (rows, cols) matrix of `type` with values uniform in ±amplitude.
  TensorView matrix(TensorType type, int64_t rows, int64_t cols, float amplitude) {
    const uint64_t tensor_seed = mix(seed_ ^ mix(++tensor_count_));
    TensorView view{type, cols, rows, nullptr};
    auto buffer = std::make_shared<std::vector<uint8_t>>(view.bytes());
    const size_t row_size = view.row_size();
    pool_.parallel_for(rows, [&](int64_t begin, int64_t end, int) {
      std::vector<float> values(static_cast<size_t>(cols));
      for (int64_t r = begin; r < end; ++r) {
        uint64_t state = mix(tensor_seed + static_cast<uint64_t>(r));
        for (float& v : values) {
          state = mix(state);
          v = amplitude * uniform_pm1(state);
        }
        uint8_t* out = buffer->data() + static_cast<size_t>(r) * row_size;
        encode_row(type, values.data(), out, cols);
      }
    });
    view.data = buffer->data();
    model_.storage.push_back(buffer);
    return view;
  }

  // An f32 norm weight with values in 1 ± 0.25.
  TensorView norm(int64_t dim) {
    TensorView view = matrix(TensorType::F32, 1, dim, 0.25f);
    float* values = static_cast<float*>(const_cast<void*>(view.data));
    for (int64_t i = 0; i < dim; ++i) values[i] += 1.0f;
    return view;
  }

 private:
  Model& model_;
  uint64_t seed_;
  uint64_t tensor_count_ = 0;
  ThreadPool pool_;
};

}  // namespace

ModelConfig random_model_config(std::string_view shape) {
  for (const NamedShape& s : kShapes) {
    if (s.name != shape) continue;
    ModelConfig c;
    c.name = "random-" + std::string(shape);
    c.architecture = std::string(s.architecture);
    c.rope_style = *architecture_rope_style(c.architecture);
    c.explicit_head_dim = s.explicit_head_dim;
    c.dim = s.dim;
    c.hidden_dim = s.hidden_dim;
    c.n_layers = s.n_layers;
    c.n_heads = s.n_heads;
    c.n_kv_heads = s.n_kv_heads;
    c.vocab_size = s.vocab_size;
    c.context_length = s.context_length;
    c.n_experts = s.n_experts;
    c.n_experts_used = s.n_experts_used;
    return c;
  }
  std::string known;
  for (const NamedShape& s : kShapes) known += (known.empty() ? "" : ", ") + std::string(s.name);
  throw std::invalid_argument("unknown model shape '" + std::string(shape) + "' (known: " + known +
                              ")");
}

std::shared_ptr<const Model> make_random_model(const ModelConfig& config, TensorType type,
                                               uint64_t seed, int threads) {
  return make_random_model(config, type, type, seed, threads);
}

bool random_model_type(TensorType type) {
  return std::find(std::begin(kRandomTypes), std::end(kRandomTypes), type) != std::end(kRandomTypes);
}

std::string random_model_type_names() {
  std::string names;
  for (TensorType t : kRandomTypes) names += (names.empty() ? "" : ", ") + std::string(type_traits(t).name);
  return names;
}

std::shared_ptr<const Model> make_random_model(const ModelConfig& config, TensorType type, TensorType second,
                                               uint64_t seed, int threads) {
  for (TensorType t : {type, second}) {
    if (!random_model_type(t)) {
      throw std::invalid_argument("random model: " + std::string(type_traits(t).name) + " weights are not made (" +
                                  random_model_type_names() + " are)");
    }
  }
  if (config.dim <= 0 || config.n_heads <= 0 || config.n_kv_heads <= 0 ||
      (config.explicit_head_dim == 0 && config.dim % config.n_heads != 0) ||
      config.n_heads % config.n_kv_heads != 0 || config.head_dim() <= 0 || config.head_dim() % 2 != 0) {
    throw std::invalid_argument("random model: inconsistent head configuration");
  }
  auto model = std::make_shared<Model>();
  model->config = config;
  model->format = "memory";
  model->path = config.name.empty() ? "random" : config.name;
  Builder build(*model, seed, threads);
  const int64_t dim = config.dim, q_dim = config.q_dim(), kv_dim = config.kv_dim(), hidden = config.hidden_dim;
  const bool qkv_bias = config.architecture == "qwen2";
  const bool qk_norm = config.architecture == "qwen3" || config.architecture == "qwen3moe";
  const auto amplitude = [](int64_t cols) { return std::sqrt(3.0f / static_cast<float>(cols)); };
  Weights& w = model->weights;
  w.token_embedding = build.matrix(type, config.vocab_size, dim, 1.0f);
  for (int l = 0; l < config.n_layers; ++l) {
    LayerWeights layer;
    layer.attn_norm = build.norm(dim);
    layer.wq = build.matrix(type, q_dim, dim, amplitude(dim));
    layer.wk = build.matrix(type, kv_dim, dim, amplitude(dim));
    layer.wv = build.matrix(second, kv_dim, dim, amplitude(dim));
    if (qkv_bias) {
      layer.bq = build.matrix(TensorType::F32, 1, q_dim, 0.5f);
      layer.bk = build.matrix(TensorType::F32, 1, kv_dim, 0.5f);
      layer.bv = build.matrix(TensorType::F32, 1, kv_dim, 0.5f);
    }
    if (qk_norm) {
      layer.q_norm = build.norm(config.head_dim());
      layer.k_norm = build.norm(config.head_dim());
    }
    layer.wo = build.matrix(type, dim, q_dim, amplitude(q_dim));
    layer.ffn_norm = build.norm(dim);
    if (config.has_experts()) {
      layer.router = build.matrix(type, config.n_experts, dim, amplitude(dim));
      for (int e = 0; e < config.n_experts; ++e) {
        layer.expert_gate.push_back(build.matrix(type, hidden, dim, amplitude(dim)));
        layer.expert_up.push_back(build.matrix(type, hidden, dim, amplitude(dim)));
        layer.expert_down.push_back(build.matrix(second, dim, hidden, amplitude(hidden)));
      }
    } else {
      layer.w_gate = build.matrix(type, hidden, dim, amplitude(dim));
      layer.w_up = build.matrix(type, hidden, dim, amplitude(dim));
      layer.w_down = build.matrix(second, dim, hidden, amplitude(hidden));
    }
    w.layers.push_back(layer);
  }
  w.final_norm = build.norm(dim);
  w.output = build.matrix(second, config.vocab_size, dim, amplitude(dim));
  return model;
}

}  // namespace specula
