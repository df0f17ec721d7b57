#include "model/tensor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace specula {

namespace {

// GGML's layouts (ggml-common.h) by type id; ids GGML no longer defines (4, 5 and 31-33,
// 36-38: removed formats) have none. `supported` types are the ones a model's
// weights may have (is_supported_type).
struct TypeEntry {
  TensorType type;
  TypeTraits traits;
};
constexpr TypeEntry kTypes[] = {
    {TensorType::F32, {"f32", 1, 4, true}},
    {TensorType::F16, {"f16", 1, 2, true}},
    {TensorType::BF16, {"bf16", 1, 2, true}},
    {TensorType::Q8_0, {"q8_0", 32, 34, true}},     // f16 scale + 32 int8
    {TensorType::Q4_0, {"q4_0", 32, 18, true}},     // f16 scale + 16 bytes of nibbles
    {TensorType::Q4_K, {"q4_K", 256, 144, true}},   // f16 d, dmin + 12 bytes scales + 128 bytes nibbles
    {TensorType::Q6_K, {"q6_K", 256, 210, true}},   // 128 ql + 64 qh + 16 scales + f16 d
    {TensorType::Q4_1, {"q4_1", 32, 20, true}},    // f16 d, m + 16 bytes of nibbles
    {TensorType::Q5_0, {"q5_0", 32, 22, true}},    // f16 d + 4 bytes of fifth bits + 16 bytes of nibbles
    {TensorType::Q5_1, {"q5_1", 32, 24, true}},    // f16 d, m + 4 bytes of fifth bits + 16 bytes of nibbles
    // f16 d, s + 32 int8, as ggml-common.h's block_q8_1 (the gguf package's table still says
    // 40, from when d and s were floats); an activation format that files do not hold
    {TensorType::Q8_1, {"q8_1", 32, 36, false}},
    {TensorType::Q2_K, {"q2_K", 256, 84, true}},   // 16 scale bytes + 64 bytes of crumbs + f16 d, dmin
    {TensorType::Q3_K, {"q3_K", 256, 110, true}},  // 32 hmask + 64 bytes of crumbs + 12 scale bytes + f16 d
    {TensorType::Q5_K, {"q5_K", 256, 176, true}},  // f16 d, dmin + 12 scale bytes + 32 qh + 128 nibbles
    {TensorType::Q8_K, {"q8_K", 256, 292, false}},  // f32 d + 256 int8 + 16 int16 sums
    {TensorType::IQ2_XXS, {"iq2_xxs", 256, 66, false}},
    {TensorType::IQ2_XS, {"iq2_xs", 256, 74, false}},
    {TensorType::IQ3_XXS, {"iq3_xxs", 256, 98, false}},
    {TensorType::IQ1_S, {"iq1_s", 256, 50, false}},
    {TensorType::IQ4_NL, {"iq4_nl", 32, 18, true}},   // f16 d + 16 bytes of nibbles indexing a table
    {TensorType::IQ3_S, {"iq3_s", 256, 110, false}},
    {TensorType::IQ2_S, {"iq2_s", 256, 82, false}},
    {TensorType::IQ4_XS, {"iq4_xs", 256, 136, true}},  // f16 d + u16 scales_h + 4 scales_l + 128 nibbles
    {TensorType::I8, {"i8", 1, 1, false}},
    {TensorType::I16, {"i16", 1, 2, false}},
    {TensorType::I32, {"i32", 1, 4, false}},
    {TensorType::I64, {"i64", 1, 8, false}},
    {TensorType::F64, {"f64", 1, 8, false}},
    {TensorType::IQ1_M, {"iq1_m", 256, 56, false}},
    {TensorType::TQ1_0, {"tq1_0", 256, 54, false}},
    {TensorType::TQ2_0, {"tq2_0", 256, 66, false}},
    {TensorType::MXFP4, {"mxfp4", 32, 17, true}},  // e8m0 exponent + 16 bytes of fp4 nibbles
    {TensorType::NVFP4, {"nvfp4", 64, 36, false}},
    {TensorType::Q1_0, {"q1_0", 128, 18, false}},
};

const TypeEntry* find_type(uint32_t id) {
  for (const TypeEntry& e : kTypes) {
    if (static_cast<uint32_t>(e.type) == id) return &e;
  }
  return nullptr;
}

}  // namespace

