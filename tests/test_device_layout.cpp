// The device layout of weight matrices (kernels/quant_tiles.h, engine/compute/device_plan.h),
// checked on the host: GGUF blocks of every quantized type repacked into tiles read back to
// exactly what dequantize_row gives, element by element and walking each lane's mma
// fragments the way the product kernel does; dense matrices in the compute type; upload
// pieces; the bytes a step reads.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "compute/device_plan.h"
#include "model/random_model.h"
#include "quant_tiles.h"
#include "random_blocks.h"
#include "tensor_view.h"

using namespace specula;
using specula::test::random_rows;
using specula::test::view;

namespace {

std::vector<uint8_t> image_of(std::span<const TensorView* const> parts, const DeviceMatrixLayout& layout) {
  std::vector<uint8_t> image(layout.bytes());
  write_device_units(parts, layout, 0, layout.units, image.data());
  return image;
}

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Every type the device keeps in tiles.
constexpr TensorType kTiledTypes[] = {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_1,
                                      TensorType::Q4_K, TensorType::Q5_K, TensorType::Q2_K, TensorType::Q3_K,
                                      TensorType::Q6_K, TensorType::IQ4_XS};

}  // namespace

class TestDeviceLayout : public QObject {
  Q_OBJECT

 private slots:
  void tiledElementsEqualDequantizeRow_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("cols");
    QTest::newRow("q8_0 odd width") << static_cast<int>(TensorType::Q8_0) << 37 << 160;
    QTest::newRow("q8_0 two tiles") << static_cast<int>(TensorType::Q8_0) << 16 << 512;
    QTest::newRow("q4_0 one row") << static_cast<int>(TensorType::Q4_0) << 1 << 96;
    QTest::newRow("q4_0 ragged") << static_cast<int>(TensorType::Q4_0) << 35 << 768;
    QTest::newRow("q4_1 ragged") << static_cast<int>(TensorType::Q4_1) << 21 << 352;
    QTest::newRow("q5_1 ragged") << static_cast<int>(TensorType::Q5_1) << 18 << 224;
    QTest::newRow("q4_k") << static_cast<int>(TensorType::Q4_K) << 40 << 512;
    QTest::newRow("q5_k") << static_cast<int>(TensorType::Q5_K) << 17 << 512;
    QTest::newRow("q2_k") << static_cast<int>(TensorType::Q2_K) << 33 << 768;
    QTest::newRow("q3_k in q6_k tiles") << static_cast<int>(TensorType::Q3_K) << 23 << 768;
    QTest::newRow("q6_k") << static_cast<int>(TensorType::Q6_K) << 19 << 768;
    QTest::newRow("iq4_xs") << static_cast<int>(TensorType::IQ4_XS) << 24 << 512;
  }
  void tiledElementsEqualDequantizeRow() {
    QFETCH(int, type);
    QFETCH(int, rows);
    QFETCH(int, cols);
    const TensorType t = static_cast<TensorType>(type);
    const std::vector<uint8_t> data = random_rows(t, rows, cols, 1);
    const TensorView m = view(t, rows, cols, data.data());
    const TensorView* parts[] = {&m};
    const DeviceMatrixLayout layout = device_layout(t, TensorType::F16, rows, cols);
    QVERIFY(layout.tiled());
    QCOMPARE(layout.type, t);
    QCOMPARE(layout.units, static_cast<int64_t>((rows + 15) / 16));
    const std::vector<uint8_t> image = image_of(parts, layout);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int r = 0; r < rows; ++r) {
      dequantize_row(t, m.row(r), row.data(), cols);
      for (int c = 0; c < cols; ++c) {
        const float got = device_element(layout, image.data(), r, c);
        if (bits(got) != bits(row[static_cast<size_t>(c)])) {
          QFAIL(qPrintable(QStringLiteral("(%1, %2): %3 on the device, %4 in the file").arg(r).arg(c).arg(got).arg(row[c])));
        }
      }
    }
    // padding rows and columns hold zero weights
    const int64_t padded_rows = layout.units * 16, padded_cols = (cols + 255) / 256 * 256;
    for (int64_t r = 0; r < padded_rows; ++r) {
      for (int64_t c = r < rows ? cols : 0; c < padded_cols; ++c) QCOMPARE(device_element(layout, image.data(), r, c), 0.0f);
    }
  }

  // Every lane's A fragments, decoded as the product kernel decodes them: the codes of
  // register r of (chunk, step) through fragment_codes, the scale of group_of, at the row and
  // column the fragment mapping names.
  void fragmentWalkReadsEveryValueOnce_data() {
    QTest::addColumn<int>("type");
    for (TensorType t : kTiledTypes) QTest::newRow(type_traits(t).name.data()) << static_cast<int>(t);
  }
  void fragmentWalkReadsEveryValueOnce() {
    QFETCH(int, type);
    const TensorType t = static_cast<TensorType>(type);
    const tiles::Format f = device_tile_format(t);
    const int rows = 32, cols = 512;
    const std::vector<uint8_t> data = random_rows(t, rows, cols, 2);
    const TensorView m = view(t, rows, cols, data.data());
    const TensorView* parts[] = {&m};
    const DeviceMatrixLayout layout = device_layout(t, TensorType::F16, rows, cols);
    const std::vector<uint8_t> image = image_of(parts, layout);
    const tiles::Shape shape{f, rows, cols};
    std::vector<float> want(static_cast<size_t>(rows) * cols);
    for (int r = 0; r < rows; ++r) dequantize_row(t, m.row(r), want.data() + r * cols, cols);
    std::vector<int> seen(want.size(), 0);
    for (int64_t rt = 0; rt < shape.row_tiles(); ++rt) {
      const uint8_t* panel = image.data() + rt * shape.panel_bytes();
      for (int64_t kt = 0; kt < shape.ktiles(); ++kt) {
        for (int lane = 0; lane < 32; ++lane) {
          uint32_t words[4 * 8];
          for (int w = 0; w < tiles::quant_words(f); ++w) {
            std::memcpy(words + 4 * w, panel + tiles::quant_offset(f, kt, w, lane), 16);
          }
          for (int c = 0; c < tiles::kChunks; ++c) {
            for (int s = 0; s < tiles::kSteps; ++s) {
              for (int r = 0; r < 4; ++r) {
                const uint32_t pair = tiles::fragment_codes(f, words, c, s, r);
                const int half = r % 2;
                const int tile_row = tiles::lane_row(lane, half);
                const uint8_t* scales = panel + tiles::scale_offset(f, shape.ktiles(), kt, tile_row);
                const uint8_t* super = panel + tiles::super_offset(f, shape.ktiles(), kt, tile_row);
                const int g = tiles::group_of(f, c, s);
                for (int e = 0; e < 2; ++e) {
                  const int code = static_cast<int>((pair >> (16 * e)) & 0xffff);
                  const int q = code - tiles::code_offset(f);
                  const float value = tiles::tile_value(f, code, scales, tiles::has_supers(f) ? super : nullptr, g);
                  const int64_t row = rt * 16 + tile_row;
                  const int64_t col = kt * 256 + tiles::lane_col(lane, c, s, 2 * (r / 2) + e);
                  QVERIFY(q >= -128 && q < 128);
                  const size_t at = static_cast<size_t>(row * cols + col);
                  ++seen[at];
                  if (bits(value) != bits(want[at])) {
                    QFAIL(qPrintable(QStringLiteral("lane %1 chunk %2 step %3 reg %4: (%5, %6) decodes to %7, not %8")
                                         .arg(lane).arg(c).arg(s).arg(r).arg(row).arg(col).arg(value).arg(want[at])));
                  }
                }
              }
            }
          }
        }
      }
    }
    QCOMPARE(std::count(seen.begin(), seen.end(), 1), static_cast<long>(seen.size()));
  }

  // The mma fragment with its k indices permuted within a step: lane (g, t) holds rows g and
  // g + 8 at columns 4t .. 4t+3 of each 16-column step, and the instruction's k indices
  // 2t, 2t+1, 2t+8, 2t+9 (registers 0/1 and 2/3) name them: a bijection onto the step.
  void fragmentMappingCoversATileOnce() {
    std::vector<int> seen(16 * 256, 0);
    for (int lane = 0; lane < 32; ++lane) {
      for (int c = 0; c < tiles::kChunks; ++c) {
        for (int s = 0; s < tiles::kSteps; ++s) {
          for (int half = 0; half < 2; ++half) {
            for (int j = 0; j < 4; ++j) {
              const int row = tiles::lane_row(lane, half), col = tiles::lane_col(lane, c, s, j);
              ++seen[static_cast<size_t>(row * 256 + col)];
              const tiles::Slot back = tiles::slot_of(row, col);
              QCOMPARE(back.lane, lane);
              QCOMPARE(back.chunk, c);
              QCOMPARE(back.step, s);
              QCOMPARE(back.half, half);
              QCOMPARE(back.j, j);
              // PTX: register r holds row g (r even) or g + 8 (r odd), k = 2t + e (+8 for r >= 2)
              const int r = tiles::reg_of(half, j), e = tiles::elem_of(j);
              QCOMPARE(r % 2, half);
              const int k = 2 * (lane % 4) + e + (r >= 2 ? 8 : 0);
              QCOMPARE(col % 16 / 4, k % 8 / 2);  // the same lane's column group
            }
          }
        }
      }
    }
    QCOMPARE(std::count(seen.begin(), seen.end(), 1), static_cast<long>(seen.size()));
  }

  void stackedPartsAndUploadPiecesMakeOneImage() {
    const TensorType t = TensorType::Q4_K;
    const std::vector<uint8_t> a = random_rows(t, 40, 256, 3), b = random_rows(t, 24, 256, 4);
    const TensorView va = view(t, 40, 256, a.data()), vb = view(t, 24, 256, b.data());
    const TensorView* parts[] = {&va, &vb};
    const DeviceMatrixLayout layout = device_layout(t, TensorType::F16, 64, 256);
    const std::vector<uint8_t> whole = image_of(parts, layout);
    for (size_t max_bytes : {size_t{1}, layout.unit_bytes, 3 * layout.unit_bytes + 7, size_t{1} << 30}) {
      const std::vector<UploadChunk> chunks = plan_upload(layout, max_bytes);
      std::vector<uint8_t> pieced(layout.bytes(), 0xAB);
      int64_t next_unit = 0;
      size_t next_offset = 0;
      for (const UploadChunk& c : chunks) {
        QCOMPARE(c.first_unit, next_unit);
        QCOMPARE(c.offset, next_offset);
        QCOMPARE(c.bytes, static_cast<size_t>(c.n_units) * layout.unit_bytes);
        QVERIFY(c.n_units >= 1 && (c.bytes <= max_bytes || c.n_units == 1));
        write_device_units(parts, layout, c.first_unit, c.n_units, pieced.data() + c.offset);
        next_unit += c.n_units;
        next_offset += c.bytes;
      }
      QCOMPARE(next_unit, layout.units);
      QVERIFY(pieced == whole);
    }
    // row 45 of the stack is row 5 of the second part
    std::vector<float> row(256);
    dequantize_row(t, vb.row(5), row.data(), 256);
    for (int c = 0; c < 256; ++c) QCOMPARE(bits(device_element(layout, whole.data(), 45, c)), bits(row[static_cast<size_t>(c)]));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, write_device_units(parts, layout, 3, 2, nullptr));
  }

  void denseMatricesConvertToTheComputeType() {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> values(3 * 64);
    for (float& v : values) v = normal(rng);
    values[5] = 70000.0f;  // beyond fp16: infinity
    const TensorView f32 = view(TensorType::F32, 3, 64, values.data());
    const TensorView* parts[] = {&f32};
    for (TensorType compute : {TensorType::F16, TensorType::BF16, TensorType::F32}) {
      const DeviceMatrixLayout layout = device_layout(TensorType::F32, compute, 3, 64);
      QVERIFY(!layout.tiled());
      QCOMPARE(layout.type, compute);
      QCOMPARE(layout.bytes(), row_bytes(compute, 64) * 3);
      const std::vector<uint8_t> image = image_of(parts, layout);
      for (size_t i = 0; i < values.size(); ++i) {
        const float want = compute == TensorType::F16    ? fp16_to_fp32(fp32_to_fp16(values[i]))
                           : compute == TensorType::BF16 ? bf16_to_fp32(fp32_to_bf16(values[i]))
                                                         : values[i];
        QCOMPARE(bits(device_element(layout, image.data(), static_cast<int64_t>(i / 64), static_cast<int64_t>(i % 64))), bits(want));
      }
    }
    // a quantized matrix that is not a tiled type expands like dequantize_row, rounded once
    // (here: BF16 stored, F16 computed)
    std::vector<uint16_t> bf(values.size());
    for (size_t i = 0; i < values.size(); ++i) bf[i] = fp32_to_bf16(values[i]);
    const TensorView vbf = view(TensorType::BF16, 3, 64, bf.data());
    const TensorView* bparts[] = {&vbf};
    const DeviceMatrixLayout layout = device_layout(TensorType::BF16, TensorType::F16, 3, 64);
    const std::vector<uint8_t> image = image_of(bparts, layout);
    for (size_t i = 0; i < values.size(); ++i) {
      QCOMPARE(bits(device_element(layout, image.data(), static_cast<int64_t>(i / 64), static_cast<int64_t>(i % 64))),
               bits(fp16_to_fp32(fp32_to_fp16(bf16_to_fp32(bf[i])))));
    }
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, device_layout(TensorType::F32, TensorType::Q8_0, 3, 64));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, device_layout(TensorType::Q6_K, TensorType::F16, 3, 64 + 8));
  }

  void stackingFollowsTypes() {
    const uint8_t byte = 0;
    const TensorView q = view(TensorType::Q4_K, 64, 256, &byte), k = q, v = view(TensorType::Q6_K, 64, 256, &byte);
    const TensorView* qkv[] = {&q, &k, &v};
    const auto groups = stack_by_type(qkv);
    QCOMPARE(groups.size(), size_t{2});
    QCOMPARE(groups[0].size(), size_t{2});
    QCOMPARE(groups[1][0], &v);
    const TensorView* same[] = {&q, &k};
    QCOMPARE(stack_by_type(same).size(), size_t{1});
  }

  void computeTypeFollowsTheMatrices() {
    const float f = 0.0f;
    Weights w;
    w.layers.resize(1);
    const auto set_all = [&](TensorType t) {
      for (TensorView* m : {&w.token_embedding, &w.output, &w.layers[0].wq, &w.layers[0].wk, &w.layers[0].wv,
                            &w.layers[0].wo, &w.layers[0].w_gate, &w.layers[0].w_up, &w.layers[0].w_down}) {
        *m = view(t, 1, 32, &f);
      }
    };
    set_all(TensorType::F32);
    QCOMPARE(device_compute_type(w), TensorType::F32);
    set_all(TensorType::BF16);
    QCOMPARE(device_compute_type(w), TensorType::BF16);
    w.layers[0].wo.type = TensorType::F32;  // mixed: fp16
    QCOMPARE(device_compute_type(w), TensorType::F16);
    set_all(TensorType::Q4_K);
    w.layers[0].w_down.type = TensorType::Q6_K;
    QCOMPARE(device_compute_type(w), TensorType::F16);
  }

  // Random K-quant models hold the values of the float model of the same seed, to within
  // the format's step, like the other quantized types' random models.
  void randomKQuantModelsLookLikeTheOthers() {
    ModelConfig c = random_model_config("tiny");
    c.dim = 256;
    c.hidden_dim = 512;
    const auto reference = make_random_model(c, TensorType::F32, 3, 1);
    const TensorView& exact = reference->weights.layers[0].w_gate;
    const double amplitude = std::sqrt(3.0 / 256);
    for (const auto& [t, tolerance] : {std::pair{TensorType::Q4_K, 0.15}, std::pair{TensorType::Q6_K, 0.04}}) {
      const auto model = make_random_model(c, t, 3, 1);
      const TensorView& w = model->weights.layers[0].w_gate;
      QCOMPARE(w.type, t);
      std::vector<float> row(256);
      double worst = 0.0;
      for (int64_t r = 0; r < w.rows; ++r) {
        dequantize_row(t, w.row(r), row.data(), 256);
        const auto* want = reinterpret_cast<const float*>(exact.row(r));
        for (int i = 0; i < 256; ++i) worst = std::max(worst, std::abs(static_cast<double>(row[i]) - want[i]));
      }
      QVERIFY2(worst <= tolerance * amplitude, qPrintable(QString::number(worst / amplitude)));
    }
    // the Q4_K_M mix: wv, w_down and the output matrix in the second type
    const auto mixed = make_random_model(c, TensorType::Q4_K, TensorType::Q6_K, 3, 1);
    QCOMPARE(mixed->weights.layers[0].wq.type, TensorType::Q4_K);
    QCOMPARE(mixed->weights.layers[0].wv.type, TensorType::Q6_K);
    QCOMPARE(mixed->weights.layers[0].w_down.type, TensorType::Q6_K);
    QCOMPARE(mixed->weights.output.type, TensorType::Q6_K);
    QCOMPARE(plan_device_model(*mixed).layers[0].qkv.size(), size_t{2});  // wq|wk, then wv
  }

  // On a GPU every type a file holds stays quantized: those the kernels read in tiles of their
  // own or Q8_0's (IQ4_NL and MXFP4, their levels as bytes), Q5_0 re-encoded into Q8_0's
  // tiles (device_tiled_type; the CPU reads it as stored) and Q3_K in Q6_K's tiles, each
  // element dequantize_row's value, bit for bit. (The random models' MXFP4 scales are f16s, as
  // the device's tiles need.)
  void everyTypeStaysQuantizedOnTheDevice() {
    ModelConfig c = random_model_config("tiny");
    c.dim = 256;
    c.hidden_dim = 512;
    for (TensorType t : {TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q2_K, TensorType::Q3_K,
                         TensorType::Q5_K, TensorType::IQ4_XS, TensorType::IQ4_NL, TensorType::MXFP4}) {
      const auto model = make_random_model(c, t, 3, 1);
      const DeviceModelPlan plan = plan_device_model(*model);
      QCOMPARE(plan.compute, TensorType::F16);
      const DeviceMatrixPlan& wo = plan.layers[0].wo;
      QVERIFY2(wo.layout.tiled(), type_traits(t).name.data());
      QCOMPARE(wo.layout.type, device_tiled_type(t));
      const std::vector<uint8_t> image = image_of(wo.parts, wo.layout);
      const TensorView& w = model->weights.layers[0].wo;
      std::vector<float> row(static_cast<size_t>(w.cols));
      for (int64_t r = 0; r < w.rows; r += 37) {
        dequantize_row(w.type, w.row(r), row.data(), w.cols);
        for (int64_t i = 0; i < w.cols; ++i) QCOMPARE(bits(device_element(wo.layout, image.data(), r, i)), bits(row[i]));
      }
    }
  }

  // An MXFP4 scale beyond an f16 (2^16 here) cannot sit in Q8_0's tiles exactly: writing the
  // units is refused, saying why, rather than rounded.
  void mxfp4ScaleBeyondAnF16IsRefusedOnTheDevice() {
    ModelConfig c = random_model_config("tiny");
    c.dim = 256;
    c.hidden_dim = 512;
    const auto model = make_random_model(c, TensorType::MXFP4, 3, 1);
    const DeviceModelPlan plan = plan_device_model(*model);
    const DeviceMatrixPlan& wo = plan.layers[0].wo;
    QVERIFY(!image_of(wo.parts, wo.layout).empty());
    auto* exponent = const_cast<uint8_t*>(model->weights.layers[0].wo.row(0));  // block 0's E8M0 byte
    const uint8_t kept = *exponent;
    *exponent = 128 + 16;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, image_of(wo.parts, wo.layout));
    *exponent = kept;
  }

  // Footprint and bytes per step of a Q4_0 model: tiles of 16 rows x 256 columns, 18 bytes
  // of quants and scales per 32 weights; a step reads every layer matrix and the output
  // matrix, not the embedding (its few rows are gathered).
  void stepBytesCountWhatAStepReads() {
    ModelConfig c = random_model_config("tiny");
    c.dim = 256;
    c.hidden_dim = 512;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.vocab_size = 100;
    c.n_layers = 2;
    const auto model = make_random_model(c, TensorType::Q4_0, 1, 1);
    const size_t per_tile = 16 * 256 / 32 * 18;  // 2304: 2048 quant bytes + 256 scale bytes
    const auto tiles_of = [](int64_t rows, int64_t cols) { return static_cast<size_t>((rows + 15) / 16 * ((cols + 255) / 256)); };
    const int64_t kv = c.kv_dim();
    const size_t layer = per_tile * (tiles_of(256 + 2 * kv, 256) + tiles_of(256, 256) + tiles_of(2 * 512, 256) + tiles_of(256, 512));
    const size_t output = per_tile * tiles_of(100, 256);
    const size_t norm = 256 * 4;
    QCOMPARE(step_weight_bytes(*model), 2 * (layer + 2 * norm) + norm + output);
    QCOMPARE(step_weight_bytes(*model, 1), layer + 2 * norm);  // a layers:1 draft step
    QCOMPARE(device_weight_bytes(*model), 2 * layer + 5 * norm + 2 * output);  // embedding + output, untied
    const int contexts[] = {10, 300};
    QCOMPARE(step_kv_bytes(c, TensorType::F16, contexts), size_t{2} * 2 * 310 * kv * 2);
    QCOMPARE(step_kv_bytes(c, TensorType::F16, contexts, 1), size_t{2} * 1 * 310 * kv * 2);
  }

  // qwen2's q|k|v biases (one stacked f32 row) and qwen3's q/k norms (head_dim f32 each) are
  // read once per layer and step, on top of what the same matrices cost without them.
  void stepBytesCountBiasesAndHeadNorms() {
    for (const char* shape : {"tiny-qwen2", "tiny-qwen3"}) {
      ModelConfig c = random_model_config(shape);
      c.dim = 256;
      c.hidden_dim = 512;
      ModelConfig plain = c;
      plain.architecture = "llama";
      const auto model = make_random_model(c, TensorType::Q4_0, 1, 1);
      const auto without = make_random_model(plain, TensorType::Q4_0, 1, 1);
      const size_t extra = sizeof(float) * static_cast<size_t>(c.architecture == "qwen2" ? c.q_dim() + 2 * c.kv_dim()
                                                                                        : 2 * c.head_dim());
      QCOMPARE(step_weight_bytes(*model) - step_weight_bytes(*without), c.n_layers * extra);
      QCOMPARE(step_weight_bytes(*model, 1) - step_weight_bytes(*without, 1), extra);
      QCOMPARE(device_weight_bytes(*model) - device_weight_bytes(*without), c.n_layers * extra);
    }
    // q biases alone: the stacked row is uploaded whole (zeros for k and v) and counted so
    Model q_only = *make_random_model(random_model_config("tiny-qwen2"), TensorType::F16, 1, 1);
    const size_t with_all = device_weight_bytes(q_only);
    for (LayerWeights& l : q_only.weights.layers) l.bk = l.bv = TensorView{};
    QCOMPARE(device_weight_bytes(q_only), with_all);
    for (LayerWeights& l : q_only.weights.layers) l.bq = TensorView{};
    QCOMPARE(device_weight_bytes(q_only) + q_only.config.n_layers * sizeof(float) *
                 static_cast<size_t>(q_only.config.q_dim() + 2 * q_only.config.kv_dim()), with_all);
  }
};

QTEST_GUILESS_MAIN(TestDeviceLayout)
#include "test_device_layout.moc"
