// The kernel driver: SIMD detection, repacking into panels, activation quantization and
// the matmul entry point; and the portable kernels (the templates on PortableVec).
#include "compute/cpu_kernels.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "compute/cpu_kernel_table.h"
#include "compute/cpu_vec_portable.h"
#include "compute/cpu_kernel_templates.h"
#include "common/thread_pool.h"

namespace specula {

namespace kernels {

const KernelTable& portable_kernels() {
  static const KernelTable table = make_kernel_table<PortableVec>();
  return table;
}

namespace {

const KernelTable& kernel_table(SimdLevel level) {
  switch (level) {
    case SimdLevel::Portable:
      return portable_kernels();
    case SimdLevel::Avx2:
      return avx2_kernels();
    case SimdLevel::Avx512:
      return avx512_kernels();
    case SimdLevel::Avx512Emulated:
      return avx512_emulated_kernels();
  }
  return portable_kernels();
}

// Unpacks a Q4_K block's eight (scale, minimum) pairs, as GGML's get_scale_min_k4.
void q4_k_scales(const uint8_t* s, uint8_t* scale, uint8_t* minimum) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scale[j] = s[j] & 63;
      minimum[j] = s[j + 4] & 63;
    } else {
      scale[j] = static_cast<uint8_t>((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
      minimum[j] = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
  }
}

// A Q6_K block's 256 values as unsigned 6-bit numbers (the value plus 32), in order.
void q6_k_values(const BlockQ6_K& block, uint8_t* q) {
  for (int i = 0; i < 256; ++i) {
    const int half = i / 128, l = i % 32, quarter = (i % 128) / 32;
    const uint8_t ql = block.ql[64 * half + l + (quarter % 2) * 32];
    const int low = quarter < 2 ? (ql & 0xF) : (ql >> 4);
    const int high = (block.qh[32 * half + l] >> (2 * quarter)) & 3;
    q[i] = static_cast<uint8_t>(low | (high << 4));
  }
}

void put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// Writes block column b of a panel for row r (of P) from `row`, the row's bytes in GGML's
// layout; `out` is the panel's block column (the layouts of cpu_kernel_table.h).
void pack_q4_0(const uint8_t* row, int64_t b, int r, int P, uint8_t* out) {
  const auto& block = reinterpret_cast<const BlockQ4_0*>(row)[b];
  put16(out + 2 * r, block.d);
  for (int v = 0; v < 4; ++v) std::memcpy(out + 2 * P + 4 * P * v + 4 * r, block.q + 4 * v, 4);
}

void pack_q4_1(const uint8_t* row, int64_t b, int r, int P, uint8_t* out) {
  const auto& block = reinterpret_cast<const BlockQ4_1*>(row)[b];
  put16(out + 2 * r, block.d);
  put16(out + 2 * P + 2 * r, block.m);
  for (int v = 0; v < 4; ++v) std::memcpy(out + 4 * P + 4 * P * v + 4 * r, block.q + 4 * v, 4);
}

// 32 values 0..31 (value i in q[i]) as a 5-bit panel's share of row r: the fifth-bit word
// (bit c of byte j: value 4c + j, the vector the kernel rebuilds with one shift) at `out`,
// then 4 vectors of nibbles as Q4_0's (low: values 4v..4v+3, high: 16 + 4v..).
void pack_5bit(const uint8_t* q, int r, int P, uint8_t* out) {
  uint8_t h[4] = {};
  for (int i = 0; i < 32; ++i) h[i % 4] = static_cast<uint8_t>(h[i % 4] | (q[i] >> 4) << (i / 4));
  std::memcpy(out + 4 * r, h, 4);
  for (int v = 0; v < 4; ++v) {
    for (int j = 0; j < 4; ++j) {
      out[4 * P + 4 * P * v + 4 * r + j] = static_cast<uint8_t>((q[4 * v + j] & 0xF) | (q[16 + 4 * v + j] & 0xF) << 4);
    }
  }
}

// A Q5_0 or Q5_1 block's 32 values 0..31 in order.
void q5_values(const uint8_t* qh_bytes, const uint8_t* nibbles, uint8_t* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<uint8_t>((nibbles[j] & 0xF) | ((qh >> j) & 1) << 4);
    q[j + 16] = static_cast<uint8_t>((nibbles[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
  }
}

void pack_q5_0(const uint8_t* row, int64_t b, int r, int P, uint8_t* out) {
  const auto& block = reinterpret_cast<const BlockQ5_0*>(row)[b];
  put16(out + 2 * r, block.d);
  uint8_t q[32];
  q5_values(block.qh, block.q, q);
  pack_5bit(q, r, P, out + 2 * P);
}

void pack_q5_1(const uint8_t* row, int64_t b, int r, int P, uint8_t* out) {
  const auto& block = reinterpret_cast<const BlockQ5_1*>(row)[b];
  put16(out + 2 * r, block.d);
  put16(out + 2 * P + 2 * r, block.m);
  uint8_t q[32];
  q5_values(block.qh, block.q, q);
  pack_5bit(q, r, P, out + 4 * P);
}

// Q5_K: d, -dmin and the unpacked 6-bit scales and minimums (the kernel multiplies them,
// exactly), then each 32-value sub-block as a Q5_1 block's values.
void pack_q5_k(const uint8_t* row, int64_t b, int r, int P, uint8_t* out) {
  const auto& block = reinterpret_cast<const BlockQ5_K*>(row)[b];
  put16(out + 2 * r, block.d);
  put16(out + 2 * P + 2 * r, static_cast<uint16_t>(block.dmin ^ 0x8000));  // -dmin
  uint8_t scale[8], minimum[8];
  q4_k_scales(block.scales, scale, minimum);
  for (int j = 0; j < 8; ++j) {
    out[4 * P + P * j + r] = scale[j];
    out[12 * P + P * j + r] = minimum[j];
    uint8_t q[32];
    for (int l = 0; l < 32; ++l) {
      const uint8_t low = j % 2 ? block.q[32 * (j / 2) + l] >> 4 : block.q[32 * (j / 2) + l] & 0xF;
      q[l] = static_cast<uint8_t>(low | ((block.qh[l] >> j) & 1) << 4);
    }
    pack_5bit(q, r, P, out + 20 * P + 20 * P * j);
  }
}

// IQ4_XS keeps its nibbles (Q4_0's order per 32-value sub-block) and its 6-bit scales as
// signed bytes scale - 32, in pairs as Q4_K's panel keeps its scales.
void pack_iq4_xs(const uint8_t* row, int64_t b, int r, int P, uint8_t* out) {
  const auto& block = reinterpret_cast<const BlockIQ4_XS*>(row)[b];
  put16(out + 2 * r, block.d);
  for (int j = 0; j < 8; ++j) {
    const int scale = ((block.scales_l[j / 2] >> 4 * (j % 2)) & 0xF) | (((block.scales_h >> 2 * j) & 3) << 4);
    out[2 * P + 2 * P * (j / 2) + 2 * r + j % 2] = static_cast<uint8_t>(scale - 32);
    for (int v = 0; v < 4; ++v) std::memcpy(out + 10 * P + 16 * P * j + 4 * P * v + 4 * r, block.q + 16 * j + 4 * v, 4);
  }
}

// MXFP4 (GGML's block: the E8M0 exponent byte, then 16 bytes of nibbles as Q4_0's) with its
// half scale 2^(e - 128) as a bf16: the f32's top 16 bits, the rest being zero for every e.
void pack_mxfp4(const uint8_t* row, int64_t b, int r, int P, uint8_t* out) {
  const uint8_t* block = row + 17 * b;
  put16(out + 2 * r, static_cast<uint16_t>(std::bit_cast<uint32_t>(mxfp4_half_scale(block[0])) >> 16));
  for (int v = 0; v < 4; ++v) std::memcpy(out + 2 * P + 4 * P * v + 4 * r, block + 1 + 4 * v, 4);
}

// Q2_K: value i of 16-value sub-block s lies in half s / 8, shift (s % 8) / 2, 16-byte
// group s % 2 of the stored crumbs (GGML's dequantize_row_q2_K order).
void pack_q2_k(const uint8_t* row, int64_t b, int r, int P, uint8_t* out) {
  const auto& block = reinterpret_cast<const BlockQ2_K*>(row)[b];
  put16(out + 2 * r, block.d);
  put16(out + 2 * P + 2 * r, static_cast<uint16_t>(block.dmin ^ 0x8000));  // -dmin
  for (int k = 0; k < 8; ++k) {
    for (int h = 0; h < 2; ++h) {
      out[4 * P + 2 * P * k + 2 * r + h] = block.scales[2 * k + h] & 0xF;
      out[20 * P + 2 * P * k + 2 * r + h] = block.scales[2 * k + h] >> 4;
    }
  }
  for (int s = 0; s < 16; ++s) {
    const int half = s / 8, shift = 2 * ((s % 8) / 2), group = s % 2;
    uint8_t* v = out + 36 * P + 4 * P * s + 4 * r;
    for (int k = 0; k < 4; ++k) {
      uint8_t byte = 0;
      for (int c = 0; c < 4; ++c) {
        const int value = (block.q[32 * half + 16 * group + 4 * c + k] >> shift) & 3;
        byte = static_cast<uint8_t>(byte | value << (2 * c));
      }
      v[k] = byte;
    }
  }
}

// Q3_K: the values plus 4 (0..7) in dequantize_q3_k's order, their low 2 bits in Q2_K's crumb
// vectors, their third bits gathered per sub-block pair into one vector whose bit 4 · h + c of
// byte i belongs to crumb c of byte i of the pair's sub-block h (the kernel's shift and and).
void pack_q3_k(const uint8_t* row, int64_t b, int r, int P, uint8_t* out) {
  const auto& block = reinterpret_cast<const BlockQ3_K*>(row)[b];
  put16(out + 2 * r, block.d);
  int8_t scales[16];
  q3_k_scales(block.scales, scales);
  for (int j = 0; j < 16; ++j) out[2 * P + 2 * P * (j / 2) + 2 * r + j % 2] = static_cast<uint8_t>(scales[j] - 32);
  uint8_t u[256];
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, shift = (e % 128) / 32, l = e % 32;
    const int low = (block.q[32 * half + l] >> (2 * shift)) & 3;
    const int third = (block.hmask[l] >> (e / 32)) & 1;
    u[e] = static_cast<uint8_t>(low | third << 2);
  }
  for (int k = 0; k < 8; ++k) {
    uint8_t* v = out + 18 * P + 12 * P * k + 4 * r;
    for (int i = 0; i < 4; ++i) {
      uint8_t thirds = 0;
      for (int h = 0; h < 2; ++h) {
        uint8_t crumbs = 0;
        for (int c = 0; c < 4; ++c) {
          const uint8_t value = u[16 * (2 * k + h) + 4 * c + i];
          crumbs = static_cast<uint8_t>(crumbs | (value & 3) << (2 * c));
          thirds = static_cast<uint8_t>(thirds | (value >> 2) << (4 * h + c));
        }
        v[4 * P + 4 * P * h + i] = crumbs;
      }
      v[i] = thirds;
    }
  }
}

template <bool kBiased>
void pack_q8_0(const uint8_t* row, int64_t b, int r, int P, uint8_t* out) {
  const auto& block = reinterpret_cast<const BlockQ8_0*>(row)[b];
  put16(out + 2 * r, block.d);
  for (int c = 0; c < 8; ++c) {
    uint8_t* dst = out + 2 * P + 4 * P * c + 4 * r;
    std::memcpy(dst, block.q + 4 * c, 4);
    if (kBiased) {
      for (int i = 0; i < 4; ++i) dst[i] ^= 0x80;  // w + 128 as an unsigned byte
    }
  }
}

void pack_q4_k(const uint8_t* row, int64_t b, int r, int P, uint8_t* out) {
  const auto& block = reinterpret_cast<const BlockQ4_K*>(row)[b];
  put16(out + 2 * r, block.d);
  put16(out + 2 * P + 2 * r, static_cast<uint16_t>(block.dmin ^ 0x8000));  // -dmin
  uint8_t scale[8], minimum[8];
  q4_k_scales(block.scales, scale, minimum);
  for (int k = 0; k < 4; ++k) {
    out[4 * P + 2 * P * k + 2 * r] = scale[2 * k];
    out[4 * P + 2 * P * k + 2 * r + 1] = scale[2 * k + 1];
    out[12 * P + 2 * P * k + 2 * r] = minimum[2 * k];
    out[12 * P + 2 * P * k + 2 * r + 1] = minimum[2 * k + 1];
  }
  for (int v = 0; v < 32; ++v) std::memcpy(out + 20 * P + 4 * P * v + 4 * r, block.q + 4 * v, 4);
}

void pack_q6_k(const uint8_t* row, int64_t b, int r, int P, uint8_t* out) {
  const auto& block = reinterpret_cast<const BlockQ6_K*>(row)[b];
  put16(out + 2 * r, block.d);
  for (int k = 0; k < 8; ++k) {
    out[2 * P + 2 * P * k + 2 * r] = static_cast<uint8_t>(block.scales[2 * k]);
    out[2 * P + 2 * P * k + 2 * r + 1] = static_cast<uint8_t>(block.scales[2 * k + 1]);
  }
  uint8_t q[256];
  q6_k_values(block, q);
  for (int j = 0; j < 16; ++j) {  // chunks a, b, c, d of the sub-block: values 16j + 4i ..
    uint8_t* v = out + 18 * P + 12 * P * j + 4 * r;
    for (int i = 0; i < 4; ++i) {
      const uint8_t qa = q[16 * j + i], qb = q[16 * j + 4 + i];
      const uint8_t qc = q[16 * j + 8 + i], qd = q[16 * j + 12 + i];
      v[i] = static_cast<uint8_t>((qa & 0xF) | (qb & 0xF) << 4);
      v[4 * P + i] = static_cast<uint8_t>((qc & 0xF) | (qd & 0xF) << 4);
      v[8 * P + i] = static_cast<uint8_t>((qa >> 4) | (qb >> 4) << 2 | (qc >> 4) << 4 | (qd >> 4) << 6);
    }
  }
}

// 64-byte aligned, zeroed storage for repacked panels, backed by transparent huge pages
// where the system offers them (fewer TLB misses while streaming the weights).
std::shared_ptr<uint8_t[]> allocate_panels(size_t bytes) {
  const size_t size = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, size);
  if (p == nullptr) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
  constexpr uintptr_t kPage = 4096;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kPage - 1) / kPage * kPage;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + size) / kPage * kPage;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#endif
  std::memset(p, 0, size);
  return std::shared_ptr<uint8_t[]>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
}

// Bytes of one panel's block of 32 or 256 columns, and the function writing row r's share.
struct QuantPacking {
  size_t block_bytes = 0;
  void (*pack)(const uint8_t* row, int64_t b, int r, int P, uint8_t* out) = nullptr;
};
int quant_panel_rows(TensorType type, const KernelTable& table) {
  return type == TensorType::Q4_K ? table.q4_k_rows : table.lanes;
}
QuantPacking quant_packing(TensorType type, const KernelTable& table) {
  const int P = quant_panel_rows(type, table);
  switch (type) {
    case TensorType::Q4_0: return {q4_0_panel_block(P), pack_q4_0};
    case TensorType::Q4_1: return {q4_1_panel_block(P), pack_q4_1};
    case TensorType::Q5_0: return {q5_0_panel_block(P), pack_q5_0};
    case TensorType::Q5_1: return {q5_1_panel_block(P), pack_q5_1};
    case TensorType::Q5_K: return {q5_k_panel_block(P), pack_q5_k};
    case TensorType::IQ4_XS: return {iq4_xs_panel_block(P), pack_iq4_xs};
    case TensorType::IQ4_NL: return {iq4_nl_panel_block(P), pack_q4_0};  // Q4_0's block layout
    case TensorType::MXFP4: return {mxfp4_panel_block(P), pack_mxfp4};
    case TensorType::Q8_0: return {q8_0_panel_block(P), table.vnni ? pack_q8_0<true> : pack_q8_0<false>};
    case TensorType::Q4_K: return {q4_k_panel_block(P), pack_q4_k};
    case TensorType::Q6_K: return {q6_k_panel_block(P), pack_q6_k};
    case TensorType::Q2_K: return {q2_k_panel_block(P), pack_q2_k};
    case TensorType::Q3_K: return {q3_k_panel_block(P), pack_q3_k};
    default: return {};
  }
}

}  // namespace
}  // namespace kernels