// The first four live in the low 6 bits of bytes 0..3 (scales) and 4..7 (minimums); the
// last four take their low 4 bits from bytes 8..11 and their top 2 bits from the spare top
// bits of bytes 0..7.
void q4_k_scale_min(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

const TypeTraits& type_traits(TensorType type) {
  if (const TypeEntry* e = find_type(static_cast<uint32_t>(type))) return e->traits;
  throw std::invalid_argument("unknown tensor type " + std::to_string(static_cast<uint32_t>(type)));
}

const std::string& supported_type_names() {
  static const std::string names = [] {
    std::string s;
    for (const TypeEntry& e : kTypes) {
      if (e.traits.supported) s += (s.empty() ? "" : ", ") + std::string(e.traits.name);
    }
    return s;
  }();
  return names;
}

std::optional<TensorType> tensor_type_from_ggml(uint32_t ggml_type) {
  if (const TypeEntry* e = find_type(ggml_type)) return e->type;
  return std::nullopt;
}

std::optional<TensorType> tensor_type_from_name(std::string_view name) {
  for (const TypeEntry& e : kTypes) {
    if (e.traits.name == name) return e.type;
  }
  return std::nullopt;
}

size_t row_bytes(TensorType type, int64_t n) {
  const TypeTraits& t = type_traits(type);
  if (n % t.block_elements != 0) {
    throw std::invalid_argument("row of " + std::to_string(n) + " values is not a whole number of " +
                                std::string(t.name) + " blocks");
  }
  return static_cast<size_t>(n / t.block_elements * t.block_bytes);
}

// Branch-free, so row loops vectorize (the method of Maratyszcza's FP16 library, as ggml
// uses): move the half's exponent and mantissa into float position and rescale by 2^-112,
// which is exact for normals, infinities and NaNs; subnormals come out of a float whose
// mantissa holds them, minus the implicit 0.5.
float fp16_to_fp32(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;  // exponent and mantissa, sign shifted out
  const float normalized = std::bit_cast<float>((two_w >> 4) + (0xE0u << 23)) * 0x1p-112f;
  const float denormalized = std::bit_cast<float>((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t magnitude = two_w < (1u << 27) ? std::bit_cast<uint32_t>(denormalized)
                                                 : std::bit_cast<uint32_t>(normalized);
  return std::bit_cast<float>(sign | magnitude);
}

uint16_t fp32_to_fp16(float f) {
  // round to nearest even, as the hardware conversion does
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (abs < 0x38800000u) {  // subnormal or zero in fp16
    const float magnitude = std::bit_cast<float>(abs);
    const uint32_t half = static_cast<uint32_t>(std::nearbyint(magnitude * 16777216.0f));  // 2^24
    return static_cast<uint16_t>(sign | half);
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

namespace {

// Block layouts, byte for byte as ggml defines them (ggml-common.h).
struct BlockQ8_0 {
  uint16_t d;       // f16 scale
  int8_t qs[32];    // value = qs[i] * d
};
struct BlockQ4_0 {
  uint16_t d;       // f16 scale
  uint8_t qs[16];   // element i in the low nibble of qs[i], element 16+i in the high nibble; value = (q - 8) * d
};
struct BlockQ4_K {
  uint16_t d;           // f16 scale of the 6-bit sub-block scales
  uint16_t dmin;        // f16 scale of the 6-bit sub-block minimums
  uint8_t scales[12];   // 8 scales and 8 minimums of 6 bits, packed (see q4_k_scale_min)
  uint8_t qs[128];      // 4-bit quants: 64-value chunks, low nibbles first then high nibbles
};
struct BlockQ6_K {
  uint8_t ql[128];      // low 4 bits of the quants
  uint8_t qh[64];       // high 2 bits of the quants
  int8_t scales[16];    // 8-bit scale of each 16-value sub-block
  uint16_t d;           // f16 super-block scale
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ6_K) == 210);

struct BlockQ4_1 {
  uint16_t d;       // f16 scale
  uint16_t m;       // f16 minimum
  uint8_t qs[16];   // as Q4_0's nibbles; value = q * d + m
};
struct BlockQ5_0 {
  uint16_t d;       // f16 scale
  uint8_t qh[4];    // fifth bit of element i in bit i (little-endian u32)
  uint8_t qs[16];   // low 4 bits as Q4_0's nibbles; value = (q - 16) * d
};
struct BlockQ5_1 {
  uint16_t d;       // f16 scale
  uint16_t m;       // f16 minimum
  uint8_t qh[4];    // fifth bits as Q5_0's
  uint8_t qs[16];   // value = q * d + m
};
struct BlockQ2_K {
  uint8_t scales[16];  // per 16 values: scale in the low nibble, minimum in the high
  uint8_t qs[64];      // 2-bit quants: 128-value halves of 32 bytes, four shifts each
  uint16_t d;          // f16 scale of the scales
  uint16_t dmin;       // f16 scale of the minimums
};
struct BlockQ3_K {
  uint8_t hmask[32];   // third bit of each value (clear: minus 4)
  uint8_t qs[64];      // low 2 bits, laid out as Q2_K's
  uint8_t scales[12];  // 16 six-bit scales (minus 32), packed
  uint16_t d;          // f16 super-block scale
};
struct BlockQ5_K {
  uint16_t d;           // as Q4_K
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];       // fifth bits: bit 2c of qh[l] for value l of 64-value chunk c's low half, 2c+1 high
  uint8_t qs[128];      // low 4 bits as Q4_K's
};
struct BlockIQ4_NL {
  uint16_t d;       // f16 scale
  uint8_t qs[16];   // nibbles as Q4_0's, indexing kIq4Levels; value = d * kIq4Levels[q]
};
struct BlockIQ4_XS {
  uint16_t d;           // f16 super-block scale
  uint16_t scales_h;    // top 2 bits of the 8 six-bit sub-block scales
  uint8_t scales_l[4];  // low 4 bits of the scales, two per byte
  uint8_t qs[128];      // per 32-value sub-block 16 bytes of nibbles as IQ4_NL's
};
struct BlockMXFP4 {
  uint8_t e;        // E8M0 exponent: the block scale is 2^(e - 127)
  uint8_t qs[16];   // FP4 (E2M1) codes as Q4_0's nibbles
};
static_assert(sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136 && sizeof(BlockMXFP4) == 17);

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The fifth bit of Q5_0/Q5_1 element j (0..15) and j + 16, at bit 4.
inline int q5_high(uint32_t qh, int j) { return static_cast<int>(((qh >> j) << 4) & 0x10); }
inline int q5_high2(uint32_t qh, int j) { return static_cast<int>((qh >> (j + 12)) & 0x10); }

}  // namespace

// half the E8M0 scale, 2^(e - 128), as GGML_E8M0_TO_FP32_HALF (subnormal below e = 2)
float mxfp4_half_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

// Q3_K's 16 six-bit scales from its 12 packed bytes (GGML's kmask shuffle), before the -32.
void q3_k_scales(const uint8_t* packed, int8_t* scales) {
  uint32_t aux[4];
  std::memcpy(aux, packed, 12);
  const uint32_t tmp = aux[2];
  constexpr uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  std::memcpy(scales, aux, 16);
}

namespace {

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++, y += 32) {
    const float d = fp16_to_fp32(x[i].d), m = fp16_to_fp32(x[i].m);
    for (int j = 0; j < 16; j++) {
      y[j] = (x[i].qs[j] & 0x0F) * d + m;
      y[j + 16] = (x[i].qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++, y += 32) {
    const float d = fp16_to_fp32(x[i].d);
    const uint32_t qh = load_u32(x[i].qh);
    for (int j = 0; j < 16; j++) {
      y[j] = (((x[i].qs[j] & 0x0F) | q5_high(qh, j)) - 16) * d;
      y[j + 16] = (((x[i].qs[j] >> 4) | q5_high2(qh, j)) - 16) * d;
    }
  }
}

void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++, y += 32) {
    const float d = fp16_to_fp32(x[i].d), m = fp16_to_fp32(x[i].m);
    const uint32_t qh = load_u32(x[i].qh);
    for (int j = 0; j < 16; j++) {
      y[j] = ((x[i].qs[j] & 0x0F) | q5_high(qh, j)) * d + m;
      y[j + 16] = ((x[i].qs[j] >> 4) | q5_high2(qh, j)) * d + m;
    }
  }
}

void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++) {
    const float d = fp16_to_fp32(x[i].d), dmin = fp16_to_fp32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int n = 0; n < 256; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; half++) {
          const uint8_t sc = x[i].scales[is++];
          const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
          for (int l = 0; l < 16; l++) *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++) {
    const float d = fp16_to_fp32(x[i].d);
    int8_t scales[16];
    q3_k_scales(x[i].scales, scales);
    const uint8_t* q = x[i].qs;
    uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < 256; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1)) {
        for (int half = 0; half < 2; half++) {
          const float dl = d * (scales[is++] - 32);
          for (int l = 16 * half; l < 16 * half + 16; l++) {
            *y++ = dl * (((q[l] >> shift) & 3) - ((x[i].hmask[l] & m) ? 0 : 4));
          }
        }
      }
    }
  }
}

