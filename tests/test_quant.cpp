// Tensor type codecs against independent references: dequantization against scalar
// decoders written here from the GGML block specifications (element by element, not the
// engine's loop structure), quantization against blocks the `gguf` Python package made
// (tests/data/quant_oracle.json, tools/oracles/quant_oracle.py), and round-trip bounds.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "model/tensor.h"

using namespace specula;

namespace {

// IEEE binary16 from its definition: (-1)^s * 2^(e-15) * 1.m, subnormals 2^-14 * 0.m.
double ref_half(const uint8_t* p) {
  const unsigned h = p[0] | (p[1] << 8);
  const int sign = (h >> 15) ? -1 : 1;
  const int e = (h >> 10) & 31;
  const int m = h & 1023;
  if (e == 31) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

double ref_bf16(const uint8_t* p) {
  const uint32_t bits = static_cast<uint32_t>(p[0] | (p[1] << 8)) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Element e (0..31) of a Q8_0 block: bytes 0-1 f16 d, bytes 2..33 int8 quants.
double ref_q8_0(const uint8_t* b, int e) { return ref_half(b) * static_cast<int8_t>(b[2 + e]); }

// Element e of a Q4_0 block: bytes 0-1 f16 d; element e < 16 in the low nibble of byte
// 2+e, element e >= 16 in the high nibble of byte 2+e-16.
double ref_q4_0(const uint8_t* b, int e) {
  const int byte = b[2 + e % 16];
  const int q = e < 16 ? (byte & 15) : (byte >> 4);
  return ref_half(b) * (q - 8);
}

// Q4_K (144 bytes): f16 d @0, f16 dmin @2, 12 bytes of packed 6-bit scales/mins @4,
// 128 bytes of nibbles @16. Sub-block j (32 values) of the 8: scale/min j < 4 in the low 6
// bits of bytes j and j+4; j >= 4 low 4 bits from byte j+4 (scale low nibble, min high
// nibble) and top 2 bits from the top of bytes j-4 (scale) and j (min). Values of
// sub-blocks 2c and 2c+1 share the 32 bytes of chunk c: low nibbles then high nibbles.
void ref_q4_k_scale(const uint8_t* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] % 64;
    *min = s[j + 4] % 64;
  } else {
    *scale = (s[j + 4] % 16) + (s[j - 4] / 64) * 16;
    *min = (s[j + 4] / 16) + (s[j] / 64) * 16;
  }
}
double ref_q4_k(const uint8_t* b, int e, double* magnitude) {
  const int sub = e / 32, chunk = e / 64, l = e % 32;
  const int byte = b[16 + chunk * 32 + l];
  const int q = sub % 2 == 0 ? byte % 16 : byte / 16;
  int scale, min;
  ref_q4_k_scale(b + 4, sub, &scale, &min);
  const double a = ref_half(b) * scale * q, m = ref_half(b + 2) * min;
  *magnitude = std::fabs(a) + std::fabs(m);
  return a - m;
}

// Q6_K (210 bytes): ql[128] @0, qh[64] @128, int8 scales[16] @192, f16 d @208. Each half
// (128 values) has 64 ql bytes and 32 qh bytes; its quarter k (32 values, l = 0..31) takes
// the low (k < 2) or high (k >= 2) nibble of ql[l + 32*(k%2)], bits 2k..2k+1 of qh[l], and
// scale l/16 + 2k of the half's 8. q6 = nibble | high2 << 4, value d * scale * (q6 - 32).
double ref_q6_k(const uint8_t* b, int e, double* magnitude) {
  const int half = e / 128, k = (e % 128) / 32, l = e % 32;
  const int ql = b[half * 64 + l + 32 * (k % 2)];
  const int low = k < 2 ? ql % 16 : ql / 16;
  const int high = (b[128 + half * 32 + l] >> (2 * k)) & 3;
  const int scale = static_cast<int8_t>(b[192 + half * 8 + l / 16 + 2 * k]);
  const double v = ref_half(b + 208) * scale * (low + 16 * high - 32);
  *magnitude = std::fabs(v);
  return v;
}

void put_half(uint8_t* p, uint16_t h) {
  p[0] = static_cast<uint8_t>(h & 0xff);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// f16 scales worth trying: largest, smallest normal, subnormals, zero, negative, ordinary.
const uint16_t kScales[] = {0x7bff, 0x0400, 0x0001, 0x03ff, 0x0000, 0x8000, 0xfbff, 0x8001, 0x3c00, 0x2e66};

// Random blocks of `bytes`, with every scale of kScales at `scale_offsets` and quant bytes
// that are random, all zero, all 0xff, all 0x7f and all 0x80.
std::vector<std::vector<uint8_t>> test_blocks(size_t bytes, std::vector<size_t> scale_offsets, size_t quant_begin,
                                              size_t quant_end) {
  std::mt19937 rng(1234);
  std::vector<std::vector<uint8_t>> blocks;
  for (int fill : {-1, 0x00, 0xff, 0x7f, 0x80}) {
    for (uint16_t s0 : kScales) {
      for (int rep = 0; rep < 3; rep++) {
        std::vector<uint8_t> b(bytes);
        for (auto& x : b) x = static_cast<uint8_t>(rng());
        if (fill >= 0) std::fill(b.begin() + quant_begin, b.begin() + quant_end, static_cast<uint8_t>(fill));
        for (size_t i = 0; i < scale_offsets.size(); i++) {
          put_half(&b[scale_offsets[i]], i == 0 ? s0 : kScales[rng() % std::size(kScales)]);
        }
        blocks.push_back(std::move(b));
      }
    }
  }
  return blocks;
}

bool same_float(float a, double ref) {
  return static_cast<double>(a) == ref || (std::isnan(a) && std::isnan(ref));
}

}  // namespace

class TestQuant : public QObject {
  Q_OBJECT
 private slots:
  void typeTraits() {
    QCOMPARE(type_traits(TensorType::Q4_K).block_bytes, 144);
    QCOMPARE(type_traits(TensorType::Q6_K).block_bytes, 210);
    QCOMPARE(row_bytes(TensorType::Q8_0, 64), size_t{68});
    QCOMPARE(row_bytes(TensorType::BF16, 3), size_t{6});
    QVERIFY(tensor_type_from_ggml(14) == TensorType::Q6_K);
    // every type GGML defines a layout for is named, supported or not; removed ids are not
    QVERIFY(tensor_type_from_ggml(3) == TensorType::Q4_1);
    QCOMPARE(type_traits(TensorType::Q5_K).block_bytes, 176);
    QCOMPARE(type_traits(TensorType::IQ2_XXS).name, std::string_view("iq2_xxs"));
    QVERIFY(!tensor_type_from_ggml(4).has_value());
    QVERIFY(!tensor_type_from_ggml(4000).has_value());
    QVERIFY(is_supported_type(TensorType::Q4_1) && is_supported_type(TensorType::Q5_0));
    QVERIFY(!is_supported_type(TensorType::IQ2_XXS) && !is_supported_type(TensorType::I32));
    QVERIFY(supported_type_names().starts_with("f32, f16, bf16, q8_0, q4_0, q4_K, q6_K"));
    QVERIFY(supported_type_names().find("iq2_xxs") == std::string::npos);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, dequantize_row(TensorType::IQ2_XXS, nullptr, nullptr, 256));
    QVERIFY(tensor_type_from_name("q4_0") == TensorType::Q4_0);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, row_bytes(TensorType::Q4_0, 33));
  }

  void everyHalfDecodes() {
    for (uint32_t h = 0; h < 65536; h++) {
      const uint8_t bytes[2] = {static_cast<uint8_t>(h & 0xff), static_cast<uint8_t>(h >> 8)};
      const float f = fp16_to_fp32(static_cast<uint16_t>(h));
      if (!same_float(f, ref_half(bytes))) QFAIL(qPrintable("decoding half 0x" + QString::number(h, 16)));
      // exact values encode back
      if (!std::isnan(f) && fp32_to_fp16(f) != h) QFAIL(qPrintable("encoding half 0x" + QString::number(h, 16)));
    }
  }

  void dequantizeFloatTypes() {
    std::mt19937 rng(7);
    std::vector<uint8_t> bytes(2 * 4096);
    for (auto& x : bytes) x = static_cast<uint8_t>(rng());
    for (uint16_t h : {0x7bff, 0x0400, 0x0001, 0x03ff, 0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00}) {
      put_half(&bytes[2 * (h % 4096)], h);
    }
    std::vector<float> out(4096);
    dequantize_row(TensorType::F16, bytes.data(), out.data(), 4096);
    for (int i = 0; i < 4096; i++) QVERIFY2(same_float(out[i], ref_half(&bytes[2 * i])), qPrintable(QString::number(i)));
    dequantize_row(TensorType::BF16, bytes.data(), out.data(), 4096);
    for (int i = 0; i < 4096; i++) QVERIFY(same_float(out[i], ref_bf16(&bytes[2 * i])));
    std::vector<float> f32(1024);
    for (auto& x : f32) x = std::uniform_real_distribution<float>(-5, 5)(rng);
    dequantize_row(TensorType::F32, f32.data(), out.data(), 1024);
    QVERIFY(std::memcmp(out.data(), f32.data(), 4096) == 0);
  }

  // A single multiplication of an f16 by a small integer is exact in double and rounds
  // once to float, so Q8_0 and Q4_0 must match the reference exactly.
  void dequantizeQ8_0() {
    for (const auto& b : test_blocks(34, {0}, 2, 34)) {
      float out[32];
      dequantize_row(TensorType::Q8_0, b.data(), out, 32);
      for (int e = 0; e < 32; e++) QVERIFY2(same_float(out[e], static_cast<float>(ref_q8_0(b.data(), e))), qPrintable(QString::number(e)));
    }
  }

  void dequantizeQ4_0() {
    for (const auto& b : test_blocks(18, {0}, 2, 18)) {
      float out[32];
      dequantize_row(TensorType::Q4_0, b.data(), out, 32);
      for (int e = 0; e < 32; e++) QVERIFY(same_float(out[e], static_cast<float>(ref_q4_0(b.data(), e))));
    }
  }

  // K-quants multiply two scales before the quant (and subtract a minimum), rounding in
  // float on the way; allow a few float rounding errors relative to the terms' magnitude.
  void dequantizeQ4_K() {
    const auto blocks = test_blocks(144, {0, 2}, 4, 144);
    std::vector<uint8_t> row;
    for (const auto& b : blocks) row.insert(row.end(), b.begin(), b.end());
    const int64_t n = static_cast<int64_t>(blocks.size()) * 256;
    std::vector<float> out(static_cast<size_t>(n));
    dequantize_row(TensorType::Q4_K, row.data(), out.data(), n);
    for (size_t k = 0; k < blocks.size(); k++) {
      for (int e = 0; e < 256; e++) {
        double magnitude;
        const double ref = ref_q4_k(blocks[k].data(), e, &magnitude);
        const double got = out[k * 256 + static_cast<size_t>(e)];
        QVERIFY2(std::fabs(got - ref) <= magnitude * 0x1p-21 + 0x1p-140,
                 qPrintable(QString("block %1 element %2: %3 vs %4").arg(k).arg(e).arg(got).arg(ref)));
      }
    }
  }

  void dequantizeQ6_K() {
    const auto blocks = test_blocks(210, {208}, 0, 208);
    std::vector<uint8_t> row;
    for (const auto& b : blocks) row.insert(row.end(), b.begin(), b.end());
    const int64_t n = static_cast<int64_t>(blocks.size()) * 256;
    std::vector<float> out(static_cast<size_t>(n));
    dequantize_row(TensorType::Q6_K, row.data(), out.data(), n);
    for (size_t k = 0; k < blocks.size(); k++) {
      for (int e = 0; e < 256; e++) {
        double magnitude;
        const double ref = ref_q6_k(blocks[k].data(), e, &magnitude);
        const double got = out[k * 256 + static_cast<size_t>(e)];
        QVERIFY2(std::fabs(got - ref) <= magnitude * 0x1p-22 + 0x1p-140,
                 qPrintable(QString("block %1 element %2: %3 vs %4").arg(k).arg(e).arg(got).arg(ref)));
      }
    }
  }

  // Every type beyond the first seven decodes to the gguf package's values bit for bit
  // (tests/data/dequant_oracle.json, tools/oracles/dequant_oracle.py: random blocks, and
  // blocks of the real SmolLM2 Q4_1 and Gemma Q5_0 files); Q5_0 as a device converts it (to
  // Q8_0, device_tiled_type; the CPU kernels read every type as stored) decodes to the same
  // bits after conversion; Q4_1, Q5_0 and Q5_1 quantize as gguf does.
  void newTypesMatchGgufPackage() {
    std::ifstream in(SPECULA_TEST_DATA_DIR "/dequant_oracle.json");
    QVERIFY(in.good());
    const auto j = nlohmann::json::parse(in);
    const auto bytes = [](const std::string& hex) {
      return QByteArray::fromHex(QByteArray::fromStdString(hex));
    };
    int types = 0;
    for (const auto& [name, entry] : j["types"].items()) {
      const auto type = tensor_type_from_name(name);
      QVERIFY2(type && static_cast<int>(*type) == entry["ggml_type"].get<int>(), name.c_str());
      QVERIFY2(is_supported_type(*type), name.c_str());
      const QByteArray blocks = bytes(entry["blocks"]);
      const QByteArray values = bytes(entry["values"]);
      const int64_t n = values.size() / 4;
      QCOMPARE(static_cast<size_t>(blocks.size()), row_bytes(*type, n));
      std::vector<float> got(static_cast<size_t>(n));
      dequantize_row(*type, blocks.constData(), got.data(), n);
      for (int64_t i = 0; i < n; i++) {
        float want;
        std::memcpy(&want, values.constData() + 4 * i, 4);
        QVERIFY2(std::memcmp(&got[static_cast<size_t>(i)], &want, 4) == 0,
                 qPrintable(QString("%1 value %2: %3, gguf %4").arg(name.c_str()).arg(i).arg(got[i]).arg(want)));
      }
      const TensorType target = *type == TensorType::Q5_0 ? TensorType::Q8_0 : *type;
      if (target != *type) {
        // re-encoded, per block (Q5_0 for a device; every type has a CPU kernel of its own)
        const int64_t per_block = type_traits(*type).block_elements;
        int converted = 0;
        for (int64_t b = 0; b < n / per_block; b++) {
          std::vector<uint8_t> dst(row_bytes(target, per_block));
          const char* src = blocks.constData() + b * type_traits(*type).block_bytes;
          QVERIFY2(convert_row_exact(*type, src, dst.data(), per_block), name.c_str());
          converted++;
          std::vector<float> again(static_cast<size_t>(per_block));
          dequantize_row(target, dst.data(), again.data(), per_block);
          QVERIFY2(std::memcmp(again.data(), got.data() + b * per_block, 4 * static_cast<size_t>(per_block)) == 0,
                   qPrintable(QString("%1 block %2 changes in conversion").arg(name.c_str()).arg(b)));
        }
        QVERIFY(converted >= 6);
      }
      if (entry.contains("quantized")) {
        const QByteArray inputs = bytes(entry["inputs"]);
        const int64_t m = inputs.size() / 4;
        std::vector<float> x(static_cast<size_t>(m));
        std::memcpy(x.data(), inputs.constData(), static_cast<size_t>(inputs.size()));
        std::vector<uint8_t> q(row_bytes(*type, m));
        quantize_row(*type, x.data(), q.data(), m);
        QCOMPARE(QByteArray(reinterpret_cast<const char*>(q.data()), static_cast<qsizetype>(q.size())).toHex(),
                 QByteArray::fromStdString(entry["quantized"].get<std::string>()));
      }
      types++;
    }
    QCOMPARE(types, 9);
  }

  // Quantization must reproduce the gguf package's blocks byte for byte.
  void quantizeMatchesGgufPackage() {
    std::ifstream in(SPECULA_TEST_DATA_DIR "/quant_oracle.json");
    QVERIFY(in.good());
    const auto j = nlohmann::json::parse(in);
    std::vector<float> values;
    for (const auto& v : j["values"]) values.push_back(v.get<float>());
    const int64_t n = static_cast<int64_t>(values.size());
    for (const auto& [type, key] : {std::pair{TensorType::Q8_0, "q8_0"}, std::pair{TensorType::Q4_0, "q4_0"}}) {
      std::vector<uint8_t> out(row_bytes(type, n));
      quantize_row(type, values.data(), out.data(), n);
      QString hex = QByteArray(reinterpret_cast<const char*>(out.data()), static_cast<qsizetype>(out.size())).toHex();
      QCOMPARE(hex, QString::fromStdString(j[key].get<std::string>()));
    }
  }

  void roundTripF16() {
    std::mt19937 rng(11);
    std::vector<float> x(4096), y(4096);
    std::vector<uint16_t> h(4096);
    for (size_t i = 0; i < x.size(); i++) {
      const float mag = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 26);  // 2^-26 .. 2^13
      x[i] = std::uniform_real_distribution<float>(-mag, mag)(rng);
    }
    quantize_row(TensorType::F16, x.data(), h.data(), 4096);
    dequantize_row(TensorType::F16, h.data(), y.data(), 4096);
    for (size_t i = 0; i < x.size(); i++) {
      // half an ulp: 2^-11 relative for normals, 2^-25 absolute in the subnormal range
      QVERIFY2(std::fabs(x[i] - y[i]) <= std::max(std::fabs(x[i]) * 0x1p-11f, 0x1p-25f),
               qPrintable(QString("%1 -> %2").arg(x[i]).arg(y[i])));
    }
    float big = 70000.0f, out;
    uint16_t hb;
    quantize_row(TensorType::F16, &big, &hb, 1);
    dequantize_row(TensorType::F16, &hb, &out, 1);
    QVERIFY(std::isinf(out));
  }

  void roundTripBF16() {
    std::mt19937 rng(12);
    std::vector<float> x(4096), y(4096);
    std::vector<uint16_t> h(4096);
    for (auto& v : x) v = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), static_cast<int>(rng() % 200) - 100);
    quantize_row(TensorType::BF16, x.data(), h.data(), 4096);
    dequantize_row(TensorType::BF16, h.data(), y.data(), 4096);
    for (size_t i = 0; i < x.size(); i++) QVERIFY(std::fabs(x[i] - y[i]) <= std::fabs(x[i]) * 0x1p-8f);
  }

  void roundTripQ8_0AndQ4_0() {
    std::mt19937 rng(13);
    const int64_t n = 32 * 64;
    std::vector<float> x(static_cast<size_t>(n)), y(x.size());
    for (int64_t b = 0; b < n / 32; b++) {
      const float scale = std::ldexp(1.0f, static_cast<int>(b % 30) - 20);
      for (int i = 0; i < 32; i++) x[static_cast<size_t>(b * 32 + i)] = std::normal_distribution<float>(0, scale)(rng);
    }
    for (TensorType type : {TensorType::Q8_0, TensorType::Q4_0}) {
      std::vector<uint8_t> q(row_bytes(type, n));
      quantize_row(type, x.data(), q.data(), n);
      dequantize_row(type, q.data(), y.data(), n);
      for (int64_t b = 0; b < n / 32; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(x[static_cast<size_t>(b * 32 + i)]));
        // Q8_0: half a step of amax/127, plus the f16 rounding of the scale (2^-11 relative)
        // times the largest quant. Q4_0: steps of amax/8, and the value of opposite sign to
        // the extreme may clip at 7 steps, an error of up to one step. A scale in f16's
        // subnormal range is rounded to a multiple of 2^-24 (an absolute 2^-25 error).
        const float bound = type == TensorType::Q8_0 ? amax * (1.0f / 254 + 0x1p-11f) * 1.001f + 127 * 0x1p-25f
                                                     : amax * (1.0f / 8 + 0x1p-8f) * 1.001f + 8 * 0x1p-25f;
        for (int i = 0; i < 32; i++) {
          const size_t k = static_cast<size_t>(b * 32 + i);
          QVERIFY2(std::fabs(x[k] - y[k]) <= bound,
                   qPrintable(QString("%1 block %2: %3 -> %4").arg(type == TensorType::Q8_0 ? "q8_0" : "q4_0").arg(b).arg(x[k]).arg(y[k])));
          if (std::fabs(x[k]) == amax) QVERIFY(std::fabs(x[k] - y[k]) <= amax * 0x1p-10f + 127 * 0x1p-25f);  // the extreme is kept
        }
      }
    }
  }

  void kQuantsAreReadOnly() {
    std::vector<float> x(256, 1.0f);
    std::vector<uint8_t> out(210);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, quantize_row(TensorType::Q6_K, x.data(), out.data(), 256));
  }
};

QTEST_GUILESS_MAIN(TestQuant)
#include "test_quant.moc"