std::string_view simd_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::Portable:
      return "portable";
    case SimdLevel::Avx2:
      return "avx2";
    case SimdLevel::Avx512:
      return "avx512";
    case SimdLevel::Avx512Emulated:
      return "avx512-emulated";
  }
  return "?";
}

std::optional<SimdLevel> simd_level_from_name(std::string_view name) {
  for (SimdLevel level : {SimdLevel::Portable, SimdLevel::Avx2, SimdLevel::Avx512,
                          SimdLevel::Avx512Emulated}) {
    if (simd_name(level) == name) return level;
  }
  return std::nullopt;
}

std::vector<SimdLevel> supported_simd_levels() {
  std::vector<SimdLevel> levels{SimdLevel::Portable};
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  if (avx2) levels.push_back(SimdLevel::Avx2);
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vnni")) {
    levels.push_back(SimdLevel::Avx512);
  }
#endif
  return levels;
}

bool simd_supported(SimdLevel level) {
  static const std::vector<SimdLevel> levels = testable_simd_levels();
  return std::find(levels.begin(), levels.end(), level) != levels.end();
}

SimdLevel best_simd_level() {
  static const SimdLevel best = supported_simd_levels().back();
  return best;
}

std::vector<SimdLevel> testable_simd_levels() {
  std::vector<SimdLevel> levels = supported_simd_levels();
  if (std::find(levels.begin(), levels.end(), SimdLevel::Avx2) != levels.end()) {
    levels.push_back(SimdLevel::Avx512Emulated);
  }
  return levels;
}

