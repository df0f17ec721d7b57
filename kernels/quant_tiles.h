// The device layout of quantized weight matrices, shared by the host code that repacks GGUF
// blocks into it (engine/compute/device_plan.cpp) and the kernels that read it
// (qmatmul.cu, embedding.cu). Plain C++: every function here also runs on the host, where
// the tests walk the layout exactly as a kernel does.
//
// Why a layout of our own: GGUF blocks are 18, 34, 144 or 210 bytes, so a row cannot be read
// with 16-byte loads, and the values a tensor-core fragment needs are scattered over each
// block. Here a matrix is cut into tiles of 16 rows x 256 columns (one mma.m16n8k16 M, one
// K-quant super-block), and within a tile each of a warp's 32 lanes finds the quants of its
// A fragments for all 16 k-steps of the tile in a few consecutive 16-byte words, coalesced
// across the warp:
//
//   lane = 4 g + t (g = lane / 4, t = lane % 4) holds, for k-step s of 64-column chunk c,
//   rows g and g + 8 at columns 64 c + 16 s + 4 t + j, j = 0..3.
//
// That is the mma's own fragment with its 16 k indices permuted within the step (k 2t, 2t+1,
// 2t+8, 2t+9 of the instruction hold columns 4t .. 4t+3): the activations are permuted the
// same way, so the product is unchanged, and a lane's activations are 4 consecutive values.
//
// A tile row (16 weight rows, all their tiles) is one contiguous panel of the image:
//   quants  (n_ktiles, quant words per lane, 32 lanes) 16-byte words
//   scales  (n_ktiles, 16 rows) 16 bytes: the group scales of the row's 256 values
//   supers  (n_ktiles, 16 rows) super_bytes: the super-block scales, or Q4_1/Q5_1's minimums
// Rows past the matrix and columns past a multiple of 256 are zero weights (scale 0).
//
// Codes stored, per value: a byte (Q8_0 and IQ4_XS: the value's integer plus 128), a nibble
// (Q4_0, Q4_1, Q4_K, Q2_K: the code; a nibble plane), or a 5- or 6-bit code split into its low
// nibble (a nibble plane laid out as Q4's) and its top bits (a 2-bit plane: Q5_1, Q5_K, Q6_K).
// The value is, as dequantize_row computes it in float (every product of a code and a scale
// is exact in float, so only the last addition rounds, fused or not):
//   Q8_0    (code - 128) * d[32-group]          scales: 8 fp16 d
//   Q4_0    (code - 8) * d[32-group]            scales: 8 fp16 d
//   Q4_1    code * d[32-group] + m[32-group]    scales: 8 fp16 d; super: 8 fp16 m
//   Q5_1    as Q4_1, 5-bit codes
//   Q4_K    (d * sc[g32]) * code - dmin * m[g32] scales: 8 sc then 8 m bytes; super: fp16 d, dmin
//   Q5_K    as Q4_K, 5-bit codes
//   Q2_K    (d * sc[g16]) * code - dmin * m[g16] scales: 16 bytes sc | m << 4; super: fp16 d, dmin
//   Q6_K    (d * sc[g16]) * (code - 32)          scales: 16 int8 sc; super: fp16 d, 0
//   IQ4_XS  (d * sc[g32]) * (code - 128)         scales: 8 int8 sc (the stored 6 bits - 32);
//                                                super: fp16 d, 0; the code is 128 + the level
//                                                the nibble names (kvalues_iq4nl)
// The formats are the GGUF types the device keeps quantized; Q5_0, IQ4_NL and MXFP4 are
// written into Q8_0's tiles and Q3_K into Q6_K's as the device's units are written
// (engine/compute/device_plan.cpp), every value kept.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

#include "host_device.h"

