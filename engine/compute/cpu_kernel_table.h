// What each SIMD level's translation unit provides to the kernel driver (cpu_kernels.cpp):
// one table of entry points per level, and GGML's block layouts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "compute/cpu_kernels.h"

namespace specula::kernels {

// Panels [begin, end) of a repacked matrix times n activation rows in the type's activation
// format (x_stride bytes apart): y[t · w.rows + r] for every row r of those panels.
using MatrixKernel = void (*)(const PackedMatrix& w, int64_t begin, int64_t end,
                              const uint8_t* x, size_t x_stride, int n, float* y);
// The register-only loop of a type's kernel arithmetic: runs `iterations` rounds and
// returns the multiply-adds they did.
using PeakLoop = double (*)(TensorType type, int64_t iterations);

struct KernelTable {
  int lanes;           // 32-bit lanes per vector: rows per quantized panel (but Q4_K's), values per float chunk
  int q4_k_rows;       // rows per Q4_K panel: the lanes, or 16 on AVX2 (two registers' rows)
  int float_rows;      // rows per float panel
  bool vnni;           // Q8_0 weights are stored biased by 128 for the VNNI product
  MatrixKernel f32, f16, bf16, q8_0, q4_0, q4_1, q5_1, q5_k, iq4_xs, q4_k, q6_k, q2_k;
  MatrixKernel q5_0;
  MatrixKernel q3_k;
  MatrixKernel iq4_nl, mxfp4;  // the 4-bit lookup types with IQ4_XS (cpu_kernels_iq4.h)
  void (*quantize_q8)(const float* x, uint8_t* out, int64_t n, int32_t bias);
  void (*quantize_q8k)(const float* x, BlockQ8K* out, int64_t n);
  void (*attend)(const AttentionArgs& args);
  PeakLoop peak;
  double (*log_sum_exp)(const float* x, int64_t n);
};

const KernelTable& portable_kernels();
const KernelTable& avx2_kernels();
const KernelTable& avx512_kernels();
const KernelTable& avx512_emulated_kernels();

// GGML's block layouts.
struct BlockQ8_0 {
  uint16_t d;     // f16 scale
  int8_t q[32];
};
struct BlockQ4_0 {
  uint16_t d;     // f16 scale
  uint8_t q[16];  // value j in the low nibble of q[j], value j + 16 in the high nibble; minus 8
};
struct BlockQ4_K {
  uint16_t d;          // f16 scale of the sub-block scales
  uint16_t dmin;       // f16 scale of the sub-block minimums
  uint8_t scales[12];  // 8 six-bit scales and 8 six-bit minimums, packed
  uint8_t q[128];      // 64-value groups of 32 bytes: sub-block 2g in low nibbles, 2g + 1 high
};
struct BlockQ6_K {
  uint8_t ql[128];    // low 4 bits
  uint8_t qh[64];     // high 2 bits
  int8_t scales[16];  // one per 16 values
  uint16_t d;         // f16 super-block scale
};
struct BlockQ4_1 {
  uint16_t d;     // f16 scale
  uint16_t m;     // f16 minimum
  uint8_t q[16];  // as Q4_0's; value = q · d + m
};
struct BlockQ5_0 {
  uint16_t d;     // f16 scale
  uint8_t qh[4];  // fifth bit of value j in bit j (little-endian)
  uint8_t q[16];  // low 4 bits as Q4_0's; value = (q - 16) · d
};
struct BlockQ5_1 {
  uint16_t d;     // f16 scale
  uint16_t m;     // f16 minimum
  uint8_t qh[4];  // fifth bit of value j in bit j (little-endian)
  uint8_t q[16];  // low 4 bits as Q4_0's; value = q · d + m
};
struct BlockQ5_K {
  uint16_t d;          // as Q4_K
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];      // fifth bit of value l of sub-block j in bit j of qh[l]
  uint8_t q[128];      // low 4 bits as Q4_K's
};
struct BlockIQ4_XS {
  uint16_t d;           // f16 super-block scale
  uint16_t scales_h;    // top 2 bits of the 8 six-bit sub-block scales
  uint8_t scales_l[4];  // low 4 bits, two per byte
  uint8_t q[128];       // per sub-block 16 bytes of nibbles as Q4_0's, indexing the IQ4 levels
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
struct BlockQ2_K {
  uint8_t scales[16];  // per 16 values: scale in the low nibble, minimum in the high
  uint8_t q[64];       // 2-bit values: 128-value halves of 32 bytes, four shifts each
  uint16_t d;          // f16 scale of the scales
  uint16_t dmin;       // f16 scale of the minimums
};
struct BlockQ3_K {
  uint8_t hmask[32];   // third bit of value l + 32 · c in bit c of hmask[l] (clear: minus 4)
  uint8_t q[64];       // low 2 bits, laid out as Q2_K's
  uint8_t scales[12];  // 16 six-bit scales (stored plus 32), packed (q3_k_scales)
  uint16_t d;          // f16 super-block scale
};
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockIQ4_XS) == 136 && sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ6_K) == 210);

