#include "compute/device_plan.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>

#include "quant_tiles.h"

namespace specula {

std::vector<AttentionWork> partition_attention(const BatchPlan& plan, int query_tile) {
  if (query_tile <= 0) throw std::invalid_argument("attention query tile must be positive");
  std::vector<AttentionWork> work;
  for (int s = 0; s < plan.n_seqs; ++s) {
    for (int t = plan.seq_offsets[s]; t < plan.seq_offsets[s + 1]; t += query_tile) {
      work.push_back({s, t, std::min(query_tile, plan.seq_offsets[s + 1] - t)});
    }
  }
  return work;
}

AttentionTasks plan_attention_tasks(const BatchPlan& plan, const std::vector<AttentionWork>& work, int split_keys,
                                    int parallel_queries, int group) {
  if (split_keys <= 0 || group <= 0) throw std::invalid_argument("attention pieces and groups must be positive");
  AttentionTasks t;
  t.first_task.assign(1, 0);
  for (size_t i = 0; i < work.size(); ++i) {
    const AttentionWork& w = work[i];
    const int n_keys = plan.positions[static_cast<size_t>(w.first_token + w.n_queries - 1)] + 1;
    const int n_pieces = (n_keys + split_keys - 1) / split_keys;
    const int item = static_cast<int32_t>(i);
    if (w.n_queries <= parallel_queries && n_pieces > 1) {
      for (int p = 0; p < n_pieces; ++p) {
        t.tasks.push_back({item, p, 1, t.partial_rows});
        t.partial_rows += w.n_queries * group;
      }
    } else {
      t.tasks.push_back({item, 0, n_pieces, 0});
    }
    t.first_task.push_back(static_cast<int32_t>(t.tasks.size()));
  }
  return t;
}

PackedPlan pack_plan(const BatchPlan& plan, const std::vector<int32_t>& tokens, const AttentionShape& shape,
                     const StepBucket& bucket, int32_t trash_slot) {
  if (tokens.size() != static_cast<size_t>(plan.n_tokens)) {
    throw std::invalid_argument("pack_plan: " + std::to_string(tokens.size()) + " tokens for a plan of " +
                                std::to_string(plan.n_tokens));
  }
  const std::vector<AttentionWork> work = partition_attention(plan, shape.query_tile);
  const AttentionTasks tasks = plan_attention_tasks(plan, work, shape.split_keys, shape.parallel_queries, shape.group);
  const int n_work = static_cast<int>(work.size()), n_tasks = static_cast<int>(tasks.tasks.size());
  const int n_rows = static_cast<int>(plan.logit_rows.size()), n_blocks = static_cast<int>(plan.block_tables.size());
  if (bucket.tokens < plan.n_tokens || bucket.rows < n_rows || bucket.seqs < plan.n_seqs || bucket.blocks < n_blocks ||
      bucket.work < n_work || bucket.tasks < n_tasks || bucket.partial_rows < tasks.partial_rows ||
      (bucket.tokens > plan.n_tokens && bucket.work == n_work) || (bucket.work > n_work && bucket.tasks == n_tasks)) {
    throw std::invalid_argument("pack_plan: the step does not fit its bucket");
  }
  PackedPlan packed;
  std::vector<int32_t>& d = packed.data;
  // each field at its capacity, real entries first, then `pad`
  const auto field = [&d](const std::vector<int32_t>& v, int capacity, int32_t pad) {
    const size_t at = d.size();
    d.insert(d.end(), v.begin(), v.end());
    d.insert(d.end(), static_cast<size_t>(capacity) - v.size(), pad);
    return at;
  };
  const int32_t spare = n_work;  // the padding's work item: no queries, one empty task
  packed.tokens = field(tokens, bucket.tokens, 0);
  packed.positions = field(plan.positions, bucket.tokens, 0);
  packed.cache_slots = field(plan.cache_slots, bucket.tokens, trash_slot);
  packed.table_offsets = field(plan.table_offsets, bucket.seqs + 1, plan.table_offsets.back());
  packed.block_tables = field(plan.block_tables, bucket.blocks, 0);
  packed.logit_rows = field(plan.logit_rows, bucket.rows, 0);
  packed.work = d.size();
  std::vector<int32_t> token_work(static_cast<size_t>(plan.n_tokens), 0);
  for (size_t i = 0; i < work.size(); ++i) {
    const AttentionWork& w = work[i];
    d.insert(d.end(), {w.seq, w.first_token, w.n_queries, tasks.first_task[i],
                       tasks.first_task[i + 1] - tasks.first_task[i]});
    std::fill_n(token_work.begin() + w.first_token, w.n_queries, static_cast<int32_t>(i));
  }
  for (int i = n_work; i < bucket.work; ++i) d.insert(d.end(), {0, 0, 0, n_tasks, 1});
  packed.n_work = bucket.work;
  packed.tasks = d.size();
  for (const AttentionTask& t : tasks.tasks) d.insert(d.end(), {t.work, t.first_piece, t.n_pieces, t.partial_row});
  for (int i = n_tasks; i < bucket.tasks; ++i) d.insert(d.end(), {spare, 0, 0, 0});
  packed.n_tasks = bucket.tasks;
  packed.partial_rows = bucket.partial_rows;
  packed.token_work = field(token_work, bucket.tokens, spare);
  return packed;
}

StepBucket exact_bucket(const PackedPlan& packed, const BatchPlan& plan) {
  return {plan.n_tokens,   static_cast<int>(plan.logit_rows.size()), plan.n_seqs, static_cast<int>(plan.block_tables.size()),
          packed.n_work,   packed.n_tasks,                           packed.partial_rows};
}

namespace {

int power_of_two_at_least(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

}  // namespace

StepBucket step_bucket(const StepBucket& exact) {
  StepBucket b;
  b.tokens = power_of_two_at_least(exact.tokens);
  b.rows = power_of_two_at_least(exact.rows);
  b.seqs = power_of_two_at_least(exact.seqs);
  b.blocks = power_of_two_at_least(exact.blocks);
  b.work = power_of_two_at_least(exact.work + 1);  // room for the padding's item
  b.tasks = power_of_two_at_least(exact.tasks + 1);
  b.partial_rows = exact.partial_rows == 0 ? 0 : power_of_two_at_least(exact.partial_rows);
  return b;
}

PackedPlan pack_plan(const BatchPlan& plan, const std::vector<int32_t>& tokens, const AttentionShape& shape) {
  const std::vector<AttentionWork> work = partition_attention(plan, shape.query_tile);
  const AttentionTasks tasks = plan_attention_tasks(plan, work, shape.split_keys, shape.parallel_queries, shape.group);
  const StepBucket exact{plan.n_tokens,
                         static_cast<int>(plan.logit_rows.size()),
                         plan.n_seqs,
                         static_cast<int>(plan.block_tables.size()),
                         static_cast<int>(work.size()),
                         static_cast<int>(tasks.tasks.size()),
                         tasks.partial_rows};
  return pack_plan(plan, tokens, shape, exact, 0);
}

// ---- weights on the device ----

namespace {

std::vector<const TensorView*> matrices(const Weights& w) {
  std::vector<const TensorView*> all{&w.token_embedding, &w.output};
  for (const LayerWeights& l : w.layers) {
    const auto layer = l.matrices();
    all.insert(all.end(), layer.begin(), layer.end());
  }
  return all;
}

tiles::Shape tile_shape(const DeviceMatrixLayout& layout) {
  return {device_tile_format(layout.type), layout.rows, layout.cols};
}

// One row of GGUF blocks as the tile writer wants it, over the row's whole tiles (columns
// past the row hold zero weights): a code per value and each tile's scale records.
struct RowCodes {
  std::vector<uint8_t> code;   // (ktiles * 256) the stored code of each value
  std::vector<uint8_t> scale;  // (ktiles * 16) each tile's scale record
  std::vector<uint8_t> super;  // (ktiles * kMaxSuperBytes) each tile's super record
};

// Value i of a 32-value block whose nibbles lie as Q4_0's: i in the low nibble of qs[i],
// 16 + i in the high one.
uint8_t q4_nibble(const uint8_t* qs, int i) { return i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4; }
// Value i of a 256-value K-quant block whose nibbles lie as Q4_K's: 64-value chunks of 32
// bytes, low nibbles first.
uint8_t q4_k_nibble(const uint8_t* qs, int i) {
  const int c = i / 64, l = i % 64;
  return l < 32 ? qs[32 * c + l] & 0xF : qs[32 * c + l - 32] >> 4;
}

// The codes and scale records of one GGUF block whose first value is column `first` of the
// row, as quant_tiles.h stores them.
void unpack_block(TensorType type, const uint8_t* block, int64_t first, uint8_t* code, uint8_t* scale,
                  uint8_t* super) {
  const int group = static_cast<int>(first % tiles::kCols / 32);  // of a 32-value block
  switch (type) {
    case TensorType::Q8_0:  // d, then 32 int8
      std::memcpy(scale + 2 * group, block, 2);
      for (int i = 0; i < 32; ++i) code[i] = static_cast<uint8_t>(static_cast<int8_t>(block[2 + i]) + 128);
      return;
    case TensorType::IQ4_NL:  // d, then nibbles indexing the levels: Q8_0's tiles, every value kept
      std::memcpy(scale + 2 * group, block, 2);
      for (int i = 0; i < 32; ++i) code[i] = static_cast<uint8_t>(kIq4Levels[q4_nibble(block + 2, i)] + 128);
      return;
    case TensorType::MXFP4: {  // E8M0 exponent, then nibbles indexing the doubled FP4 values
      // Q8_0's tiles with the half scale 2^(e - 128) as the f16 d: exact for e - 128 in
      // [-24, 15] (f16's powers of two), which gpt-oss's experts keep to; another scale is
      // refused rather than rounded
      if (block[0] < 128 - 24 || block[0] > 128 + 15) {
        throw std::invalid_argument("an MXFP4 block's scale 2^" + std::to_string(block[0] - 127) +
                                    " is beyond an f16, which the device's tiles keep it in: run this model on the CPU");
      }
      const uint16_t d = fp32_to_fp16(mxfp4_half_scale(block[0]));
      std::memcpy(scale + 2 * group, &d, 2);
      for (int i = 0; i < 32; ++i) code[i] = static_cast<uint8_t>(kMxfp4Values[q4_nibble(block + 1, i)] + 128);
      return;
    }
    case TensorType::Q4_0:  // d, then nibbles
      std::memcpy(scale + 2 * group, block, 2);
      for (int i = 0; i < 32; ++i) code[i] = q4_nibble(block + 2, i);
      return;
    case TensorType::Q4_1:  // d, m, then nibbles
      std::memcpy(scale + 2 * group, block, 2);
      std::memcpy(super + 2 * group, block + 2, 2);
      for (int i = 0; i < 32; ++i) code[i] = q4_nibble(block + 4, i);
      return;
    case TensorType::Q5_1: {  // d, m, the fifth bit of value i in bit i of 4 bytes, nibbles
      std::memcpy(scale + 2 * group, block, 2);
      std::memcpy(super + 2 * group, block + 2, 2);
      uint32_t high;
      std::memcpy(&high, block + 4, 4);
      for (int i = 0; i < 32; ++i) code[i] = static_cast<uint8_t>(q4_nibble(block + 8, i) | ((high >> i) & 1) << 4);
      return;
    }
    case TensorType::Q4_K:  // d, dmin, 12 packed scale bytes, nibbles
      std::memcpy(super, block, 4);
      for (int j = 0; j < 8; ++j) q4_k_scale_min(j, block + 4, &scale[j], &scale[8 + j]);
      for (int i = 0; i < 256; ++i) code[i] = q4_k_nibble(block + 16, i);
      return;
    case TensorType::Q5_K: {  // as Q4_K, then 32 bytes of fifth bits before the nibbles
      std::memcpy(super, block, 4);
      for (int j = 0; j < 8; ++j) q4_k_scale_min(j, block + 4, &scale[j], &scale[8 + j]);
      const uint8_t* qh = block + 16;
      for (int i = 0; i < 256; ++i) {
        const int c = i / 64, l = i % 64;
        const int fifth = (qh[l % 32] >> (2 * c + l / 32)) & 1;
        code[i] = static_cast<uint8_t>(q4_k_nibble(block + 48, i) | fifth << 4);
      }
      return;
    }
    case TensorType::Q2_K:  // 16 bytes sc | m << 4, 64 bytes of 2-bit codes, d, dmin
      std::memcpy(scale, block, 16);
      std::memcpy(super, block + 80, 4);
      for (int i = 0; i < 256; ++i) code[i] = (block[16 + 32 * (i / 128) + i % 32] >> (2 * (i % 128 / 32))) & 3;
      return;
    case TensorType::Q6_K: {  // 128 bytes low nibbles, 64 bytes top bits, 16 int8 scales, d
      const uint8_t* ql = block;
      const uint8_t* qh = block + 128;
      std::memcpy(scale, block + 192, 16);
      std::memcpy(super, block + 208, 2);
      for (int i = 0; i < 256; ++i) {
        const int half = i / 128, quarter = i % 128 / 32, l = i % 32;
        const uint8_t low = ql[64 * half + l + 32 * (quarter % 2)];
        const int lo = quarter < 2 ? low & 0xF : low >> 4;
        const int hi = (qh[32 * half + l] >> (2 * quarter)) & 3;
        code[i] = static_cast<uint8_t>(lo | hi << 4);
      }
      return;
    }
    case TensorType::Q3_K: {  // in Q6_K's tiles: 32 bytes of third bits, 64 of 2-bit codes, 12 of scales, d
      // (d * (s - 32)) * v with v in [-4, 3] is Q6_K's (d * sc) * (code - 32) with sc = s - 32
      // and code = v + 32; the values keep their bits (dequantize_q3_k's products)
      int8_t scales[16];
      q3_k_scales(block + 96, scales);
      for (int j = 0; j < 16; ++j) scale[j] = static_cast<uint8_t>(static_cast<int8_t>(scales[j] - 32));
      std::memcpy(super, block + 108, 2);
      for (int i = 0; i < 256; ++i) {
        const int low = (block[32 + 32 * (i / 128) + i % 32] >> (2 * (i % 128 / 32))) & 3;
        const int third = (block[i % 32] >> (i / 32)) & 1;
        code[i] = static_cast<uint8_t>(32 + low + 4 * third - 4);
      }
      return;
    }
    case TensorType::IQ4_XS: {  // d, 2 bytes of top scale bits, 4 of low ones, nibbles
      std::memcpy(super, block, 2);
      const uint16_t scales_h = static_cast<uint16_t>(block[2] | block[3] << 8);
      for (int ib = 0; ib < 8; ++ib) {
        const int ls = ((block[4 + ib / 2] >> 4 * (ib % 2)) & 0xF) | (((scales_h >> 2 * ib) & 3) << 4);
        scale[ib] = static_cast<uint8_t>(static_cast<int8_t>(ls - 32));
      }
      for (int i = 0; i < 256; ++i) {
        code[i] = static_cast<uint8_t>(kIq4Levels[q4_nibble(block + 8 + 16 * (i / 32), i % 32)] + 128);
      }
      return;
    }
    default: throw std::invalid_argument("unpack_block: not a tiled type");
  }
}

void unpack_row(TensorType type, const uint8_t* src, int64_t cols, int64_t ktiles, RowCodes& out) {
  const tiles::Format f = device_tile_format(type);
  out.code.assign(static_cast<size_t>(ktiles * tiles::kCols), static_cast<uint8_t>(tiles::code_offset(f)));
  out.scale.assign(static_cast<size_t>(ktiles * tiles::kScaleBytes), 0);
  out.super.assign(static_cast<size_t>(ktiles * tiles::kMaxSuperBytes), 0);
  if (!src) return;  // a padding row
  const int64_t block_bytes = type_traits(type).block_bytes;
  const int64_t block_values = type_traits(type).block_elements;
  for (int64_t b = 0; b < cols / block_values; ++b) {
    const int64_t first = b * block_values;  // column of the block's first value
    const int64_t tile = first / tiles::kCols;
    unpack_block(type, src + b * block_bytes, first, out.code.data() + first, out.scale.data() + tile * tiles::kScaleBytes,
                 out.super.data() + tile * tiles::kMaxSuperBytes);
  }
}

void or_code(uint8_t* panel, tiles::Format f, int64_t ktile, int lane, tiles::CodeAt at, uint32_t value) {
  uint8_t* p = panel + tiles::quant_offset(f, ktile, at.word, lane) + 4 * at.dword;
  const uint32_t word = tiles::load_u32(p) | value << at.shift;
  for (int b = 0; b < 4; ++b) p[b] = static_cast<uint8_t>(word >> (8 * b));
}

// One tile row: 16 weight rows (null past the matrix) into a panel.
void write_panel(TensorType type, const uint8_t* const rows[tiles::kRows], int64_t cols, int64_t ktiles,
                 uint8_t* panel) {
  const tiles::Format f = device_tile_format(type);
  std::memset(panel, 0, static_cast<size_t>(ktiles * tiles::tile_bytes(f)));
  RowCodes codes;
  for (int r = 0; r < tiles::kRows; ++r) {
    unpack_row(type, rows[r], cols, ktiles, codes);
    for (int64_t kt = 0; kt < ktiles; ++kt) {
      std::memcpy(panel + tiles::scale_offset(f, ktiles, kt, r), codes.scale.data() + kt * tiles::kScaleBytes,
                  tiles::kScaleBytes);
      std::memcpy(panel + tiles::super_offset(f, ktiles, kt, r), codes.super.data() + kt * tiles::kMaxSuperBytes,
                  static_cast<size_t>(tiles::super_bytes(f)));
      for (int c = 0; c < tiles::kCols; ++c) {
        const uint32_t code = codes.code[static_cast<size_t>(kt * tiles::kCols + c)];
        const tiles::Slot s = tiles::slot_of(r, c);
        if (tiles::planes(f) == tiles::Planes::Bytes) {
          or_code(panel, f, kt, s.lane, tiles::byte_at(s.chunk, s.step, s.half, s.j), code);
        } else {
          or_code(panel, f, kt, s.lane, tiles::nibble_at(s.chunk, s.step, s.half, s.j), code & 0xF);
          if (tiles::planes(f) == tiles::Planes::NibblesAndCrumbs) {
            or_code(panel, f, kt, s.lane, tiles::crumb_at(s.chunk, s.step, s.half, s.j), code >> 4);
          }
        }
      }
    }
  }
}

// Row r of parts stacked row-wise, or null past the end.
const uint8_t* stacked_row(std::span<const TensorView* const> parts, int64_t r) {
  for (const TensorView* p : parts) {
    if (r < p->rows) return p->row(r);
    r -= p->rows;
  }
  return nullptr;
}

void convert_dense_row(TensorType src_type, const uint8_t* src, TensorType type, int64_t cols, std::vector<float>& row,
                       uint8_t* dst) {
  if (src_type == type) {
    std::memcpy(dst, src, row_bytes(type, cols));
    return;
  }
  row.resize(static_cast<size_t>(cols));
  dequantize_row(src_type, src, row.data(), cols);
  if (type == TensorType::F32) {
    std::memcpy(dst, row.data(), row.size() * sizeof(float));
    return;
  }
  for (int64_t c = 0; c < cols; ++c) {
    const float v = row[static_cast<size_t>(c)];
    const uint16_t h = type == TensorType::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
    std::memcpy(dst + 2 * c, &h, 2);
  }
}

}  // namespace

TensorType device_compute_type(const Weights& weights) {
  const auto all = matrices(weights);
  const auto every = [&](TensorType t) {
    return std::all_of(all.begin(), all.end(), [t](const TensorView* m) { return m->type == t; });
  };
  if (every(TensorType::F32)) return TensorType::F32;
  if (every(TensorType::BF16)) return TensorType::BF16;
  return TensorType::F16;
}

tiles::Format device_tile_format(TensorType type) {
  switch (type) {
    case TensorType::Q8_0: return tiles::Format::Q8_0;
    case TensorType::Q4_0: return tiles::Format::Q4_0;
    case TensorType::Q4_1: return tiles::Format::Q4_1;
    case TensorType::Q5_1: return tiles::Format::Q5_1;
    case TensorType::Q4_K: return tiles::Format::Q4_K;
    case TensorType::Q5_K: return tiles::Format::Q5_K;
    case TensorType::Q2_K: return tiles::Format::Q2_K;
    case TensorType::Q6_K: return tiles::Format::Q6_K;
    case TensorType::Q3_K: return tiles::Format::Q6_K;  // its values re-encoded at upload (unpack_block)
    case TensorType::IQ4_XS: return tiles::Format::IQ4_XS;
    case TensorType::IQ4_NL:
    case TensorType::MXFP4: return tiles::Format::Q8_0;  // the levels as bytes (unpack_block)
    default: throw std::invalid_argument(std::string("no tile format for ") + std::string(type_traits(type).name));
  }
}

TensorType device_tiled_type(TensorType type) { return type == TensorType::Q5_0 ? TensorType::Q8_0 : type; }

bool is_tiled_type(TensorType type) {
  switch (type) {
    case TensorType::Q5_0:
    case TensorType::Q8_0:
    case TensorType::Q4_0:
    case TensorType::Q4_1:
    case TensorType::Q5_1:
    case TensorType::Q4_K:
    case TensorType::Q5_K:
    case TensorType::Q2_K:
    case TensorType::Q3_K:
    case TensorType::Q6_K:
    case TensorType::IQ4_XS:
    case TensorType::IQ4_NL:
    case TensorType::MXFP4: return true;
    default: return false;
  }
}

DeviceMatrixLayout device_layout(TensorType stored, TensorType compute, int64_t rows, int64_t cols) {
  DeviceMatrixLayout l;
  l.rows = rows;
  l.cols = cols;
  if (is_tiled_type(stored)) {
    const tiles::Shape shape{device_tile_format(device_tiled_type(stored)), rows, cols};
    if (cols % tiles::group_size(shape.format) != 0) {
      throw std::invalid_argument("a " + std::string(type_traits(stored).name) + " matrix of " + std::to_string(cols) +
                                  " columns is not whole blocks");
    }
    l.type = device_tiled_type(stored);
    l.unit_rows = tiles::kRows;
    l.units = shape.row_tiles();
    l.unit_bytes = static_cast<size_t>(shape.panel_bytes());
    return l;
  }
  if (compute != TensorType::F32 && compute != TensorType::F16 && compute != TensorType::BF16) {
    throw std::invalid_argument("a device computes in f32, f16 or bf16, not " + std::string(type_traits(compute).name));
  }
  l.type = compute;
  l.unit_rows = 1;
  l.units = rows;
  l.unit_bytes = row_bytes(compute, cols);
  return l;
}

std::vector<std::vector<const TensorView*>> stack_by_type(std::span<const TensorView* const> parts) {
  std::vector<std::vector<const TensorView*>> groups;
  for (const TensorView* p : parts) {
    if (groups.empty() || groups.back().back()->type != p->type || groups.back().back()->cols != p->cols) {
      groups.emplace_back();
    }
    groups.back().push_back(p);
  }
  return groups;
}

void write_device_units(std::span<const TensorView* const> parts, const DeviceMatrixLayout& layout,
                        int64_t first_unit, int64_t n_units, void* dst) {
  if (parts.empty() || first_unit < 0 || n_units < 0 || first_unit + n_units > layout.units) {
    throw std::invalid_argument("write_device_units: units outside the matrix");
  }
  for (const TensorView* p : parts) {
    if (p->type != parts[0]->type || p->cols != layout.cols) {
      throw std::invalid_argument("stacked device matrices need one type and one width");
    }
  }
  uint8_t* out = static_cast<uint8_t*>(dst);
  if (layout.tiled()) {
    const tiles::Shape shape = tile_shape(layout);
    // rows stored in another type than the tiles' (Q5_0) are re-encoded first, exactly
    const bool convert = parts[0]->type != layout.type;
    std::vector<uint8_t> converted(convert ? tiles::kRows * row_bytes(layout.type, layout.cols) : 0);
    for (int64_t u = 0; u < n_units; ++u) {
      const uint8_t* rows[tiles::kRows];
      for (int r = 0; r < tiles::kRows; ++r) {
        rows[r] = stacked_row(parts, (first_unit + u) * tiles::kRows + r);
        if (convert && rows[r] != nullptr) {
          uint8_t* to = converted.data() + r * row_bytes(layout.type, layout.cols);
          if (!convert_row_exact(parts[0]->type, rows[r], to, layout.cols)) {
            throw std::invalid_argument("write_device_units: a row does not re-encode exactly");
          }
          rows[r] = to;
        }
      }
      write_panel(layout.type, rows, layout.cols, shape.ktiles(), out + u * layout.unit_bytes);
    }
    return;
  }
  std::vector<float> row;
  for (int64_t u = 0; u < n_units; ++u) {
    convert_dense_row(parts[0]->type, stacked_row(parts, first_unit + u), layout.type, layout.cols, row,
                      out + u * layout.unit_bytes);
  }
}

float device_element(const DeviceMatrixLayout& layout, const void* image, int64_t row, int64_t col) {
  const uint8_t* bytes = static_cast<const uint8_t*>(image);
  if (layout.tiled()) return tiles::element(tile_shape(layout), bytes, row, col);
  const uint8_t* at = bytes + row * layout.unit_bytes + col * static_cast<int64_t>(row_bytes(layout.type, 1));
  float value;
  dequantize_row(layout.type, at, &value, 1);
  return value;
}

std::vector<UploadChunk> plan_upload(const DeviceMatrixLayout& layout, size_t max_bytes) {
  if (layout.unit_bytes == 0) return {};
  const int64_t per_chunk = std::max<int64_t>(1, static_cast<int64_t>(max_bytes / layout.unit_bytes));
  std::vector<UploadChunk> chunks;
  for (int64_t u = 0; u < layout.units; u += per_chunk) {
    const int64_t n = std::min(per_chunk, layout.units - u);
    chunks.push_back({u, n, static_cast<size_t>(u) * layout.unit_bytes, static_cast<size_t>(n) * layout.unit_bytes});
  }
  return chunks;
}

namespace {

DeviceMatrixPlan matrix_plan(std::vector<const TensorView*> parts, TensorType compute) {
  int64_t rows = 0;
  for (const TensorView* p : parts) rows += p->rows;
  DeviceMatrixPlan m;
  m.layout = device_layout(parts[0]->type, compute, rows, parts[0]->cols);
  m.parts = std::move(parts);
  return m;
}

std::vector<DeviceMatrixPlan> stacked_plans(std::initializer_list<const TensorView*> parts, TensorType compute) {
  std::vector<const TensorView*> present;  // a feed-forward without a gate (starcoder2) has no w_gate
  std::copy_if(parts.begin(), parts.end(), std::back_inserter(present), [](const TensorView* p) { return !p->empty(); });
  std::vector<DeviceMatrixPlan> plans;
  for (auto& group : stack_by_type(present)) plans.push_back(matrix_plan(group, compute));
  return plans;
}

size_t bytes_of(const std::vector<DeviceMatrixPlan>& plans) {
  size_t bytes = 0;
  for (const DeviceMatrixPlan& p : plans) bytes += p.layout.bytes();
  return bytes;
}

size_t layer_bytes(const DeviceLayerPlan& l) {
  return bytes_of(l.qkv) + l.wo.layout.bytes() + bytes_of(l.gate_up) + l.down.layout.bytes() + l.vector_bytes;
}

size_t vector_bytes(const LayerWeights& l) {
  size_t floats = qkv_bias_row(l).size();  // the q|k|v biases as uploaded: one row, zeros for a missing part
  for (const TensorView* v : {&l.attn_norm, &l.ffn_norm, &l.bo, &l.q_norm, &l.k_norm, &l.attn_norm_bias, &l.ffn_norm_bias,
                              &l.b_up, &l.b_down}) {
    floats += static_cast<size_t>(v->cols * v->rows);
  }
  return floats * sizeof(float);
}

}  // namespace

DeviceModelPlan plan_device_model(const Model& model) {
  const Weights& w = model.weights;
  DeviceModelPlan plan;
  plan.compute = device_compute_type(w);
  plan.embedding = matrix_plan({&w.token_embedding}, plan.compute);
  for (const LayerWeights& l : w.layers) {
    DeviceLayerPlan d;
    d.qkv = stacked_plans({&l.wq, &l.wk, &l.wv}, plan.compute);
    d.wo = matrix_plan({&l.wo}, plan.compute);
    d.gate_up = stacked_plans({&l.w_gate, &l.w_up}, plan.compute);
    d.down = matrix_plan({&l.w_down}, plan.compute);
    d.vector_bytes = vector_bytes(l);
    plan.layers.push_back(std::move(d));
  }
  plan.output = model.tied_output() ? plan.embedding : matrix_plan({&w.output}, plan.compute);
  plan.final_norm_bytes = static_cast<size_t>(w.final_norm.cols) * sizeof(float);
  return plan;
}

std::string device_refusal(const Model& model) {
  const ModelConfig& c = model.config;
  const auto any_layer = [&](TensorView LayerWeights::*norm) {
    return std::any_of(model.weights.layers.begin(), model.weights.layers.end(),
                       [&](const LayerWeights& l) { return !(l.*norm).empty(); });
  };
  std::vector<std::string> missing;
  if (c.sliding_window > 0) missing.push_back("sliding-window attention");
  if (any_layer(&LayerWeights::attn_post_norm) || any_layer(&LayerWeights::ffn_post_norm)) {
    missing.push_back("norms of attention's and the feed-forward's outputs");
  }
  if (c.activation == Activation::GeluTanh) missing.push_back("the GELU-tanh feed-forward");
  if (c.activation == Activation::SwigluClamped) missing.push_back("the clamped SwiGLU feed-forward");
  if (any_layer(&LayerWeights::attn_sinks)) missing.push_back("attention sinks");
  if (c.rope_yarn_factor > 1.0f) missing.push_back("YaRN rope scaling");
  if (!c.gated_feed_forward) missing.push_back("a feed-forward without a gate, with biases");
  if (c.norm != NormKind::Rms) missing.push_back("LayerNorm with biases");
  if (c.embedding_scale != 1.0f) missing.push_back("the scaled embedding");
  if (c.attention_scale != 0.0f) missing.push_back("a query scale other than 1/sqrt(head_dim)");
  if (c.has_experts()) missing.push_back("a mixture of experts (the router and grouped expert products)");
  if (missing.empty()) return {};
  std::string list;
  for (size_t i = 0; i < missing.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == missing.size() ? " and " : ", ") + missing[i];
  }
  return "the GPU backend does not run " + c.architecture + " models yet: its kernels lack " + list +
         "; run this model on the CPU (--device cpu)";
}

size_t device_weight_bytes(const Model& model) {
  const DeviceModelPlan plan = plan_device_model(model);
  size_t bytes = plan.embedding.layout.bytes() + plan.final_norm_bytes;
  for (const DeviceLayerPlan& l : plan.layers) bytes += layer_bytes(l);
  if (!model.tied_output()) bytes += plan.output.layout.bytes();
  return bytes;
}

size_t step_weight_bytes(const Model& model, int n_layers) {
  const DeviceModelPlan plan = plan_device_model(model);
  const int layers = n_layers < 0 ? static_cast<int>(plan.layers.size()) : n_layers;
  size_t bytes = 0;
  for (int l = 0; l < layers; ++l) bytes += layer_bytes(plan.layers[static_cast<size_t>(l)]);
  if (n_layers < 0) bytes += plan.final_norm_bytes + plan.output.layout.bytes();
  return bytes;
}

size_t step_kv_bytes(const ModelConfig& config, TensorType compute, std::span<const int> contexts, int n_layers) {
  size_t positions = 0;
  for (const int c : contexts) positions += static_cast<size_t>(c);
  const size_t layers = static_cast<size_t>(n_layers < 0 ? config.n_layers : n_layers);
  return 2 * layers * positions * static_cast<size_t>(config.kv_dim()) * row_bytes(compute, 1);
}

std::vector<float> qkv_bias_row(const LayerWeights& layer) {
  if (layer.bq.empty() && layer.bk.empty() && layer.bv.empty()) return {};
  const int64_t q_dim = layer.wq.rows, kv_dim = layer.wk.rows;
  std::vector<float> row(static_cast<size_t>(q_dim + 2 * kv_dim), 0.0f);
  int64_t at = 0;
  for (const auto& [bias, width] : {std::pair{&layer.bq, q_dim}, {&layer.bk, kv_dim}, {&layer.bv, kv_dim}}) {
    if (!bias->empty()) dequantize_row(bias->type, bias->data, row.data() + at, width);
    at += width;
  }
  return row;
}

}  // namespace specula