namespace specula::tiles {

constexpr int kRows = 16;      // weight rows per tile
constexpr int kCols = 256;     // columns per tile
constexpr int kLanes = 32;
constexpr int kChunks = 4;     // 64-column chunks per tile
constexpr int kSteps = 4;      // 16-column mma k-steps per chunk
constexpr int kScaleBytes = 16;     // per row per tile
constexpr int kMaxSuperBytes = 16;  // per row per tile, the largest super record (Q4_1's minimums)

enum class Format : int { Q8_0, Q4_0, Q4_1, Q5_1, Q4_K, Q5_K, Q2_K, Q6_K, IQ4_XS };
constexpr Format kFormats[] = {Format::Q8_0, Format::Q4_0, Format::Q4_1, Format::Q5_1, Format::Q4_K,
                               Format::Q5_K, Format::Q2_K, Format::Q6_K, Format::IQ4_XS};

// How a format stores its codes: bytes, nibbles, or nibbles plus a 2-bit plane of top bits.
enum class Planes : int { Bytes, Nibbles, NibblesAndCrumbs };
SPECULA_HD constexpr Planes planes(Format f) {
  return f == Format::Q8_0 || f == Format::IQ4_XS                      ? Planes::Bytes
         : f == Format::Q5_1 || f == Format::Q5_K || f == Format::Q6_K ? Planes::NibblesAndCrumbs
                                                                       : Planes::Nibbles;
}
// 16-byte quant words per lane per tile: 32 codes of 8 bits per chunk, 32 nibbles per chunk,
// or 4 nibble words and 2 words of 2-bit fields.
SPECULA_HD constexpr int quant_words(Format f) {
  return planes(f) == Planes::Bytes ? 8 : planes(f) == Planes::NibblesAndCrumbs ? 6 : 4;
}
SPECULA_HD constexpr int quant_tile_bytes(Format f) { return quant_words(f) * kLanes * 16; }
SPECULA_HD constexpr bool has_supers(Format f) { return f != Format::Q8_0 && f != Format::Q4_0; }
// Bytes of a row's super record per tile: Q4_1's and Q5_1's 8 fp16 minimums, the K-quants'
// and IQ4_XS's fp16 d and dmin (or 0).
SPECULA_HD constexpr int super_bytes(Format f) {
  return !has_supers(f) ? 0 : f == Format::Q4_1 || f == Format::Q5_1 ? 16 : 4;
}
SPECULA_HD constexpr int tile_bytes(Format f) { return quant_tile_bytes(f) + kRows * (kScaleBytes + super_bytes(f)); }
// Values per scale group: 32, or 16 for Q2_K and Q6_K.
SPECULA_HD constexpr int group_size(Format f) { return f == Format::Q6_K || f == Format::Q2_K ? 16 : 32; }
// Whether a group's value has a minimum term (its sum of activations is needed too).
SPECULA_HD constexpr bool has_minimum(Format f) {
  return f == Format::Q4_1 || f == Format::Q5_1 || f == Format::Q4_K || f == Format::Q5_K || f == Format::Q2_K;
}

// Where a lane's fragment value sits in its tile.
SPECULA_HD constexpr int lane_row(int lane, int half) { return lane / 4 + 8 * half; }
SPECULA_HD constexpr int lane_col(int lane, int chunk, int step, int j) {
  return 64 * chunk + 16 * step + 4 * (lane % 4) + j;
}
// The inverse: the lane, fragment half (row g or g + 8) and j of (row, col) within a tile.
struct Slot {
  int lane, chunk, step, half, j;
};
SPECULA_HD constexpr Slot slot_of(int row, int col) {
  return {4 * (row % 8) + (col % 16) / 4, col / 64, (col % 64) / 16, row / 8, col % 4};
}

// An mma A register holds two fp16 values: register r (0..3) of a step holds rows
// g (r even) or g + 8 (r odd) at j = 2 (r / 2) + e for its elements e = 0 (low 16 bits)
// and e = 1 (high 16 bits).
SPECULA_HD constexpr int reg_of(int half, int j) { return 2 * (j / 2) + half; }
SPECULA_HD constexpr int elem_of(int j) { return j % 2; }

// Code pairs of register r as the low and high 16 bits of a word: the kernels OR the pair
// into 0x64006400 (1024.0 in both fp16 halves) to get 1024 + code exactly.
//   nibble words (the nibble formats, the low plane of the 5- and 6-bit ones): word s of the
//   chunk, nibbles r and r + 4
SPECULA_HD constexpr uint32_t nibble_pair(uint32_t word, int r) { return (word >> (4 * r)) & 0x000f000fu; }
//   2-bit words (the top bits of 5- and 6-bit codes): word (2 chunk + step / 2), fields at 2 r + 8 (step % 2) + 16 e
SPECULA_HD constexpr uint32_t crumb_pair(uint32_t word, int r, int step) {
  return (word >> (2 * r + 8 * (step % 2))) & 0x00030003u;
}
//   byte words (Q8_0, IQ4_XS): word (2 step + r / 2) of the chunk, bytes h and h + 2 (h = r % 2)
SPECULA_HD constexpr uint32_t byte_pair(uint32_t word, int r) {
  return (word >> (8 * (r % 2))) & 0x00ff00ffu;
}

// The code pair of register r at (chunk, step), from the lane's quant words of its tile as
// 32-bit words (4 per 16-byte word): what the kernels decode, and the host tests walk.
SPECULA_HD uint32_t fragment_codes(Format f, const uint32_t* words, int chunk, int step, int r) {
  switch (planes(f)) {
    case Planes::Bytes: return byte_pair(words[4 * (2 * chunk + step / 2) + 2 * (step % 2) + r / 2], r);
    case Planes::NibblesAndCrumbs:
      return nibble_pair(words[4 * chunk + step], r) |
             crumb_pair(words[16 + 4 * (chunk / 2) + 2 * (chunk % 2) + step / 2], r, step) << 4;
    case Planes::Nibbles: break;
  }
  return nibble_pair(words[4 * chunk + step], r);
}
// The code of a zero value, subtracted from every code: 128 (bytes), 8 (Q4_0), 32 (Q6_K), else 0.
SPECULA_HD constexpr int code_offset(Format f) {
  return planes(f) == Planes::Bytes ? 128 : f == Format::Q4_0 ? 8 : f == Format::Q6_K ? 32 : 0;
}
// The scale group (index into the row's scale record) of (chunk, step).
SPECULA_HD constexpr int group_of(Format f, int chunk, int step) {
  return group_size(f) == 16 ? 4 * chunk + step : 2 * chunk + step / 2;
}

// Bit position of a code within its word, and which 16-byte word of the lane it is in
// (counting the lane's quant words of the tile from 0), for the host's repacking.
struct CodeAt {
  int word;   // 0 .. quant_words - 1
  int dword;  // 32-bit word within it, 0..3
  int shift;  // bit offset of the code's field
};
SPECULA_HD constexpr CodeAt nibble_at(int chunk, int step, int half, int j) {
  return {chunk, step, 4 * reg_of(half, j) + 16 * elem_of(j)};
}
SPECULA_HD constexpr CodeAt byte_at(int chunk, int step, int half, int j) {
  // register r's pair is in 32-bit word 2 step + r / 2 of the chunk's 8: 16-byte word
  // 2 chunk + step / 2, dword 2 (step % 2) + r / 2
  return {2 * chunk + step / 2, 2 * (step % 2) + reg_of(half, j) / 2, 8 * (reg_of(half, j) % 2) + 16 * elem_of(j)};
}
// The 2-bit plane follows the 4 nibble words: 16-byte word 4 + chunk / 2.
SPECULA_HD constexpr CodeAt crumb_at(int chunk, int step, int half, int j) {
  return {4 + chunk / 2, 2 * (chunk % 2) + step / 2, 2 * reg_of(half, j) + 8 * (step % 2) + 16 * elem_of(j)};
}

// Byte offsets within a panel (one tile row) of n_ktiles tiles.
SPECULA_HD constexpr int64_t quant_offset(Format f, int64_t ktile, int word, int lane) {
  return (ktile * quant_words(f) + word) * (kLanes * 16) + lane * 16;
}
SPECULA_HD constexpr int64_t scale_offset(Format f, int64_t n_ktiles, int64_t ktile, int row) {
  return n_ktiles * quant_tile_bytes(f) + (ktile * kRows + row) * kScaleBytes;
}
SPECULA_HD constexpr int64_t super_offset(Format f, int64_t n_ktiles, int64_t ktile, int row) {
  return n_ktiles * (quant_tile_bytes(f) + kRows * kScaleBytes) + (ktile * kRows + row) * super_bytes(f);
}

// Shape of a matrix in this layout.
struct Shape {
  Format format;
  int64_t rows, cols;  // of the matrix (cols a multiple of the group size)
  SPECULA_HD constexpr int64_t row_tiles() const { return (rows + kRows - 1) / kRows; }
  SPECULA_HD constexpr int64_t ktiles() const { return (cols + kCols - 1) / kCols; }
  SPECULA_HD constexpr int64_t panel_bytes() const { return ktiles() * tile_bytes(format); }
  SPECULA_HD constexpr int64_t bytes() const { return row_tiles() * panel_bytes(); }
};

SPECULA_HD uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

// fp16 bits to float, exactly; products and differences rounded once, never fused (the
// device compiler would contract a * b - c), as the host computes them.
#if defined(__CUDA_ARCH__)
__device__ __forceinline__ float half_bits_to_float(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
#else
inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);  // subnormal: m * 2^-24, exact
  if (exponent != 0) {
    const uint32_t bits = exponent == 31 ? 0x7f800000u | mantissa << 13 : (exponent + 112) << 23 | mantissa << 13;
    std::memcpy(&magnitude, &bits, 4);
  }
  uint32_t bits;
  std::memcpy(&bits, &magnitude, 4);
  bits |= sign;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}