// Bytes of one block column of a repacked panel of P rows (docs/cpu_backend.md):
//   Q4_0  per 32 values:  f16 d[P], then 4 vectors of P × 4 nibble bytes
//   Q8_0  per 32 values:  f16 d[P], then 8 vectors of P × 4 bytes (+128 on VNNI levels)
//   Q4_1  per 32 values:  f16 d[P], f16 m[P], then 4 vectors of P × 4 nibble bytes (as Q4_0's)
//   Q5_0  per 32 values:  f16 d[P], u32 fifth bits[P] (bit c of byte j: value 4c + j), then
//                         4 vectors of P × 4 nibble bytes (as Q4_0's)
//   Q5_1  per 32 values:  f16 d[P], f16 m[P], then as Q5_0's: fifth bits[P], 4 nibble vectors
//   Q5_K  per 256 values: f16 d[P], f16 -dmin[P], u8 scale[8][P], u8 minimum[8][P], then per
//                         32-value sub-block as Q5_0's: fifth bits[P], 4 nibble vectors
//   Q2_K  per 256 values: f16 d[P], f16 -dmin[P], u8 scale pairs [8][P][2], u8 minimum pairs
//                         [8][P][2], then per 16-value sub-block one vector of P × 4 bytes of
//                         2-bit values (byte k: values k, 4 + k, 8 + k, 12 + k)
//   Q3_K  per 256 values: f16 d[P], s8 scale pairs [8][P][2] (the scales minus 32), then per
//                         32-value sub-block pair (2k, 2k + 1) one vector of P × 4 bytes of
//                         third bits (byte i, bit 4 · h + c: the third bit of value 4c + i of
//                         sub-block 2k + h) and two crumb vectors as Q2_K's (3.56 bits a value)
//   IQ4_NL per 32 values:  f16 d[P], then 4 vectors of P × 4 nibble bytes (as Q4_0's; the
//                         nibbles index kIq4Levels)
//   MXFP4 per 32 values:   bf16 2^(e - 128)[P] (half the E8M0 scale, exact in bf16), then 4
//                         vectors of P × 4 nibble bytes (as Q4_0's, indexing kMxfp4Values)
//   IQ4_XS per 256 values: f16 d[P], s8 (scale - 32) pairs [4][P][2], then per 32-value
//                         sub-block 4 vectors of P × 4 nibble bytes (as Q4_0's)
//   Q4_K  per 256 values: f16 d[P], f16 -dmin[P], u8 scale pairs [4][P][2], u8 minimum
//                         pairs [4][P][2], then 32 vectors of P × 4 nibble bytes
//   Q6_K  per 256 values: f16 d[P], s8 scale pairs [8][P][2], then per 16-value sub-block
//                         3 vectors of P × 4 bytes (two of low nibbles, one of high bits)
constexpr size_t q4_0_panel_block(int P) { return 18 * static_cast<size_t>(P); }
constexpr size_t q8_0_panel_block(int P) { return 34 * static_cast<size_t>(P); }
constexpr size_t q4_1_panel_block(int P) { return 20 * static_cast<size_t>(P); }
constexpr size_t q5_0_panel_block(int P) { return 22 * static_cast<size_t>(P); }
constexpr size_t q5_1_panel_block(int P) { return 24 * static_cast<size_t>(P); }
constexpr size_t q5_k_panel_block(int P) { return 180 * static_cast<size_t>(P); }
constexpr size_t iq4_nl_panel_block(int P) { return 18 * static_cast<size_t>(P); }
constexpr size_t mxfp4_panel_block(int P) { return 18 * static_cast<size_t>(P); }
constexpr size_t iq4_xs_panel_block(int P) { return 138 * static_cast<size_t>(P); }
constexpr size_t q2_k_panel_block(int P) { return 100 * static_cast<size_t>(P); }
constexpr size_t q3_k_panel_block(int P) { return 114 * static_cast<size_t>(P); }
constexpr size_t q4_k_panel_block(int P) { return 148 * static_cast<size_t>(P); }
constexpr size_t q6_k_panel_block(int P) { return 210 * static_cast<size_t>(P); }

}  // namespace specula::kernels