void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++) {
    const float d = fp16_to_fp32(x[i].d), dmin = fp16_to_fp32(x[i].dmin);
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    for (int j = 0; j < 8; j += 2, ql += 32) {  // 64 values: 32 low nibbles, then 32 high
      uint8_t sc, m;
      q4_k_scale_min(j, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      q4_k_scale_min(j + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      const int u1 = 1 << j, u2 = 2 << j;
      for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
  }
}

void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++, y += 32) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < 16; j++) {
      y[j] = d * kIq4Levels[x[i].qs[j] & 0xF];
      y[j + 16] = d * kIq4Levels[x[i].qs[j] >> 4];
    }
  }
}

void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++) {
    const float d = fp16_to_fp32(x[i].d);
    const uint8_t* qs = x[i].qs;
    for (int ib = 0; ib < 8; ib++, y += 32, qs += 16) {
      const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((x[i].scales_h >> 2 * ib) & 3) << 4);
      const float dl = d * (ls - 32);
      for (int j = 0; j < 16; j++) {
        y[j] = dl * kIq4Levels[qs[j] & 0xF];
        y[j + 16] = dl * kIq4Levels[qs[j] >> 4];
      }
    }
  }
}

void dequantize_mxfp4(const BlockMXFP4* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++, y += 32) {
    const float d = mxfp4_half_scale(x[i].e);
    for (int j = 0; j < 16; j++) {
      y[j] = kMxfp4Values[x[i].qs[j] & 0xF] * d;
      y[j + 16] = kMxfp4Values[x[i].qs[j] >> 4] * d;
    }
  }
}

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < 32; j++) *y++ = x[i].qs[j] * d;
  }
}

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++, y += 32) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < 16; j++) {
      y[j] = ((x[i].qs[j] & 0x0F) - 8) * d;
      y[j + 16] = ((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++) {
    const float d = fp16_to_fp32(x[i].d);
    const float dmin = fp16_to_fp32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    for (int j = 0; j < 8; j += 2, q += 32) {  // 64 values: 32 low nibbles, then 32 high
      uint8_t sc, m;
      q4_k_scale_min(j, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      q4_k_scale_min(j + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++) {
    const float d = fp16_to_fp32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; l++) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

// quantize_row_q8_0_ref: scale = amax / 127, values rounded half away from zero.
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 32; j++) y[i].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

// quantize_row_q4_0_ref: the value of largest magnitude maps to -8 exactly, so the
// scale carries its sign and the full range [-8, 7] is used.
void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++, x += 32) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 16; j++) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

// quantize_row_q4_1_ref / q5_1_ref: the block's range [min, max] in 15 (31) steps of d from
// m = min, values rounded half up.
template <class Block, int kLevels>
void quantize_affine(const float* x, Block* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++, x += 32) {
    float min = x[0], max = x[0];
    for (int j = 1; j < 32; j++) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / static_cast<float>(kLevels - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
      const int lo = std::min(kLevels - 1, static_cast<int>(static_cast<int8_t>((x[j] - min) * id + 0.5f)));
      const int hi = std::min(kLevels - 1, static_cast<int>(static_cast<int8_t>((x[j + 16] - min) * id + 0.5f)));
      y[i].qs[j] = static_cast<uint8_t>((lo & 0xF) | (hi & 0xF) << 4);
      qh |= static_cast<uint32_t>(lo >> 4) << j | static_cast<uint32_t>(hi >> 4) << (j + 16);
    }
    if constexpr (kLevels == 32) std::memcpy(y[i].qh, &qh, 4);
  }
}

// quantize_row_q5_0_ref: as Q4_0's, in [-16, 15].
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t blocks) {
  for (int64_t i = 0; i < blocks; i++, x += 32) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
      const int lo = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
      const int hi = std::min(31, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f)));
      y[i].qs[j] = static_cast<uint8_t>((lo & 0xF) | (hi & 0xF) << 4);
      qh |= static_cast<uint32_t>(lo >> 4) << j | static_cast<uint32_t>(hi >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

int64_t whole_blocks(TensorType type, int64_t n) {
  const TypeTraits& t = type_traits(type);
  if (n < 0 || n % t.block_elements != 0) {
    throw std::invalid_argument(std::to_string(n) + " values are not a whole number of " +
                                std::string(t.name) + " blocks");
  }
  return n / t.block_elements;
}

}  // namespace

