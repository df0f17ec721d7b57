// Every CUDA kernel against its float64 reference (kernels/reference.h) on random inputs,
// in every element type it supports. Outputs are poisoned before each run; NaN never
// passes. Skips, with the reason, where no GPU is usable.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "compute/batch.h"
#include "compute/device_plan.h"
#include "device_support.h"
#include "kernels.h"
#include "compute/kv_cache.h"
#include "random_blocks.h"
#include "reference.h"

using namespace specula;
using namespace specula::test;
using cuda::DType;
namespace ref = specula::cuda::reference;

namespace {

const DType kTypes[] = {DType::F32, DType::F16, DType::BF16};
// Every type the device keeps quantized, in its tiles.
constexpr TensorType kTiledTypes[] = {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_1,
                                      TensorType::Q4_K, TensorType::Q5_K, TensorType::Q2_K, TensorType::Q3_K,
                                      TensorType::Q6_K, TensorType::IQ4_XS};

std::string label(const char* kernel, DType t) { return std::string(kernel) + " " + dtype_name(t); }


// A random quantized matrix uploaded in its device layout, its values as dequantize_row gives
// them, and fp16 activations.
struct QuantCase {
  std::vector<uint8_t> gguf;
  DeviceMatrixLayout layout;
  std::vector<float> weights;  // (n, k)
  Typed x;                     // (max_m, k) fp16
  std::unique_ptr<Device<uint8_t>> image, d_x;
  std::unique_ptr<Device<float>> scratch;
  cuda::QuantMatrix matrix() const {
    return {device_tile_format(layout.type), image->get(), static_cast<int>(layout.rows), static_cast<int>(layout.cols)};
  }
  void run(int m, float* y, int ldy) const {
    cuda::quant_gemm(matrix(), d_x->get(), m, y, ldy, scratch->get(), nullptr);
  }
};

QuantCase quant_case(TensorType type, int n, int k, int max_m, uint32_t seed) {
  QuantCase q;
  q.gguf = test::random_rows(type, n, k, seed);
  TensorView view;
  view.type = type;
  view.rows = n;
  view.cols = k;
  view.data = q.gguf.data();
  const TensorView* parts[] = {&view};
  q.layout = device_layout(type, TensorType::F16, n, k);
  std::vector<uint8_t> image(q.layout.bytes());
  write_device_units(parts, q.layout, 0, q.layout.units, image.data());
  q.image = std::make_unique<Device<uint8_t>>(image);
  q.weights.resize(static_cast<size_t>(n) * k);
  for (int r = 0; r < n; ++r) dequantize_row(type, view.row(r), q.weights.data() + static_cast<size_t>(r) * k, k);
  std::mt19937 rng(seed + 1);
  q.x = to_typed(DType::F16, random_floats(static_cast<size_t>(max_m) * k, rng));
  q.d_x = std::make_unique<Device<uint8_t>>(q.x.raw);
  q.scratch = std::make_unique<Device<float>>(std::max<size_t>(1, cuda::quant_gemm_scratch(q.matrix(), max_m)));
  return q;
}

// Attention data that depends on (sequence, position) alone, so that the same query can be
// run in different batches and calls and compared bit for bit.
struct AttentionHeads {
  int n_heads, n_kv_heads, head_dim, block_size;
};
struct SeqStep {
  int seq, cached, fresh;  // logical sequence, positions already cached, new tokens
};
struct AttentionRun {
  std::vector<float> out;           // (n_tokens, n_heads * head_dim) as the kernel wrote it
  std::vector<double> reference;
  std::map<std::pair<int, int>, std::vector<uint8_t>> by_query;  // (seq, position) -> raw output bytes
};

float hashed(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t z = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull ^ c * 0x94d049bb133111ebull;
  z = (z ^ (z >> 31)) * 0xd6e8feb86659fd3bull;
  z ^= z >> 29;
  return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

AttentionRun run_attention(const AttentionHeads& h, DType type, const std::vector<SeqStep>& steps, bool with_reference) {
  const int q_dim = h.n_heads * h.head_dim, kv_dim = h.n_kv_heads * h.head_dim, stride = q_dim + 2 * kv_dim;
  int total = 0;
  for (const SeqStep& s : steps) total += s.cached + s.fresh;
  KvCache cache(h.block_size, total / h.block_size + static_cast<int>(steps.size()) + 1);
  RaggedBatch batch;
  for (const SeqStep& s : steps) {
    const int id = cache.create();
    if (s.cached > 0) cache.extend(id, s.cached);
    batch.add(id, std::vector<int32_t>(static_cast<size_t>(s.fresh), 1), true);
  }
  const BatchPlan plan = plan_batch(cache, batch, 1 << 20);
  const PackedPlan packed = pack_plan(plan, batch.tokens,
                                      AttentionShape{cuda::attention_query_tile(h.n_heads, h.n_kv_heads),
                                                     cuda::attention_piece_keys(), 8, h.n_heads / h.n_kv_heads});
  // keys and values at every position of every sequence, queries at the new ones
  const size_t n_slots = static_cast<size_t>(cache.num_blocks()) * h.block_size;
  std::vector<float> keys(n_slots * kv_dim, 0.0f), values(keys.size(), 0.0f);
  std::vector<float> qkv(static_cast<size_t>(plan.n_tokens) * stride, 0.0f);
  for (size_t i = 0; i < steps.size(); ++i) {
    const int id = batch.seqs[i], seq = steps[i].seq;
    for (int j = 0; j < cache.length(id); ++j) {
      const size_t slot = static_cast<size_t>(cache.slot(id, j));
      for (int c = 0; c < kv_dim; ++c) {
        keys[slot * kv_dim + c] = hashed(seq, j, 2 * c);
        values[slot * kv_dim + c] = hashed(seq, j, 2 * c + 1);
      }
    }
    for (int t = plan.seq_offsets[i]; t < plan.seq_offsets[i + 1]; ++t) {
      for (int c = 0; c < q_dim; ++c) qkv[static_cast<size_t>(t) * stride + c] = 2.0f * hashed(seq, plan.positions[t], 1000000 + c);
    }
  }
  const Typed k = to_typed(type, keys), v = to_typed(type, values);
  ref::AttentionCase c;
  c.n_heads = h.n_heads;
  c.n_kv_heads = h.n_kv_heads;
  c.head_dim = h.head_dim;
  c.block_size = h.block_size;
  for (int t = 0; t < plan.n_tokens; ++t) c.q.insert(c.q.end(), qkv.begin() + t * stride, qkv.begin() + t * stride + q_dim);
  c.k_cache = k.values;
  c.v_cache = v.values;
  c.token_seq = plan.token_seq;
  c.positions = plan.positions;
  c.table_offsets = plan.table_offsets;
  c.block_tables = plan.block_tables;

  Device<float> d_qkv(qkv);
  Device<int32_t> meta(packed.data);
  Device<uint8_t> d_k(k.raw), d_v(v.raw);
  Device<float> partials(std::max<size_t>(1, static_cast<size_t>(packed.partial_rows) * h.n_kv_heads * (h.head_dim + 2)));
  partials.poison();
  Device<uint8_t> out(static_cast<size_t>(plan.n_tokens) * q_dim * cuda::dtype_bytes(type));
  out.poison();
  cuda::AttentionArgs a;
  a.qkv = d_qkv.get();
  a.row_stride = stride;
  a.n_tokens = plan.n_tokens;
  a.k_cache = d_k.get();
  a.v_cache = d_v.get();
  a.cache_type = type;
  a.work = meta.get() + packed.work;
  a.tasks = meta.get() + packed.tasks;
  a.n_tasks = packed.n_tasks;
  a.token_work = meta.get() + packed.token_work;
  a.positions = meta.get() + packed.positions;
  a.table_offsets = meta.get() + packed.table_offsets;
  a.block_tables = meta.get() + packed.block_tables;
  a.block_size = h.block_size;
  a.n_heads = h.n_heads;
  a.n_kv_heads = h.n_kv_heads;
  a.head_dim = h.head_dim;
  a.partial_rows = packed.partial_rows;
  a.partial_values = partials.get();
  a.partial_stats = partials.get() + static_cast<size_t>(packed.partial_rows) * h.n_kv_heads * h.head_dim;
  a.out = out.get();
  cuda::paged_attention(a, nullptr);
  AttentionRun run;
  const std::vector<uint8_t> raw = out.download();
  run.out = from_typed_raw(type, raw);
  if (with_reference) run.reference = ref::attention(c);
  const size_t row_bytes = static_cast<size_t>(q_dim) * cuda::dtype_bytes(type);
  for (size_t i = 0; i < steps.size(); ++i) {
    for (int t = plan.seq_offsets[i]; t < plan.seq_offsets[i + 1]; ++t) {
      run.by_query[{steps[i].seq, plan.positions[t]}] =
          std::vector<uint8_t>(raw.begin() + static_cast<long>(t * row_bytes), raw.begin() + static_cast<long>((t + 1) * row_bytes));
    }
  }
  return run;
}

}  // namespace

class TestCudaKernels : public QObject {
  Q_OBJECT

