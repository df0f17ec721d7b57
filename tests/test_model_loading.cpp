// Loading the real reference models: stories260K (llama2.c checkpoint), its GGUF
// conversions checked against llama.cpp's own gguf reader (tests/data summaries), and
// tinystories656k (Hugging Face safetensors) with its rotary permutation checked by the
// invariant it exists for: attention scores must not change.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <map>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "model/gguf.h"
#include "model/model.h"
#include "model/model_export.h"
#include "shared_data.h"

using namespace specula;
namespace fs = std::filesystem;

namespace {

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every weight view of a model with its name, in one fixed order.
std::vector<std::pair<std::string, TensorView>> all_views(const Model& m) {
  std::vector<std::pair<std::string, TensorView>> v = {{"token_embedding", m.weights.token_embedding}};
  for (size_t l = 0; l < m.weights.layers.size(); l++) {
    const LayerWeights& L = m.weights.layers[l];
    const std::string p = std::to_string(l) + ".";
    v.insert(v.end(), {{p + "attn_norm", L.attn_norm}, {p + "wq", L.wq}, {p + "wk", L.wk}, {p + "wv", L.wv},
                       {p + "wo", L.wo}, {p + "ffn_norm", L.ffn_norm}, {p + "w_gate", L.w_gate},
                       {p + "w_up", L.w_up}, {p + "w_down", L.w_down}});
  }
  v.emplace_back("final_norm", m.weights.final_norm);
  v.emplace_back("output", m.weights.output);
  return v;
}

std::vector<double> to_double(const TensorView& v) {
  std::vector<float> f(static_cast<size_t>(v.cols * v.rows));
  for (int64_t r = 0; r < v.rows; r++) dequantize_row(v.type, v.row(r), f.data() + r * v.cols, v.cols);
  return {f.begin(), f.end()};
}

// The summary gguf_reader_summary.py prints, computed from the engine's reader.
nlohmann::json summarize(const GgufFile& f) {
  nlohmann::json out;
  for (const auto& [key, v] : f.metadata) {
    nlohmann::json e;
    e["type"] = std::string(gguf_type_name(v.type));
    if (v.type == GgufType::ARRAY) {
      e["element_type"] = std::string(gguf_type_name(v.element_type));
      e["length"] = v.array_size();
    } else if (v.type == GgufType::STRING) {
      e["value"] = v.text;
    } else if (v.type == GgufType::BOOL) {
      e["value"] = v.integer != 0;
    } else if (v.is_real()) {
      e["value"] = v.real;
    } else {
      e["value"] = v.integer;
    }
    out["metadata"][key] = e;
  }
  for (const GgufTensorInfo& t : f.tensors) {
    double sum = 0, sum_sq = 0;
    for (double x : to_double(t.view())) {
      sum += x;
      sum_sq += x * x;
    }
    out["tensors"].push_back({{"name", t.name},
                              {"type", std::string(type_traits(t.type).name)},
                              {"shape", t.shape},
                              {"sum", sum},
                              {"sum_sq", sum_sq}});
  }
  return out;
}

bool close(double a, double b, double rel) { return std::fabs(a - b) <= rel * std::max({std::fabs(a), std::fabs(b), 1e-12}); }

// RoPE on one head in float64: pairs (x[i], x[i + d/2]) as Hugging Face rotates them, or
// adjacent pairs (x[2i], x[2i+1]) as the engine does.
std::vector<double> rope(std::vector<double> x, int pos, double theta, bool halves) {
  const size_t d = x.size();
  for (size_t i = 0; i < d / 2; i++) {
    const double angle = pos * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
    const size_t a = halves ? i : 2 * i, b = halves ? i + d / 2 : 2 * i + 1;
    const double x0 = x[a], x1 = x[b];
    x[a] = x0 * std::cos(angle) - x1 * std::sin(angle);
    x[b] = x0 * std::sin(angle) + x1 * std::cos(angle);
  }
  return x;
}

// Rows [row0, row0 + n) of a row-major f32 matrix times x, in float64.
std::vector<double> matvec(const float* w, int64_t cols, int64_t row0, int64_t n, const std::vector<double>& x) {
  std::vector<double> y(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; r++) {
    for (int64_t c = 0; c < cols; c++) y[static_cast<size_t>(r)] += w[(row0 + r) * cols + c] * x[static_cast<size_t>(c)];
  }
  return y;
}

}  // namespace