namespace {

// Whether one-token tiles of `type` prefetch their weight stream (PackedMatrix::
// one_token_prefetch). A one-token tile reads its panels as fast as memory delivers them,
// and on AMD's cores (Zen 4, alternated forwards of the 1.1B files in one process) the
// hardware prefetchers then stream the 32-value blocks and float chunks faster alone: without
// the software prefetches F16 decoded 1.06-1.20x as fast at the AVX-512 level, Q4_0
// 1.02-1.20x, Q8_0 1.01-1.12x. Q4_K and Q6_K tiles spend longer on each block unpacking it,
// and keep theirs (without: 0.93-0.99x). On Intel's (a Xeon of the Emerald Rapids class),
// when the prefetches were added (then into the L1), they lifted one-token decoding (Q4_0
// 21 -> 30 tok/s, F16 6.7 -> 8.6), so they stay there and wherever the vendor is unknown.
bool prefetches_one_token(TensorType type) {
#if defined(__x86_64__)
  static const bool amd = [] {
    __builtin_cpu_init();
    return __builtin_cpu_is("amd") != 0;
  }();
  if (amd) return type == TensorType::Q4_K || type == TensorType::Q6_K;
#else
  (void)type;
#endif
  return true;
}

}  // namespace

PackedMatrix packed_layout(const TensorView& w, SimdLevel level) {
  using namespace kernels;
  const TypeTraits& traits = type_traits(w.type);
  if (w.cols % traits.block_elements != 0) {
    throw std::invalid_argument("matmul: " + std::to_string(w.cols) + " columns are not whole " +
                                std::string(traits.name) + " blocks");
  }
  if (!simd_supported(level)) {
    throw std::invalid_argument("this processor cannot run the " + std::string(simd_name(level)) +
                                " kernels");
  }
  PackedMatrix m;
  m.type = w.type;
  m.rows = w.rows;
  m.cols = w.cols;
  m.level = level;
  m.one_token_prefetch = prefetches_one_token(w.type);
  const KernelTable& table = kernel_table(level);
  if (is_float_type(w.type)) {
    // panels of table.float_rows rows, chunk c of each row in turn
    const int L = table.lanes;
    m.panel_rows = table.float_rows;
    m.panel_bytes = static_cast<size_t>((w.cols + L - 1) / L * m.panel_rows) * L * traits.block_bytes;
  } else {
    if (quant_packing(w.type, table).pack == nullptr) {
      throw std::invalid_argument("matmul: the CPU kernels have no product for " + std::string(traits.name) +
                                  " weights (the loader converts the supported types without one)");
    }
    m.panel_rows = quant_panel_rows(w.type, table);
    m.panel_bytes = quant_packing(w.type, table).block_bytes * static_cast<size_t>(w.cols / traits.block_elements);
  }
  m.owned_bytes = m.panel_bytes * static_cast<size_t>(m.panels());
  return m;
}