void dequantize_row(TensorType type, const void* src, float* dst, int64_t n) {
  const int64_t blocks = whole_blocks(type, n);
  if (n == 0) return;  // empty rows may come with null pointers
  switch (type) {
    case TensorType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case TensorType::F16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; i++) dst[i] = fp16_to_fp32(h[i]);
      return;
    }
    case TensorType::BF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_fp32(h[i]);
      return;
    }
    case TensorType::Q8_0: dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, blocks); return;
    case TensorType::Q4_0: dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, blocks); return;
    case TensorType::Q4_K: dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, blocks); return;
    case TensorType::Q6_K: dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, blocks); return;
    case TensorType::Q4_1: dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, blocks); return;
    case TensorType::Q5_0: dequantize_q5_0(static_cast<const BlockQ5_0*>(src), dst, blocks); return;
    case TensorType::Q5_1: dequantize_q5_1(static_cast<const BlockQ5_1*>(src), dst, blocks); return;
    case TensorType::Q2_K: dequantize_q2_k(static_cast<const BlockQ2_K*>(src), dst, blocks); return;
    case TensorType::Q3_K: dequantize_q3_k(static_cast<const BlockQ3_K*>(src), dst, blocks); return;
    case TensorType::Q5_K: dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, blocks); return;
    case TensorType::IQ4_NL: dequantize_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, blocks); return;
    case TensorType::IQ4_XS: dequantize_iq4_xs(static_cast<const BlockIQ4_XS*>(src), dst, blocks); return;
    case TensorType::MXFP4: dequantize_mxfp4(static_cast<const BlockMXFP4*>(src), dst, blocks); return;
    default: break;
  }
  throw std::invalid_argument("dequantize_row: " + std::string(type_traits(type).name) + " blocks are not decoded here");
}