 private slots:
  void init() { SPECULA_REQUIRE_GPU(); }

  void embeddingGathersRows() {
    std::mt19937 rng(1);
    const int vocab = 300, dim = 96;
    const std::vector<int32_t> tokens{5, 0, 299, 5, 17, 123};
    for (DType t : kTypes) {
      const Typed table = to_typed(t, random_floats(vocab * dim, rng));
      Device<uint8_t> d_table(table.raw);
      Device<int32_t> d_tokens(tokens);
      Device<float> out(tokens.size() * dim);
      out.poison();
      cuda::embedding(d_table.get(), t, dim, d_tokens.get(), static_cast<int>(tokens.size()), out.get(), nullptr);
      SPECULA_EXPECT_CLOSE(out.download(), ref::embedding(table.values, dim, tokens), 0.0, label("embedding", t));
    }
  }

  void rmsnormNormalizesTheListedRows() {
    std::mt19937 rng(2);
    const int dim = 200, n = 9;
    const std::vector<float> x = random_floats(n * dim, rng, 3.0f);
    const std::vector<float> w = random_floats(dim, rng);
    const std::vector<int32_t> all = [] { std::vector<int32_t> r(9); std::iota(r.begin(), r.end(), 0); return r; }();
    const std::vector<int32_t> some{8, 2, 5};
    Device<float> d_x(x), d_w(w);
    Device<int32_t> d_rows(some);
    for (DType t : kTypes) {
      for (const auto* rows : {&all, &some}) {
        Device<uint8_t> out(rows->size() * dim * cuda::dtype_bytes(t));
        out.poison();
        cuda::rmsnorm(d_x.get(), d_w.get(), rows == &some ? d_rows.get() : nullptr, static_cast<int>(rows->size()), dim,
                      1e-5f, out.get(), t, nullptr);
        SPECULA_EXPECT_CLOSE(from_typed_raw(t, out.download()), ref::rmsnorm(x, w, *rows, dim, 1e-5f), bound_for(t),
                             label("rmsnorm", t));
      }
    }
  }