PackedMatrix pack_matrix(const TensorView& w, SimdLevel level, ThreadPool& pool) {
  using namespace kernels;
  PackedMatrix m = packed_layout(w, level);
  m.owned = allocate_panels(m.owned_bytes);
  uint8_t* out = m.owned.get();
  const KernelTable& table = kernel_table(level);
  const int P = m.panel_rows;
  if (is_float_type(w.type)) {
    const int L = table.lanes;
    const size_t value_bytes = static_cast<size_t>(type_traits(w.type).block_bytes);
    const size_t chunk = static_cast<size_t>(L) * value_bytes;
    pool.parallel_for(w.rows, [&](int64_t begin, int64_t end, int) {
      for (int64_t row = begin; row < end; ++row) {
        const uint8_t* in = w.row(row);
        uint8_t* panel = out + row / P * m.panel_bytes + (row % P) * chunk;
        for (int64_t c = 0; c * L < w.cols; ++c) {
          const size_t values = static_cast<size_t>(std::min<int64_t>(L, w.cols - c * L));
          std::memcpy(panel + c * P * chunk, in + c * chunk, values * value_bytes);
        }
      }
    });
    return m;
  }
  const QuantPacking packing = quant_packing(w.type, table);
  const int64_t blocks = w.cols / type_traits(w.type).block_elements;
  pool.parallel_for(m.panels(), [&](int64_t begin, int64_t end, int) {
    for (int64_t p = begin; p < end; ++p) {
      for (int r = 0; r < P && p * P + r < w.rows; ++r) {  // rows past the end stay zero
        const uint8_t* row = w.row(p * P + r);
        for (int64_t b = 0; b < blocks; ++b) {
          packing.pack(row, b, r, P, out + p * m.panel_bytes + b * packing.block_bytes);
        }
      }
    }
  });
  return m;
}