inline float mul_rn(float a, float b) { return a * b; }
inline float sub_rn(float a, float b) { return a - b; }
inline float add_rn(float a, float b) { return a + b; }
#endif

SPECULA_HD float half_at(const uint8_t* record, int i) {
  return half_bits_to_float(static_cast<uint16_t>(record[2 * i] | record[2 * i + 1] << 8));
}

// The value of `code` in scale group `group` of a row's tile, from the row's scale record
// and super-block record, computed as dequantize_row computes it (bit for bit).
SPECULA_HD float tile_value(Format f, int code, const uint8_t* scales, const uint8_t* super, int group) {
  const float q = static_cast<float>(code - code_offset(f));
  switch (f) {
    case Format::Q8_0:
    case Format::Q4_0: return mul_rn(q, half_at(scales, group));
    case Format::Q4_1:
    case Format::Q5_1: return add_rn(mul_rn(q, half_at(scales, group)), half_at(super, group));
    case Format::Q4_K:
    case Format::Q5_K: {
      const float d1 = mul_rn(half_at(super, 0), static_cast<float>(scales[group]));
      const float m1 = mul_rn(half_at(super, 1), static_cast<float>(scales[8 + group]));
      return sub_rn(mul_rn(d1, q), m1);
    }
    case Format::Q2_K: {
      const float d1 = mul_rn(half_at(super, 0), static_cast<float>(scales[group] & 0xF));
      const float m1 = mul_rn(half_at(super, 1), static_cast<float>(scales[group] >> 4));
      return sub_rn(mul_rn(d1, q), m1);
    }
    case Format::Q6_K:
    case Format::IQ4_XS:
      return mul_rn(mul_rn(half_at(super, 0), static_cast<float>(static_cast<int8_t>(scales[group]))), q);
  }
  return 0.0f;
}