  // Both pair layouts, with plain frequencies and with a scaled table (linear / 4 and llama3-like
  // divisors on the low frequencies), over positions up to 4095.
  void ropeRotatesQueriesAndKeys_data() {
    QTest::addColumn<bool>("halves");
    QTest::addColumn<bool>("scaled");
    QTest::newRow("adjacent pairs") << false << false;
    QTest::newRow("halves") << true << false;
    QTest::newRow("halves, scaled frequencies") << true << true;
  }
  void ropeRotatesQueriesAndKeys() {
    QFETCH(bool, halves);
    QFETCH(bool, scaled);
    std::mt19937 rng(3);
    const int head_dim = 64, n_rot_heads = 6, stride = 10 * head_dim, n = 5;  // q|k|v rows, v untouched
    const std::vector<float> qk = random_floats(n * stride, rng);
    const std::vector<int32_t> positions{0, 1, 7, 300, 4095};
    std::vector<double> frequencies;
    for (int i = 0; i < head_dim / 2; ++i) {
      const double f = std::pow(10000.0, -2.0 * i / head_dim);
      frequencies.push_back(scaled ? f / 4.0 / (i < head_dim / 4 ? 1.0 : 8.0) : f);
    }
    Device<float> d(qk);
    Device<int32_t> d_pos(positions);
    Device<double> d_freq(frequencies);
    cuda::rope(d.get(), stride, d_pos.get(), n, n_rot_heads, head_dim, d_freq.get(),
               halves ? cuda::RopeLayout::Halves : cuda::RopeLayout::AdjacentPairs, nullptr);
    // angles in double, rounded once to float for sine and cosine
    SPECULA_EXPECT_CLOSE(d.download(), ref::rope(qk, stride, positions, n_rot_heads, head_dim, frequencies, halves),
                         1e-6, std::string("rope"));
  }

  // q|k|v biases on the fused rows (the whole row) and the output bias (a row of its own).
  void addBiasAddsToEveryRow() {
    std::mt19937 rng(12);
    const int width = 96, stride = 96, n = 7;
    const std::vector<float> rows = random_floats(n * stride, rng), bias = random_floats(width, rng);
    Device<float> d(rows), d_bias(bias);
    cuda::add_bias(d.get(), stride, n, d_bias.get(), width, nullptr);
    SPECULA_EXPECT_CLOSE(d.download(), ref::add_bias(rows, stride, bias), 1e-7, std::string("add_bias"));
  }

  // qwen3's norms: the q heads from column 0, the k heads after them, v untouched; head
  // widths below and above a warp.
  void headRmsnormNormalizesEachHead_data() {
    QTest::addColumn<int>("head_dim");
    QTest::newRow("16") << 16;
    QTest::newRow("128") << 128;
  }
  void headRmsnormNormalizesEachHead() {
    QFETCH(int, head_dim);
    std::mt19937 rng(13);
    const int n_heads = 4, n_kv_heads = 2, stride = (n_heads + 2 * n_kv_heads) * head_dim, n = 9;
    const std::vector<float> qkv = random_floats(n * stride, rng, 3.0f);
    const std::vector<float> q_weight = random_floats(head_dim, rng), k_weight = random_floats(head_dim, rng);
    Device<float> d(qkv), d_q(q_weight), d_k(k_weight);
    cuda::head_rmsnorm(d.get(), stride, n, n_heads, head_dim, d_q.get(), 1e-6f, nullptr);
    cuda::head_rmsnorm(d.get() + n_heads * head_dim, stride, n, n_kv_heads, head_dim, d_k.get(), 1e-6f, nullptr);
    std::vector<double> want = ref::head_rmsnorm(qkv, stride, n_heads, head_dim, q_weight, 1e-6f);
    const std::vector<double> k_part = ref::head_rmsnorm(qkv, stride, n_heads + n_kv_heads, head_dim, k_weight, 1e-6f);
    for (int t = 0; t < n; ++t) {  // the k heads' columns from the reference that normalized them with k_weight
      const size_t at = static_cast<size_t>(t) * stride + n_heads * head_dim;
      std::copy(k_part.begin() + at, k_part.begin() + at + n_kv_heads * head_dim, want.begin() + at);
    }
    SPECULA_EXPECT_CLOSE(d.download(), want, 1e-6, std::string("head_rmsnorm"));
  }