void quantize_activations_q8(const float* x, uint8_t* out, int64_t n, int32_t bias,
                             SimdLevel level) {
  kernels::kernel_table(level).quantize_q8(x, out, n, bias);
}

void quantize_activations_q8k(const float* x, BlockQ8K* out, int64_t n, SimdLevel level) {
  kernels::kernel_table(level).quantize_q8k(x, out, n);
}

void attend(const AttentionArgs& args, SimdLevel level) {
  kernels::kernel_table(level).attend(args);
}

double log_sum_exp(const float* x, int64_t n, SimdLevel level) {
  return kernels::kernel_table(level).log_sum_exp(x, n);
}

namespace {

// A matrix's kernel at its level and the activations in that kernel's input format: the
// floats themselves for float weights, quantized for the others.
struct KernelInput {
  kernels::MatrixKernel kernel = nullptr;
  const uint8_t* x = nullptr;  // the first token's activations
  size_t x_stride = 0;         // bytes from one token's activations to the next
};

// The activations of one product, in every format its matrices read, each quantized once
// (the first time a matrix asks for it) into this thread's scratch buffers.
class KernelInputs {
 public:
  KernelInputs(const float* x, int n, int64_t cols) : x_(x), n_(n), cols_(cols) {}

  KernelInput get(const PackedMatrix& w) {
    using namespace kernels;
    const KernelTable& table = kernel_table(w.level);
    switch (w.type) {
      case TensorType::F32: return floats(table.f32);
      case TensorType::F16: return floats(table.f16);
      case TensorType::BF16: return floats(table.bf16);
      case TensorType::Q8_0: return q8(table.q8_0, table, table.vnni ? kQ8Bias128 : kQ8Unbiased);
      case TensorType::Q4_0: return q8(table.q4_0, table, kQ8Bias8);
      case TensorType::Q4_1: return q8(table.q4_1, table, kQ8Sum);
      case TensorType::Q5_0: return q8(table.q5_0, table, kQ8Bias16);
      case TensorType::Q5_1: return q8(table.q5_1, table, kQ8Sum);
      case TensorType::Q5_K: return q8(table.q5_k, table, kQ8Sum);
      case TensorType::IQ4_XS: return q8(table.iq4_xs, table, table.vnni ? kQ8Bias128 : kQ8Unbiased);
      case TensorType::IQ4_NL: return q8(table.iq4_nl, table, table.vnni ? kQ8Bias128 : kQ8Unbiased);
      case TensorType::MXFP4: return q8(table.mxfp4, table, table.vnni ? kQ8Bias128 : kQ8Unbiased);
      case TensorType::Q4_K: return q8k(table.q4_k, table);
      case TensorType::Q6_K: return q8k(table.q6_k, table);
      case TensorType::Q2_K: return q8k(table.q2_k, table);
      case TensorType::Q3_K: return q8k(table.q3_k, table);
      default: return {};
    }
  }