// The value at (row, col) of a matrix in this layout, one at a time: for embedding rows and
// checks.
SPECULA_HD float element(const Shape& shape, const uint8_t* image, int64_t row, int64_t col) {
  const Format f = shape.format;
  const uint8_t* panel = image + (row / kRows) * shape.panel_bytes();
  const int64_t kt = col / kCols;
  const int r = static_cast<int>(row % kRows), c = static_cast<int>(col % kCols);
  const Slot at = slot_of(r, c);
  const auto code = [&](CodeAt where) {
    const uint32_t word = load_u32(panel + quant_offset(f, kt, where.word, at.lane) + 4 * where.dword);
    return static_cast<int>(word >> where.shift);
  };
  int value_code = 0;
  switch (planes(f)) {
    case Planes::Bytes: value_code = code(byte_at(at.chunk, at.step, at.half, at.j)) & 0xff; break;
    case Planes::NibblesAndCrumbs:
      value_code = (code(nibble_at(at.chunk, at.step, at.half, at.j)) & 0xf) |
                   (code(crumb_at(at.chunk, at.step, at.half, at.j)) & 0x3) << 4;
      break;
    case Planes::Nibbles: value_code = code(nibble_at(at.chunk, at.step, at.half, at.j)) & 0xf; break;
  }
  const uint8_t* super = has_supers(f) ? panel + super_offset(f, shape.ktiles(), kt, r) : nullptr;
  return tile_value(f, value_code, panel + scale_offset(f, shape.ktiles(), kt, r), super, c / group_size(f));
}

}  // namespace specula::tiles