  void swigluGatesTheUpProjection() {
    std::mt19937 rng(4);
    const int hidden = 172, n = 7;
    const std::vector<float> gu = random_floats(n * 2 * hidden, rng, 2.0f);
    Device<float> d(gu);
    for (DType t : kTypes) {
      Device<uint8_t> out(static_cast<size_t>(n) * hidden * cuda::dtype_bytes(t));
      out.poison();
      cuda::swiglu(d.get(), n, hidden, out.get(), t, nullptr);
      SPECULA_EXPECT_CLOSE(from_typed_raw(t, out.download()), ref::swiglu(gu, hidden), bound_for(t), label("swiglu", t));
    }
  }

  void residualAddsInPlace() {
    std::mt19937 rng(5);
    const std::vector<float> x = random_floats(1000, rng), y = random_floats(1000, rng);
    Device<float> dx(x), dy(y);
    cuda::residual_add(dx.get(), dy.get(), 1000, nullptr);
    std::vector<double> want(1000);
    for (size_t i = 0; i < 1000; ++i) want[i] = static_cast<double>(x[i]) + y[i];
    SPECULA_EXPECT_CLOSE(dx.download(), want, 1e-7, std::string("residual_add"));
  }

  // The fused kernels of a layer give the bits of the kernels they replace.
  void residualRmsnormIsTheAddThenTheNorm() {
    std::mt19937 rng(14);
    const int dim = 300, n = 6;
    const std::vector<float> x = random_floats(static_cast<size_t>(n) * dim, rng, 2.0f), y = random_floats(x.size(), rng);
    const std::vector<float> w = random_floats(dim, rng);
    Device<float> d_w(w), d_y(y);
    for (DType t : kTypes) {
      Device<float> x1(x), x2(x);
      Device<uint8_t> out1(static_cast<size_t>(n) * dim * cuda::dtype_bytes(t)), out2(static_cast<size_t>(n) * dim * cuda::dtype_bytes(t));
      cuda::residual_add(x1.get(), d_y.get(), static_cast<int64_t>(n) * dim, nullptr);
      cuda::rmsnorm(x1.get(), d_w.get(), nullptr, n, dim, 1e-5f, out1.get(), t, nullptr);
      cuda::residual_rmsnorm(x2.get(), d_y.get(), d_w.get(), n, dim, 1e-5f, out2.get(), t, nullptr);
      QVERIFY(x1.download() == x2.download());
      QVERIFY(out1.download() == out2.download());
    }
  }

  // In both pair layouts, over a scaled frequency table.
  void ropeKvWriteIsTheRopeThenTheWrite() {
    std::mt19937 rng(15);
    const int n_heads = 8, n_kv_heads = 2, hd = 64, q_dim = n_heads * hd, kv_dim = n_kv_heads * hd;
    const int stride = q_dim + 2 * kv_dim, n = 5, n_slots = 40;
    const std::vector<float> qkv = random_floats(static_cast<size_t>(n) * stride, rng);
    const std::vector<int32_t> positions{0, 3, 17, 300, 4095}, slot_ids{33, 2, 17, 0, 39};
    std::vector<double> frequencies;
    for (int i = 0; i < hd / 2; ++i) frequencies.push_back(std::pow(10000.0, -2.0 * i / hd) / (i < hd / 4 ? 1.0 : 8.0));
    Device<int32_t> d_pos(positions), d_slots(slot_ids);
    Device<double> d_freq(frequencies);
    for (cuda::RopeLayout layout : {cuda::RopeLayout::AdjacentPairs, cuda::RopeLayout::Halves}) {
      for (DType t : kTypes) {
        Device<float> a(qkv), b(qkv);
        const size_t cache_bytes = static_cast<size_t>(n_slots) * kv_dim * cuda::dtype_bytes(t);
        Device<uint8_t> k1(cache_bytes), v1(cache_bytes), k2(cache_bytes), v2(cache_bytes);
        for (auto* d : {&k1, &v1, &k2, &v2}) d->poison();
        cuda::rope(a.get(), stride, d_pos.get(), n, n_heads + n_kv_heads, hd, d_freq.get(), layout, nullptr);
        cuda::kv_write(a.get(), stride, q_dim, q_dim + kv_dim, d_slots.get(), n, kv_dim, k1.get(), v1.get(), t, nullptr);
        cuda::RopeKvArgs r;
        r.qkv = b.get();
        r.row_stride = stride;
        r.n_tokens = n;
        r.positions = d_pos.get();
        r.cache_slots = d_slots.get();
        r.n_heads = n_heads;
        r.n_kv_heads = n_kv_heads;
        r.head_dim = hd;
        r.frequencies = d_freq.get();
        r.layout = layout;
        r.k_cache = k2.get();
        r.v_cache = v2.get();
        r.cache_type = t;
        cuda::rope_kv_write(r, nullptr);
        QVERIFY(a.download() == b.download());
        QVERIFY(k1.download() == k2.download());
        QVERIFY(v1.download() == v2.download());
      }
    }
  }