class TestModelLoading : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;

 private slots:
  void stories260KCheckpoint() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    LoadOptions options;
    options.tokenizer_path = tok;
    const auto m = load_model(bin, options);
    const ModelConfig& c = m->config;
    QCOMPARE(m->format, std::string("llama2.c"));
    QCOMPARE(c.dim, 64);
    QCOMPARE(c.hidden_dim, 172);
    QCOMPARE(c.n_layers, 5);
    QCOMPARE(c.n_heads, 8);
    QCOMPARE(c.n_kv_heads, 4);
    QCOMPARE(c.vocab_size, 512);
    QCOMPARE(c.context_length, 512);
    QCOMPARE(c.rope_theta, 10000.0f);
    QCOMPARE(c.norm_eps, 1e-5f);
    QVERIFY(m->tied_output());
    QVERIFY(m->tokenizer != nullptr);
    QCOMPARE(m->tokenizer->size(), 512);
    // All fp32 weights, minus the header and the unused RoPE tables (2 * 512 * 4 floats).
    QCOMPARE(m->weight_bytes(), static_cast<size_t>(fs::file_size(bin)) - 28 - 2 * 512 * 4 * 4);
    // Spot-check against the file read independently: layer 3 of wk begins after the
    // embedding, 5 attention norms, 5 wq and 3 wk (run.c's order).
    const std::vector<char> raw = read_bytes(bin);
    const size_t wk3 = 28 + 4 * (512 * 64 + 5 * 64 + 5 * 64 * 64 + 3 * 32 * 64);
    QVERIFY(std::memcmp(m->weights.layers[3].wk.data, raw.data() + wk3, 32 * 64 * 4) == 0);
    const size_t down4 = 28 + 4 * (512 * 64 + 5 * 64 + 5 * 64 * 64 + 10 * 32 * 64 + 5 * 64 * 64 + 5 * 64 +
                                   5 * 172 * 64 + 4 * 64 * 172);
    QVERIFY(std::memcmp(m->weights.layers[4].w_down.data, raw.data() + down4, 64 * 172 * 4) == 0);
  }

  void stories260KToGgufIsBitIdentical() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    LoadOptions options;
    options.tokenizer_path = tok;
    const auto original = load_model(bin, options);
    const std::string out = tmp_.filePath("stories260K.gguf").toStdString();
    write_gguf_model(*original, out, TensorType::F32);
    const auto converted = load_model(out);
    QCOMPARE(converted->format, std::string("gguf"));
    QCOMPARE(converted->config.dim, original->config.dim);
    QCOMPARE(converted->config.hidden_dim, original->config.hidden_dim);
    QCOMPARE(converted->config.n_kv_heads, original->config.n_kv_heads);
    QCOMPARE(converted->config.context_length, original->config.context_length);
    QCOMPARE(converted->config.norm_eps, original->config.norm_eps);
    QVERIFY(converted->tied_output());
    const auto a = all_views(*original), b = all_views(*converted);
    QCOMPARE(a.size(), b.size());
    for (size_t i = 0; i < a.size(); i++) {
      QVERIFY2(b[i].second.type == TensorType::F32 && a[i].second.bytes() == b[i].second.bytes() &&
                   std::memcmp(a[i].second.data, b[i].second.data, a[i].second.bytes()) == 0,
               a[i].first.c_str());
    }
    QVERIFY(converted->tokenizer != nullptr);
    const Vocabulary& va = original->tokenizer->vocabulary();
    const Vocabulary& vb = converted->tokenizer->vocabulary();
    QCOMPARE(vb.pieces, va.pieces);
    QCOMPARE(vb.scores, va.scores);
    QVERIFY(vb.kinds == va.kinds);
    QCOMPARE(vb.bos, va.bos);
    QCOMPARE(vb.eos, va.eos);
  }

  // Our writer's files, read by the engine, must summarize exactly as llama.cpp's gguf
  // package read them (tools/oracles/gguf_reader_summary.py).
  void ggufSummaryMatchesGgufPackage_data() {
    QTest::addColumn<QString>("type");
    QTest::newRow("f32") << "f32";
    QTest::newRow("q8_0") << "q8_0";
  }
  void ggufSummaryMatchesGgufPackage() {
    QFETCH(QString, type);
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    LoadOptions options;
    options.tokenizer_path = tok;
    const auto model = load_model(bin, options);
    const std::string out = tmp_.filePath("summary-" + type + ".gguf").toStdString();
    write_gguf_model(*model, out, *tensor_type_from_name(type.toStdString()));
    const nlohmann::json ours = summarize(GgufFile::open(out));
    std::ifstream in(SPECULA_TEST_DATA_DIR "/stories260K_gguf_summary_" + type.toStdString() + ".json");
    QVERIFY(in.good());
    const nlohmann::json ref = nlohmann::json::parse(in);

    QCOMPARE(ours["metadata"].size(), ref["metadata"].size());
    for (const auto& [key, e] : ref["metadata"].items()) {
      QVERIFY2(ours["metadata"].contains(key), key.c_str());
      QVERIFY2(ours["metadata"][key] == e, (key + ": " + ours["metadata"][key].dump() + " vs " + e.dump()).c_str());
    }
    QCOMPARE(ours["tensors"].size(), ref["tensors"].size());
    for (size_t i = 0; i < ref["tensors"].size(); i++) {
      const auto& r = ref["tensors"][i];
      const auto& o = ours["tensors"][i];
      const std::string name = r["name"].get<std::string>();
      QCOMPARE(o["name"].get<std::string>(), name);
      QVERIFY2(o["type"] == r["type"], name.c_str());
      QVERIFY2(o["shape"] == r["shape"], name.c_str());
      QVERIFY2(close(o["sum"].get<double>(), r["sum"].get<double>(), 1e-6), name.c_str());
      QVERIFY2(close(o["sum_sq"].get<double>(), r["sum_sq"].get<double>(), 1e-6), name.c_str());
    }
    // q8_0 keeps rows that are not whole blocks (w_down's 172 columns) and norms in f32.
    if (type == "q8_0") {
      const auto converted = load_model(out);
      QVERIFY(converted->weights.layers[0].wq.type == TensorType::Q8_0);
      QVERIFY(converted->weights.layers[0].w_down.type == TensorType::F32);
      QVERIFY(converted->weights.final_norm.type == TensorType::F32);
    }
  }

  // A load from the headers alone (LoadOptions::metadata_only) gives the model a full load
  // gives, but for the weights' data: the same configuration, every view's type and shape,
  // the same tokenizer, and nothing mapped; for every format and architecture.
  void metadataOnlyLoadMatchesFullLoad() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    SPECULA_SHARED_FILE(config, "models/tinystories656k/config.json");
    LoadOptions with_tokenizer;
    with_tokenizer.tokenizer_path = tok;
    const std::string q8 = tmp_.filePath("metadata-q8_0.gguf").toStdString();
    write_gguf_model(*load_model(bin, with_tokenizer), q8, TensorType::Q8_0);
    const std::string oracles = SPECULA_TEST_DATA_DIR "/arch_oracles/";
    std::vector<std::string> files = {bin, q8, fs::path(config).parent_path().string()};
    for (const char* name : {"qwen2", "qwen3", "llama3", "llama-linear"}) {
      files.push_back(oracles + name);
      files.push_back(oracles + name + ".gguf");
    }
    for (const std::string& file : files) {
      LoadOptions full = file == bin ? with_tokenizer : LoadOptions{}, header = full;
      header.metadata_only = true;
      const auto a = load_model(file, full), b = load_model(file, header);
      QVERIFY2(b->storage.empty(), file.c_str());
      const ModelConfig &ca = a->config, &cb = b->config;
      QCOMPARE(cb.architecture, ca.architecture);
      QCOMPARE(cb.dim, ca.dim);
      QCOMPARE(cb.hidden_dim, ca.hidden_dim);
      QCOMPARE(cb.n_layers, ca.n_layers);
      QCOMPARE(cb.n_heads, ca.n_heads);
      QCOMPARE(cb.n_kv_heads, ca.n_kv_heads);
      QCOMPARE(cb.head_dim(), ca.head_dim());
      QCOMPARE(cb.vocab_size, ca.vocab_size);
      QCOMPARE(cb.context_length, ca.context_length);
      QCOMPARE(cb.rope_theta, ca.rope_theta);
      QCOMPARE(cb.rope_linear_factor, ca.rope_linear_factor);
      QCOMPARE(cb.rope_freq_factors.size(), ca.rope_freq_factors.size());  // counted, not read, from a GGUF header
      const auto va = all_views(*a), vb = all_views(*b);
      for (size_t i = 0; i < va.size(); i++) {
        const TensorView &x = va[i].second, &y = vb[i].second;
        QVERIFY2(y.data == nullptr && !y.empty() && x.type == y.type && x.rows == y.rows && x.cols == y.cols,
                 (file + ": " + va[i].first).c_str());
      }
      for (size_t l = 0; l < a->weights.layers.size(); l++) {
        const auto optional = [](const LayerWeights& L) {
          return std::vector<bool>{L.bq.empty(), L.bk.empty(), L.bv.empty(), L.bo.empty(), L.q_norm.empty(), L.k_norm.empty()};
        };
        QCOMPARE(optional(b->weights.layers[l]), optional(a->weights.layers[l]));
      }
      QCOMPARE(b->tokenizer != nullptr, a->tokenizer != nullptr);
      if (a->tokenizer) QCOMPARE(b->tokenizer->vocabulary().pieces, a->tokenizer->vocabulary().pieces);
    }
  }

  void tinystoriesHuggingFace() {
    SPECULA_SHARED_FILE(config, "models/tinystories656k/config.json");
    const std::string dir = fs::path(config).parent_path().string();
    const auto m = load_model(dir);
    const ModelConfig& c = m->config;
    QCOMPARE(m->format, std::string("safetensors"));
    QCOMPARE(c.dim, 128);
    QCOMPARE(c.hidden_dim, 384);
    QCOMPARE(c.n_layers, 2);
    QCOMPARE(c.n_heads, 8);
    QCOMPARE(c.n_kv_heads, 4);
    QCOMPARE(c.vocab_size, 2048);
    QCOMPARE(c.context_length, 512);
    QCOMPARE(c.rope_theta, 10000.0f);
    QCOMPARE(c.norm_eps, 1e-6f);
    QVERIFY(m->tied_output());
    QVERIFY(m->tokenizer != nullptr);
    QCOMPARE(m->tokenizer->size(), 2048);

    // The file, read independently: header JSON, then the data section.
    const std::vector<char> raw = read_bytes(dir + "/model.safetensors");
    uint64_t header_bytes;
    std::memcpy(&header_bytes, raw.data(), 8);
    const auto header = nlohmann::json::parse(raw.begin() + 8, raw.begin() + 8 + static_cast<std::ptrdiff_t>(header_bytes));
    const auto hf = [&](const std::string& name) {
      return reinterpret_cast<const float*>(raw.data() + 8 + header_bytes + header[name]["data_offsets"][0].get<size_t>());
    };
    QVERIFY(std::memcmp(m->weights.layers[1].wv.data, hf("model.layers.1.self_attn.v_proj.weight"), 64 * 128 * 4) == 0);
    QVERIFY(std::memcmp(m->weights.token_embedding.data, hf("lm_head.weight"), 2048 * 128 * 4) == 0);

    // Attention scores per head pair must be the same under HF's rotation of the original
    // rows and the engine's rotation of the permuted rows, at any positions.
    const int hd = c.head_dim(), group = c.n_heads / c.n_kv_heads;
    std::vector<double> x(128), y(128);
    for (int i = 0; i < 128; i++) {
      x[static_cast<size_t>(i)] = std::sin(0.37 * i + 1);
      y[static_cast<size_t>(i)] = std::cos(0.11 * i * i);
    }
    for (int layer = 0; layer < c.n_layers; layer++) {
      const std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
      const LayerWeights& L = m->weights.layers[static_cast<size_t>(layer)];
      for (int h = 0; h < c.n_heads; h++) {
        const int kvh = h / group;
        for (auto [pq, pk] : {std::pair{0, 0}, std::pair{5, 2}, std::pair{300, 17}}) {
          const auto qa = rope(matvec(hf(p + "q_proj.weight"), 128, h * hd, hd, x), pq, c.rope_theta, true);
          const auto ka = rope(matvec(hf(p + "k_proj.weight"), 128, kvh * hd, hd, y), pk, c.rope_theta, true);
          const auto qb = rope(matvec(static_cast<const float*>(L.wq.data), 128, h * hd, hd, x), pq, c.rope_theta, false);
          const auto kb = rope(matvec(static_cast<const float*>(L.wk.data), 128, kvh * hd, hd, y), pk, c.rope_theta, false);
          double sa = 0, sb = 0, norm = 0;
          for (int i = 0; i < hd; i++) {
            sa += qa[static_cast<size_t>(i)] * ka[static_cast<size_t>(i)];
            sb += qb[static_cast<size_t>(i)] * kb[static_cast<size_t>(i)];
            norm += std::fabs(qa[static_cast<size_t>(i)] * ka[static_cast<size_t>(i)]);
          }
          QVERIFY2(std::fabs(sa - sb) <= 1e-9 * norm + 1e-12,
                   qPrintable(QString("layer %1 head %2: %3 vs %4").arg(layer).arg(h).arg(sa).arg(sb)));
        }
      }
      // And the layout is not the identity: HF's rows really were moved.
      QVERIFY(std::memcmp(L.wq.data, hf(p + "q_proj.weight"), 128 * 128 * 4) != 0);
    }

    // Through GGUF and back, the permuted rows are kept as they are.
    const std::string out = tmp_.filePath("tinystories656k.gguf").toStdString();
    write_gguf_model(*m, out, TensorType::F32);
    const auto g = load_model(out);
    QVERIFY(std::memcmp(g->weights.layers[1].wk.data, m->weights.layers[1].wk.data, 64 * 128 * 4) == 0);
    QCOMPARE(g->tokenizer->size(), 2048);
  }

  // The same model re-saved by this test in f16 and bf16, split over two shards, with a
  // header length that leaves the data misaligned: same views (of the rounded values),
  // norms converted to f32, matrices kept in their stored type.
  void halfPrecisionShardedSafetensors_data() {
    QTest::addColumn<QString>("dtype");
    QTest::newRow("F16") << "F16";
    QTest::newRow("BF16") << "BF16";
  }
  void halfPrecisionShardedSafetensors() {
    QFETCH(QString, dtype);
    SPECULA_SHARED_FILE(config, "models/tinystories656k/config.json");
    const fs::path source = fs::path(config).parent_path();
    const bool bf16 = dtype == "BF16";
    const TensorType type = bf16 ? TensorType::BF16 : TensorType::F16;
    const std::vector<char> raw = read_bytes((source / "model.safetensors").string());
    uint64_t header_bytes;
    std::memcpy(&header_bytes, raw.data(), 8);
    const auto header = nlohmann::json::parse(raw.begin() + 8, raw.begin() + 8 + static_cast<std::ptrdiff_t>(header_bytes));

    const fs::path dir = tmp_.filePath("half-" + dtype).toStdString();
    fs::create_directories(dir);
    fs::copy_file(source / "config.json", dir / "config.json");
    fs::copy_file(source / "tokenizer.json", dir / "tokenizer.json");
    nlohmann::json shard_headers[2];
    std::vector<uint16_t> shard_data[2];
    int index = 0;
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") continue;
      const size_t begin = entry["data_offsets"][0].get<size_t>(), end = entry["data_offsets"][1].get<size_t>();
      const int shard = index++ % 2;
      std::vector<uint16_t>& out = shard_data[shard];
      const size_t first = out.size();
      for (size_t k = begin; k < end; k += 4) {
        float f;
        std::memcpy(&f, raw.data() + 8 + header_bytes + k, 4);
        out.push_back(bf16 ? fp32_to_bf16(f) : fp32_to_fp16(f));
      }
      shard_headers[shard][name] = {{"dtype", dtype.toStdString()},
                                    {"shape", entry["shape"]},
                                    {"data_offsets", {first * 2, out.size() * 2}}};
    }
    for (int shard = 0; shard < 2; shard++) {
      std::string text = shard_headers[shard].dump() + "   ";  // 8 + length is not a multiple of 4
      if ((8 + text.size()) % 4 == 0) text += " ";
      const uint64_t n = text.size();
      std::ofstream out(dir / ("model-0000" + std::to_string(shard + 1) + "-of-00002.safetensors"), std::ios::binary);
      out.write(reinterpret_cast<const char*>(&n), 8);
      out.write(text.data(), static_cast<std::streamsize>(n));
      out.write(reinterpret_cast<const char*>(shard_data[shard].data()), static_cast<std::streamsize>(shard_data[shard].size() * 2));
    }

    const auto original = load_model(source.string());
    const auto half = load_model(dir.string());
    QCOMPARE(half->config.n_kv_heads, 4);
    QVERIFY(half->tied_output());
    const auto a = all_views(*original), b = all_views(*half);
    for (size_t i = 0; i < a.size(); i++) {
      const bool is_norm = a[i].first.find("norm") != std::string::npos;
      QVERIFY2(b[i].second.type == (is_norm ? TensorType::F32 : type), a[i].first.c_str());
      QVERIFY2(reinterpret_cast<uintptr_t>(b[i].second.data) % 4 == 0, a[i].first.c_str());
      const auto x = to_double(a[i].second), y = to_double(b[i].second);
      size_t mismatch = 0;
      while (mismatch < x.size()) {
        const float f = static_cast<float>(x[mismatch]);
        if (y[mismatch] != (bf16 ? bf16_to_fp32(fp32_to_bf16(f)) : fp16_to_fp32(fp32_to_fp16(f)))) break;
        mismatch++;
      }
      QVERIFY2(mismatch == x.size(), qPrintable(QString("%1[%2]").arg(a[i].first.c_str()).arg(mismatch)));
    }
  }

  // Quantized conversions keep every matrix close to the original (relative RMS error
  // well inside each format's step) and shrink the file.
  void quantizedConversionStaysClose() {
    SPECULA_SHARED_FILE(config, "models/tinystories656k/config.json");
    const auto m = load_model(fs::path(config).parent_path().string());
    size_t previous_bytes = m->weight_bytes();
    for (auto [type, tolerance] : {std::pair{TensorType::F16, 3e-4}, std::pair{TensorType::Q8_0, 1e-2},
                                   std::pair{TensorType::Q4_0, 0.15}}) {
      const std::string out = tmp_.filePath(QString("tiny-%1.gguf").arg(static_cast<int>(type))).toStdString();
      write_gguf_model(*m, out, type);
      const auto q = load_model(out);
      QVERIFY(q->weight_bytes() < previous_bytes);
      previous_bytes = q->weight_bytes();
      const auto a = all_views(*m), b = all_views(*q);
      for (size_t i = 0; i < a.size(); i++) {
        const bool is_norm = a[i].first.find("norm") != std::string::npos;
        QVERIFY2(b[i].second.type == (is_norm ? TensorType::F32 : type), a[i].first.c_str());
        const auto x = to_double(a[i].second), y = to_double(b[i].second);
        double err = 0, ref = 0;
        for (size_t k = 0; k < x.size(); k++) {
          err += (x[k] - y[k]) * (x[k] - y[k]);
          ref += x[k] * x[k];
        }
        QVERIFY2(std::sqrt(err / ref) <= (is_norm ? 0.0 : tolerance),
                 qPrintable(QString("%1 %2: relative error %3").arg(type_traits(type).name.data()).arg(a[i].first.c_str()).arg(std::sqrt(err / ref))));
      }
    }
  }

  // Q4_1, Q5_0 and Q5_1 load as stored (they have kernels), every value the file's own: each
  // matrix decodes to the same floats as the file's tensor. The metadata-only load reports
  // the type a full load gives. (Every type loads as stored now; these three are the ones
  // this project writes.)
  void writtenTypesLoadAsStored() {
    SPECULA_SHARED_FILE(config, "models/tinystories656k/config.json");
    const auto m = load_model(fs::path(config).parent_path().string());
    for (auto [stored, computed] : {std::pair{TensorType::Q4_1, TensorType::Q4_1}, std::pair{TensorType::Q5_1, TensorType::Q5_1},
                                    std::pair{TensorType::Q5_0, TensorType::Q5_0}}) {
      const std::string out = tmp_.filePath(QString("tiny-%1.gguf").arg(type_traits(stored).name.data())).toStdString();
      write_gguf_model(*m, out, stored);
      const auto q = load_model(out);
      LoadOptions header_only;
      header_only.metadata_only = true;
      const auto h = load_model(out, header_only);
      QCOMPARE(h->weights.layers.at(0).wq.type, computed);
      const GgufFile file = GgufFile::open(out);
      int matrices = 0;
      const std::map<std::string, std::string> gguf_name = {
          {"wq", "attn_q"}, {"wk", "attn_k"}, {"wv", "attn_v"}, {"wo", "attn_output"},
          {"w_gate", "ffn_gate"}, {"w_up", "ffn_up"}, {"w_down", "ffn_down"}};
      for (const auto& [name, view] : all_views(*q)) {
        std::string tensor = name == "token_embedding" ? "token_embd" : "";
        if (const size_t dot = name.find('.'); dot != std::string::npos && gguf_name.count(name.substr(dot + 1))) {
          tensor = "blk." + name.substr(0, dot) + "." + gguf_name.at(name.substr(dot + 1));
        }
        if (tensor.empty()) continue;  // norms (f32) and the tied output
        const GgufTensorInfo* t = file.tensor(tensor + ".weight");
        QVERIFY2(t && t->type == stored, tensor.c_str());
        QCOMPARE(view.type, computed);
        std::vector<float> want(static_cast<size_t>(t->cols() * t->rows())), got(want.size());
        dequantize_row(stored, t->data, want.data(), t->cols() * t->rows());
        dequantize_row(view.type, view.data, got.data(), view.cols * view.rows);
        QVERIFY2(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0, name.c_str());
        matrices++;
      }
      QCOMPARE(matrices, 2 * 7 + 1);  // 2 layers of 7 matrices, the embedding (tied output)
    }
  }
};

QTEST_GUILESS_MAIN(TestModelLoading)
#include "test_model_loading.moc"