// Each conversion keeps the block's f16 scale bits and moves its integers: every value is
// the same product of the same two numbers before and after.
//   Q5_0 → Q8_0:   (q - 16) · d with q - 16 in [-16, 15] (for a device: the CPU reads Q5_0)
bool convert_row_exact(TensorType type, const void* src, void* dst, int64_t n) {
  const int64_t blocks = whole_blocks(type, n);
  switch (type) {
    case TensorType::Q5_0: {
      const auto* x = static_cast<const BlockQ5_0*>(src);
      auto* y = static_cast<BlockQ8_0*>(dst);
      for (int64_t i = 0; i < blocks; i++) {
        const uint32_t qh = load_u32(x[i].qh);
        y[i].d = x[i].d;
        for (int j = 0; j < 16; j++) {
          y[i].qs[j] = static_cast<int8_t>(((x[i].qs[j] & 0x0F) | q5_high(qh, j)) - 16);
          y[i].qs[j + 16] = static_cast<int8_t>(((x[i].qs[j] >> 4) | q5_high2(qh, j)) - 16);
        }
      }
      return true;
    }
    default:
      throw std::invalid_argument("convert_row_exact: " + std::string(type_traits(type).name) +
                                  " has no exact conversion");
  }
}

void quantize_row(TensorType type, const float* src, void* dst, int64_t n) {
  const int64_t blocks = whole_blocks(type, n);
  if (n == 0) return;  // empty rows may come with null pointers
  switch (type) {
    case TensorType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case TensorType::F16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; i++) h[i] = fp32_to_fp16(src[i]);
      return;
    }
    case TensorType::BF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; i++) h[i] = fp32_to_bf16(src[i]);
      return;
    }
    case TensorType::Q8_0: quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), blocks); return;
    case TensorType::Q4_0: quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), blocks); return;
    case TensorType::Q4_1: quantize_affine<BlockQ4_1, 16>(src, static_cast<BlockQ4_1*>(dst), blocks); return;
    case TensorType::Q5_1: quantize_affine<BlockQ5_1, 32>(src, static_cast<BlockQ5_1*>(dst), blocks); return;
    case TensorType::Q5_0: quantize_q5_0(src, static_cast<BlockQ5_0*>(dst), blocks); return;
    default:
      throw std::invalid_argument("quantizing to " + std::string(type_traits(type).name) +
                                  " is not supported; use q8_0, q4_0, q4_1, q5_0 or q5_1");
  }
}

}  // namespace specula