  void kvWriteFillsTheSlots() {
    std::mt19937 rng(6);
    const int kv_dim = 48, dim = 96, stride = dim + 2 * kv_dim, n_slots = 40;
    const std::vector<int32_t> target{33, 2, 17, 0};
    const std::vector<float> qkv = random_floats(target.size() * stride, rng);
    Device<float> d_qkv(qkv);
    Device<int32_t> d_slots(target);
    for (DType t : kTypes) {
      Device<uint8_t> k(static_cast<size_t>(n_slots) * kv_dim * cuda::dtype_bytes(t)), v(static_cast<size_t>(n_slots) * kv_dim * cuda::dtype_bytes(t));
      k.poison();
      v.poison();
      cuda::kv_write(d_qkv.get(), stride, dim, dim + kv_dim, d_slots.get(), static_cast<int>(target.size()), kv_dim,
                     k.get(), v.get(), t, nullptr);
      const std::vector<float> got_k = from_typed_raw(t, k.download()), got_v = from_typed_raw(t, v.download());
      std::vector<float> gk, gv;
      std::vector<double> wk, wv;
      for (size_t i = 0; i < target.size(); ++i) {
        for (int c = 0; c < kv_dim; ++c) {
          gk.push_back(got_k[static_cast<size_t>(target[i]) * kv_dim + c]);
          gv.push_back(got_v[static_cast<size_t>(target[i]) * kv_dim + c]);
          wk.push_back(qkv[i * stride + dim + c]);
          wv.push_back(qkv[i * stride + dim + kv_dim + c]);
        }
      }
      SPECULA_EXPECT_CLOSE(gk, wk, bound_for(t), label("kv_write keys", t));
      SPECULA_EXPECT_CLOSE(gv, wv, bound_for(t), label("kv_write values", t));
      // untouched slots keep the poison
      QVERIFY(std::isnan(got_k[static_cast<size_t>(1) * kv_dim]));
    }
  }

  void pagedAttentionOverRaggedSequences_data() {
    QTest::addColumn<int>("n_heads");
    QTest::addColumn<int>("n_kv_heads");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<int>("block_size");
    QTest::newRow("mha 128") << 4 << 4 << 128 << 16;
    QTest::newRow("gqa 2") << 8 << 4 << 8 << 4;
    QTest::newRow("gqa 8") << 16 << 2 << 64 << 16;
    QTest::newRow("mqa") << 32 << 1 << 32 << 8;
    QTest::newRow("head 256") << 2 << 1 << 256 << 16;
  }
  // Ragged steps (a prefill, decoding rows at 4,000 cached positions, a verified draft, a
  // part of a prompt) against the float64 reference, and each query's bits alone, in other
  // batches and with its sequence's tokens split over two calls.
  void pagedAttentionOverRaggedSequences() {
    QFETCH(int, n_heads);
    QFETCH(int, n_kv_heads);
    QFETCH(int, head_dim);
    QFETCH(int, block_size);
    const AttentionHeads heads{n_heads, n_kv_heads, head_dim, block_size};
    // (sequence, cached positions before the step, new tokens): prefill items folding their
    // pieces in one block, decode and verification items spreading them over blocks
    const std::vector<SeqStep> together{{0, 0, 37}, {1, 4000, 1}, {2, 200, 5}, {3, 60, 9}, {4, 4090, 6}, {5, 300, 12}};
    for (DType t : kTypes) {
      const AttentionRun all = run_attention(heads, t, together, true);
      SPECULA_EXPECT_CLOSE(all.out, all.reference, bound_for(t), label("paged_attention", t));
      for (const auto& alone : {std::vector<SeqStep>{{1, 4000, 1}}, std::vector<SeqStep>{{2, 200, 5}},
                                std::vector<SeqStep>{{4, 4093, 3}, {0, 30, 7}}, std::vector<SeqStep>{{2, 202, 3}},
                                std::vector<SeqStep>{{5, 305, 2}}}) {
        const AttentionRun other = run_attention(heads, t, alone, false);
        for (const auto& [key, values] : other.by_query) {
          const auto it = all.by_query.find(key);
          QVERIFY(it != all.by_query.end());
          QVERIFY2(it->second == values, qPrintable(QStringLiteral("sequence %1 position %2 (%3): other bits in another batch")
                                                        .arg(key.first).arg(key.second).arg(dtype_name(t))));
        }
      }
    }
  }