 private:
  // kQ8Sum: the offsets hold +Σq (bias -1), the activation sums Q4_1's and Q5_1's minimums meet
  enum Format { kQ8Unbiased, kQ8Bias8, kQ8Bias128, kQ8Sum, kQ8Bias16, kQ8K, kFormats };
  static constexpr int32_t kBias[] = {0, 8, 128, -1, 16};

  KernelInput floats(kernels::MatrixKernel kernel) const {
    return {kernel, reinterpret_cast<const uint8_t*>(x_), static_cast<size_t>(cols_) * sizeof(float)};
  }
  KernelInput q8(kernels::MatrixKernel kernel, const kernels::KernelTable& table, Format format) {
    const size_t stride = q8_row_bytes(cols_);
    return {kernel, quantized(format, stride, [&](int t, uint8_t* out) {
              table.quantize_q8(x_ + t * cols_, out, cols_, kBias[format]);
            }), stride};
  }
  KernelInput q8k(kernels::MatrixKernel kernel, const kernels::KernelTable& table) {
    const size_t stride = static_cast<size_t>(cols_ / 256) * sizeof(BlockQ8K);
    return {kernel, quantized(kQ8K, stride, [&](int t, uint8_t* out) {
              table.quantize_q8k(x_ + t * cols_, reinterpret_cast<BlockQ8K*>(out), cols_);
            }), stride};
  }
  template <class Quantize>
  const uint8_t* quantized(Format format, size_t stride, Quantize&& quantize) {
    // one set of buffers per calling thread, reused across calls
    thread_local std::vector<uint8_t> scratch[kFormats];
    std::vector<uint8_t>& buffer = scratch[format];
    if (!done_[format]) {
      buffer.resize(stride * static_cast<size_t>(n_));
      for (int t = 0; t < n_; ++t) quantize(t, buffer.data() + t * stride);
      done_[format] = true;
    }
    return buffer.data();
  }

  const float* x_;
  int n_;
  int64_t cols_;
  bool done_[kFormats] = {};
};

double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

void matmul(const PackedMatrix& w, const float* x, int n, float* y, ThreadPool& pool) {
  const MatrixProduct product{&w, y};
  matmul_shared_input({&product, 1}, x, n, pool);
}

void matmul_shared_input(std::span<const MatrixProduct> products, const float* x, int n, ThreadPool& pool) {
  if (products.empty()) return;
  const int64_t cols = products.front().w->cols;
  KernelInputs inputs(x, n, cols);
  // Each matrix's panels in units of whole panels: of a float matrix 16 rows at least
  // (panels of 3 or 4), of a quantized one a panel (8 or 16 rows). The job's units are
  // every matrix's in turn.
  struct Part {
    const PackedMatrix* w;
    float* y;
    KernelInput in;
    int64_t grain;  // panels per unit
    int64_t first;  // the job's first unit of this matrix
  };
  thread_local std::vector<Part> reused;  // the calling thread's, reused across calls
  std::vector<Part>& parts = reused;       // (a thread_local is not captured: each thread would see its own)
  parts.clear();
  int64_t units = 0, work = 0;
  for (const MatrixProduct& p : products) {
    const PackedMatrix& w = *p.w;
    if (w.cols != cols) throw std::invalid_argument("matmul_shared_input: the matrices differ in their input length");
    const int64_t grain = is_float_type(w.type) ? (16 + w.panel_rows - 1) / w.panel_rows : 1;
    parts.push_back({&w, p.y, inputs.get(w), grain, units});
    units += (w.panels() + grain - 1) / grain;
    work += w.panels() * static_cast<int64_t>(w.panel_bytes) + int64_t{n} * w.rows * cols;
  }
  pool.parallel_for(
      units,
      [&](int64_t begin, int64_t end, int) {
        for (const Part& part : parts) {
          const int64_t panels = part.w->panels();
          const int64_t first = std::max<int64_t>(0, (begin - part.first) * part.grain);
          const int64_t last = std::min(panels, (end - part.first) * part.grain);
          if (first < last) part.in.kernel(*part.w, first, last, part.in.x, part.in.x_stride, n, part.y);
        }
      },
      1, work);
}

double peak_multiply_adds_per_second(TensorType type, SimdLevel level, double seconds) {
  const kernels::PeakLoop loop = kernels::kernel_table(level).peak;
  // Grow the round count until one run takes a tenth of the time, then run for the rest.
  int64_t rounds = 1024;
  for (;;) {
    const double start = thread_seconds();
    loop(type, rounds);
    if (thread_seconds() - start >= seconds / 10 || rounds > (int64_t{1} << 40)) break;
    rounds *= 4;
  }
  double best = 0.0;
  const double deadline = thread_seconds() + seconds;
  do {
    const double start = thread_seconds();
    const double macs = loop(type, rounds);
    best = std::max(best, macs / (thread_seconds() - start));
  } while (thread_seconds() < deadline);
  return best;
}

double in_cache_multiply_adds_per_second(const TensorView& w, SimdLevel level, int tokens, size_t cache_bytes,
                                         double seconds) {
  ThreadPool one(1);
  const PackedMatrix whole = packed_layout(w, level);
  const int64_t panels =
      std::clamp<int64_t>(static_cast<int64_t>(cache_bytes / std::max<size_t>(whole.panel_bytes, 1)), 1, whole.panels());
  TensorView slice = w;
  slice.rows = std::min(w.rows, panels * whole.panel_rows);
  const PackedMatrix packed = pack_matrix(slice, level, one);
  std::vector<float> x(static_cast<size_t>(tokens * slice.cols)), y(static_cast<size_t>(tokens * slice.rows));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 7919 % 2003) - 1001) / 1001.0f;
  KernelInputs inputs(x.data(), tokens, slice.cols);
  const KernelInput in = inputs.get(packed);
  const double macs = static_cast<double>(tokens) * static_cast<double>(slice.rows) * static_cast<double>(slice.cols);
  double best = 0.0;
  const double deadline = thread_seconds() + seconds;
  do {  // runs of at least 5 ms; the fastest, the one least disturbed
    const double start = thread_seconds();
    int64_t calls = 0;
    do {
      in.kernel(packed, 0, packed.panels(), in.x, in.x_stride, tokens, y.data());
      ++calls;
    } while (thread_seconds() - start < 0.005);
    best = std::max(best, static_cast<double>(calls) * macs / (thread_seconds() - start));
  } while (thread_seconds() < deadline);
  return best;
}

}  // namespace specula