  void gemmInBothModes_data() {
    QTest::addColumn<int>("m");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("k");
    QTest::newRow("decode") << 1 << 96 << 256;
    QTest::newRow("verify") << 40 << 130 << 64;
    QTest::newRow("odd width") << 7 << 33 << 172;  // rows not 16-byte multiples: scalar loads
    QTest::newRow("prefill") << 300 << 64 << 128;
  }
  void gemmInBothModes() {
    QFETCH(int, m);
    QFETCH(int, n);
    QFETCH(int, k);
    std::mt19937 rng(8);
    cublasHandle_t handle;
    cuda::check(cublasCreate(&handle), "cublasCreate");
    for (DType t : kTypes) {
      const Typed x = to_typed(t, random_floats(static_cast<size_t>(m) * k, rng));
      const Typed w = to_typed(t, random_floats(static_cast<size_t>(n) * k, rng));
      const std::vector<double> want = ref::gemm(x.values, w.values, m, n, k);
      Device<uint8_t> dx(x.raw), dw(w.raw);
      for (cuda::GemmMode mode : {cuda::GemmMode::Cublas, cuda::GemmMode::Invariant}) {
        Device<float> y(static_cast<size_t>(m) * n);
        y.poison();
        cuda::gemm(handle, mode, dx.get(), dw.get(), t, m, n, k, y.get(), n, nullptr);
        // fp32 accumulation of exactly representable products: the f32 bound for every type
        SPECULA_EXPECT_CLOSE(y.download(), want, 2e-5,
                             label(mode == cuda::GemmMode::Cublas ? "gemm cublas" : "gemm invariant", t));
      }
    }
    cublasDestroy(handle);
  }

  void invariantGemmRowsDoNotDependOnTheBatch() {
    std::mt19937 rng(9);
    const int n = 200, k = 512, m = 37;
    cublasHandle_t handle;
    cuda::check(cublasCreate(&handle), "cublasCreate");
    for (DType t : kTypes) {
      const Typed x = to_typed(t, random_floats(static_cast<size_t>(m) * k, rng));
      const Typed w = to_typed(t, random_floats(static_cast<size_t>(n) * k, rng));
      Device<uint8_t> dx(x.raw), dw(w.raw);
      Device<float> all(static_cast<size_t>(m) * n), one(n);
      cuda::gemm(handle, cuda::GemmMode::Invariant, dx.get(), dw.get(), t, m, n, k, all.get(), n, nullptr);
      const std::vector<float> batch = all.download();
      for (int row : {0, 9, 36}) {
        cuda::gemm(handle, cuda::GemmMode::Invariant, dx.get() + static_cast<size_t>(row) * k * cuda::dtype_bytes(t),
                   dw.get(), t, 1, n, k, one.get(), n, nullptr);
        const std::vector<float> alone = one.download();
        QVERIFY2(std::memcmp(alone.data(), batch.data() + static_cast<size_t>(row) * n, n * sizeof(float)) == 0,
                 qPrintable(QStringLiteral("row %1 differs alone and in a batch of %2 (%3)").arg(row).arg(m).arg(dtype_name(t))));
      }
    }
    cublasDestroy(handle);
  }

  // Quantized products: every weight type, row counts from one decoding row to a prefill,
  // matrices whose rows and columns are not whole tiles; against float64 products of what
  // dequantize_row gives and the fp16 activations.
  void quantGemmMatchesTheReference_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("k");
    for (TensorType t : kTiledTypes) {
      QTest::newRow(qPrintable(QStringLiteral("%1 200x768").arg(type_traits(t).name.data()))) << static_cast<int>(t) << 200 << 768;
      QTest::newRow(qPrintable(QStringLiteral("%1 4096x4096").arg(type_traits(t).name.data()))) << static_cast<int>(t) << 4096 << 4096;
    }
    QTest::newRow("q8_0 odd width") << static_cast<int>(TensorType::Q8_0) << 37 << 160;
    QTest::newRow("q4_0 odd width") << static_cast<int>(TensorType::Q4_0) << 50 << 96;
    QTest::newRow("q4_1 odd width") << static_cast<int>(TensorType::Q4_1) << 45 << 160;
    QTest::newRow("q5_1 odd width") << static_cast<int>(TensorType::Q5_1) << 29 << 96;
  }
  void quantGemmMatchesTheReference() {
    QFETCH(int, type);
    QFETCH(int, n);
    QFETCH(int, k);
    const QuantCase q = quant_case(static_cast<TensorType>(type), n, k, 140, 21);
    const bool large = static_cast<int64_t>(n) * k > (1 << 20);  // keep the float64 reference to seconds
    for (int m : large ? std::vector<int>{1, 8, 64} : std::vector<int>{1, 8, 13, 40, 64, 140}) {
      Device<float> y(static_cast<size_t>(m) * n);
      y.poison();
      q.run(m, y.get(), n);
      std::vector<double> want(static_cast<size_t>(m) * n);
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double sum = 0.0;
          for (int l = 0; l < k; ++l) sum += static_cast<double>(q.x.values[static_cast<size_t>(i) * k + l]) * q.weights[static_cast<size_t>(j) * k + l];
          want[static_cast<size_t>(i) * n + j] = sum;
        }
      }
      // exact products accumulated in fp32, then scaled in fp32
      SPECULA_EXPECT_CLOSE(y.download(), want, 1e-4, "quant_gemm " + std::string(type_traits(static_cast<TensorType>(type)).name) +
                                                         " m=" + std::to_string(m));
    }
  }

  // A row's products are the same bits alone and among 7, 8, 9, 33, 64, 65 or 140 rows, and
  // written into a wider output.
  void quantGemmRowsDoNotDependOnTheBatch() {
    for (TensorType t : kTiledTypes) {
      const int n = 300, k = 1024, rows = 140;
      const QuantCase q = quant_case(t, n, k, rows, 22);
      Device<float> all(static_cast<size_t>(rows) * (n + 5));
      q.run(rows, all.get(), n + 5);
      const std::vector<float> batch = all.download();
      for (int m : {1, 7, 8, 9, 33, 64, 65}) {
        Device<float> part(static_cast<size_t>(m) * n);
        q.run(m, part.get(), n);
        const std::vector<float> got = part.download();
        for (int i = 0; i < m; ++i) {
          QVERIFY2(std::memcmp(got.data() + static_cast<size_t>(i) * n, batch.data() + static_cast<size_t>(i) * (n + 5), n * sizeof(float)) == 0,
                   qPrintable(QStringLiteral("%1: row %2 of %3 differs from the same row of %4").arg(type_traits(t).name.data()).arg(i).arg(m).arg(rows)));
        }
      }
    }
  }

  // The fp16 rows the prefill path hands cuBLAS, and embedding rows from a quantized table:
  // exactly what dequantize_row gives (rounded once to fp16 for the former).
  void dequantizedRowsAreExact() {
    for (TensorType t : kTiledTypes) {
      const int n = 70, k = 512;
      const QuantCase q = quant_case(t, n, k, 1, 23);
      Device<uint16_t> rows(static_cast<size_t>(37) * k);
      rows.poison();
      cuda::dequantize_rows(q.matrix(), 16, 37, rows.get(), nullptr);
      const std::vector<uint16_t> got = rows.download();
      for (int r = 0; r < 37; ++r) {
        for (int c = 0; c < k; ++c) {
          QCOMPARE(got[static_cast<size_t>(r) * k + c], fp32_to_fp16(q.weights[static_cast<size_t>(16 + r) * k + c]));
        }
      }
      const std::vector<int32_t> tokens{5, 0, 69, 5};
      Device<int32_t> d_tokens(tokens);
      Device<float> out(tokens.size() * k);
      out.poison();
      cuda::embedding(q.matrix(), d_tokens.get(), static_cast<int>(tokens.size()), out.get(), nullptr);
      const std::vector<float> gathered = out.download();
      for (size_t i = 0; i < tokens.size(); ++i) {
        QVERIFY(std::memcmp(gathered.data() + i * k, q.weights.data() + static_cast<size_t>(tokens[i]) * k, k * sizeof(float)) == 0);
      }
    }
  }

  void argmaxTakesTheFirstLargest() {
    std::mt19937 rng(10);
    const int vocab = 32000, rows = 5;
    std::vector<float> logits = random_floats(static_cast<size_t>(vocab) * rows, rng);
    logits[2 * vocab + 31999] = 50.0f;  // last index
    logits[3 * vocab + 700] = 9.0f;     // a tie: the lower index wins
    logits[3 * vocab + 20000] = 9.0f;
    Device<float> d(logits);
    Device<int32_t> out(rows);
    out.poison();
    cuda::argmax_rows(d.get(), rows, vocab, out.get(), nullptr);
    const std::vector<int32_t> got = out.download();
    for (int r = 0; r < rows; ++r) QCOMPARE(got[static_cast<size_t>(r)], ref::argmax(logits.data() + static_cast<size_t>(r) * vocab, vocab));
    QCOMPARE(got[3], 700);
  }

  void samplingProbsFilterAndRenormalize() {
    std::mt19937 rng(11);
    const int vocab = 5000;
    // (temperature, top_k, top_p, min_p) per row
    // row 7's top-k set holds less than top_p of the mass: the top-k set stays; row 8's holds
    // 65% of it: the nucleus (8 tokens) is half of the whole mass, not half of the top-k set's
    const std::vector<float> temperature{0.0f, 1.0f, 0.7f, 1.3f, 0.8f, 1.0f, 0.5f, 2.0f, 0.7f};
    const std::vector<int32_t> top_k{0, 0, 50, 0, 0, 1, 40, 5, 20};
    const std::vector<float> top_p{1.0f, 1.0f, 1.0f, 0.9f, 1.0f, 1.0f, 0.5f, 0.95f, 0.5f};
    const std::vector<float> min_p{0.0f, 0.0f, 0.0f, 0.0f, 0.05f, 0.0f, 0.1f, 0.0f, 0.0f};
    const int rows = static_cast<int>(temperature.size());
    const std::vector<float> logits = random_floats(static_cast<size_t>(vocab) * rows, rng, 2.5f);
    Device<float> d_logits(logits), d_t(temperature), d_p(top_p), d_min(min_p), probs(static_cast<size_t>(vocab) * rows);
    Device<int32_t> d_k(top_k);
    probs.poison();
    cuda::sampling_probs(d_logits.get(), rows, vocab, d_t.get(), d_k.get(), d_p.get(), d_min.get(), probs.get(), nullptr);
    const std::vector<float> got = probs.download();
    for (int r = 0; r < rows; ++r) {
      const std::vector<double> want = ref::sampling_probs(logits.data() + static_cast<size_t>(r) * vocab, vocab,
                                                           temperature[r], top_k[r], top_p[r], min_p[r]);
      const std::vector<float> row(got.begin() + r * vocab, got.begin() + (r + 1) * vocab);
      for (int i = 0; i < vocab; ++i) {
        QVERIFY2((row[i] == 0.0f) == (want[i] == 0.0),
                 qPrintable(QStringLiteral("row %1: token %2 filtered differently").arg(r).arg(i)));
      }
      SPECULA_EXPECT_CLOSE(row, want, 1e-5, "sampling_probs row " + std::to_string(r));
    }
  }

  void sampleDrawsByInverseCdf() {
    std::mt19937 rng(12);
    const int vocab = 3000, rows = 64;
    std::vector<float> probs(static_cast<size_t>(vocab) * rows, 0.0f);
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    for (int r = 0; r < rows; ++r) {
      for (int i = 0; i < vocab; ++i) {  // sparse rows, as after filtering
        if (uniform(rng) < 0.05f) probs[static_cast<size_t>(r) * vocab + i] = uniform(rng);
      }
    }
    std::vector<float> u(rows);
    for (float& x : u) x = uniform(rng);
    u[0] = 0.0f;
    u[1] = 0.99999994f;
    Device<float> d_probs(probs), d_u(u);
    Device<int32_t> out(rows);
    out.poison();
    cuda::sample_rows(d_probs.get(), rows, vocab, d_u.get(), out.get(), nullptr);
    const std::vector<int32_t> got = out.download();
    for (int r = 0; r < rows; ++r) {
      const float* row = probs.data() + static_cast<size_t>(r) * vocab;
      QVERIFY(row[got[static_cast<size_t>(r)]] > 0.0f);  // never a filtered token
      QCOMPARE(got[static_cast<size_t>(r)], ref::sample(row, vocab, u[static_cast<size_t>(r)]));
    }
  }

  void speculativeVerifyAcceptsAndRedraws() {
    std::mt19937 rng(13);
    const int vocab = 4000, rows = 48;
    std::vector<float> p(static_cast<size_t>(vocab) * rows), q(p.size());
    const auto softmax_into = [&](std::vector<float>& dst) {
      const std::vector<float> logits = random_floats(dst.size(), rng, 2.0f);
      for (int r = 0; r < rows; ++r) {
        double sum = 0.0;
        for (int i = 0; i < vocab; ++i) sum += std::exp(logits[static_cast<size_t>(r) * vocab + i]);
        for (int i = 0; i < vocab; ++i) dst[static_cast<size_t>(r) * vocab + i] = static_cast<float>(std::exp(logits[static_cast<size_t>(r) * vocab + i]) / sum);
      }
    };
    softmax_into(p);
    softmax_into(q);
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    std::vector<int32_t> draft(rows);
    std::vector<float> ua(rows), ur(rows);
    for (int r = 0; r < rows; ++r) {
      draft[static_cast<size_t>(r)] = ref::sample(q.data() + static_cast<size_t>(r) * vocab, vocab, uniform(rng));
      ua[static_cast<size_t>(r)] = uniform(rng);
      ur[static_cast<size_t>(r)] = uniform(rng);
    }
    Device<float> d_p(p), d_q(q), d_ua(ua), d_ur(ur);
    Device<int32_t> d_draft(draft), accepted(rows), residual(rows);
    accepted.poison();
    residual.poison();
    cuda::speculative_verify(d_p.get(), d_q.get(), d_draft.get(), rows, vocab, d_ua.get(), d_ur.get(), accepted.get(),
                             residual.get(), nullptr);
    const std::vector<int32_t> got_a = accepted.download(), got_r = residual.download();
    int n_accepted = 0;
    for (int r = 0; r < rows; ++r) {
      const ref::Verdict want = ref::verify(p.data() + static_cast<size_t>(r) * vocab, q.data() + static_cast<size_t>(r) * vocab,
                                            vocab, draft[static_cast<size_t>(r)], ua[static_cast<size_t>(r)], ur[static_cast<size_t>(r)]);
      QCOMPARE(got_a[static_cast<size_t>(r)], want.accepted ? 1 : 0);
      QCOMPARE(got_r[static_cast<size_t>(r)], want.residual);
      n_accepted += got_a[static_cast<size_t>(r)];
    }
    QVERIFY(n_accepted > 0 && n_accepted < rows);  // both branches exercised
  }
};

QTEST_GUILESS_MAIN(TestCudaKernels)
#include "test_cuda_kernels.moc"
