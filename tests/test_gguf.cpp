// GGUF writer -> reader round trips, and every kind of corrupt model file (GGUF,
// safetensors, llama2.c) giving a ModelError that names the file and the problem.
#include <QTemporaryDir>
#include <QtTest>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "shared_data.h"

using namespace specula;
namespace fs = std::filesystem;

namespace {

// GGUF bytes assembled by hand, independently of the engine's writer.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& pad(size_t alignment) {
    while (b.size() % alignment) b.push_back(0);
    return *this;
  }
};

// A valid file: one u32 key, one 2x32 f32 tensor; `mutate` edits the pieces before assembly.
struct Spec {
  uint32_t magic = 0x46554747;
  uint32_t version = 3;
  uint64_t n_tensors = 1;
  uint64_t n_kv = 1;
  std::string key = "general.architecture";
  uint32_t value_type = 8;  // string
  std::string value = "llama";
  std::string tensor_name = "t";
  uint32_t n_dims = 2;
  std::vector<int64_t> ne = {32, 2};
  uint32_t ggml_type = 0;
  uint64_t offset = 0;
  size_t data_bytes = 256;
};

std::vector<uint8_t> build(const Spec& s) {
  Bytes out;
  out.put(s.magic).put(s.version).put(s.n_tensors).put(s.n_kv);
  out.str(s.key).put(s.value_type).str(s.value);
  out.str(s.tensor_name).put(s.n_dims);
  for (int64_t ne : s.ne) out.put(ne);
  out.put(s.ggml_type).put(s.offset);
  out.pad(32);
  for (size_t i = 0; i < s.data_bytes; i++) out.b.push_back(static_cast<uint8_t>(i));
  return out.b;
}

// Parses and returns the ModelError message ("" when the bytes parsed).
std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    GgufFile::parse(bytes.data(), bytes.size(), "bad.gguf");
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_GGUF_ERROR(bytes, fragment)                                                            \
  do {                                                                                                \
    const std::string message = parse_error(bytes);                                                   \
    QVERIFY2(message.find("bad.gguf") != std::string::npos, ("no file name in: " + message).c_str()); \
    QVERIFY2(message.find(fragment) != std::string::npos, ("unexpected message: " + message).c_str()); \
  } while (0)

void write_file(const std::string& path, const void* data, size_t n) {
  std::ofstream(path, std::ios::binary).write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

std::string load_error(const std::string& path, bool metadata_only = false) {
  LoadOptions options;
  options.metadata_only = metadata_only;
  try {
    load_model(path, options);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

// A load from the headers alone (LoadOptions::metadata_only) must refuse the file with the same words.
#define EXPECT_LOAD_ERROR(file, fragment)                                                                  \
  do {                                                                                                     \
    const std::string message = load_error(file);                                                          \
    QVERIFY2(message.find(fs::path(file).filename().string()) != std::string::npos,                       \
             ("no file name in: " + message).c_str());                                                     \
    QVERIFY2(message.find(fragment) != std::string::npos, ("unexpected message: " + message).c_str());     \
    QCOMPARE(load_error(file, true), message);                                                             \
  } while (0)

// A small llama2.c checkpoint: dim 64, hidden 96, 2 layers, 4 heads, 2 KV heads, vocab 40, seq 16.
constexpr int32_t kHeader[7] = {64, 96, 2, 4, 2, 40, 16};
std::vector<float> llama2c_floats(bool untied) {
  const int64_t dim = 64, hidden = 96, layers = 2, kv_dim = 32, vocab = 40, seq = 16, head = 16;
  const int64_t n = vocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * dim * kv_dim + 3 * dim * hidden) + dim +
                    seq * head + (untied ? vocab * dim : 0);
  std::vector<float> f(static_cast<size_t>(n));
  std::mt19937 rng(5);
  for (auto& x : f) x = std::normal_distribution<float>(0, 1)(rng);
  return f;
}
void write_llama2c(const std::string& path, std::vector<int32_t> header, const std::vector<float>& floats) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 28);
  out.write(reinterpret_cast<const char*>(floats.data()), static_cast<std::streamsize>(floats.size() * 4));
}

// Writes a GGUF model whose tensors are given as (name, shape); values are zeros.
// Norms (1-D tensors) are written as f16 halves, everything else as f32 zeros.
void write_gguf_model_file(const std::string& path, const std::string& arch,
                           const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::string(arch));
  w.set("llama.embedding_length", GgufValue::u32(64));
  w.set("llama.feed_forward_length", GgufValue::u32(96));
  w.set("llama.block_count", GgufValue::u32(1));
  w.set("llama.attention.head_count", GgufValue::u32(4));
  w.set("llama.attention.head_count_kv", GgufValue::u32(2));
  w.set("llama.context_length", GgufValue::u32(16));
  for (const auto& [name, shape] : tensors) {
    if (shape.size() == 1) {
      w.add_tensor(name, TensorType::F16, shape, [n = shape[0]](uint8_t* dst) {
        for (int64_t i = 0; i < n; i++) {
          const uint16_t half = 0x3800;  // 0.5
          std::memcpy(dst + 2 * i, &half, 2);
        }
      });
    } else {
      w.add_tensor(name, TensorType::F32, shape, [](uint8_t*) {});
    }
  }
  w.write(path);
}

std::vector<std::pair<std::string, std::vector<int64_t>>> llama_tensors() {
  return {{"token_embd.weight", {64, 40}},     {"blk.0.attn_norm.weight", {64}}, {"blk.0.attn_q.weight", {64, 64}},
          {"blk.0.attn_k.weight", {64, 32}},   {"blk.0.attn_v.weight", {64, 32}}, {"blk.0.attn_output.weight", {64, 64}},
          {"blk.0.ffn_norm.weight", {64}},     {"blk.0.ffn_gate.weight", {64, 96}}, {"blk.0.ffn_up.weight", {64, 96}},
          {"blk.0.ffn_down.weight", {96, 64}}, {"output_norm.weight", {64}}};
}

// A safetensors file from a JSON header and a data section.
void write_safetensors(const std::string& path, const std::string& header, size_t data_bytes) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(std::string(data_bytes, '\0').data(), static_cast<std::streamsize>(data_bytes));
}

}  // namespace

class TestGguf : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  std::string path(const char* name) { return tmp_.filePath(name).toStdString(); }

 private slots:
  void handBuiltFileParses() {
    const auto bytes = build(Spec{});
    const GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "good.gguf");
    QCOMPARE(f.get_string("general.architecture", ""), std::string("llama"));
    QCOMPARE(f.tensors.size(), size_t{1});
    QCOMPARE(f.tensors[0].cols(), int64_t{32});
    QCOMPARE(f.tensors[0].rows(), int64_t{2});
    QCOMPARE(f.data_offset % 32, uint64_t{0});
    QCOMPARE(f.tensors[0].data[5], uint8_t{5});
  }

  // A file written by llama.cpp's own tools: a vocabulary-only GGUF v3.
  void readsLlamaCppVocabularyFile() {
    SPECULA_SHARED_FILE(file, "tokenizers/llama-spm-vocab/ggml-vocab-llama-spm.gguf");
    const GgufFile f = GgufFile::open(file);
    QCOMPARE(f.version, 3u);
    QCOMPARE(f.get_string("general.architecture", ""), std::string("llama"));
    QVERIFY(f.tensors.empty());
    const Vocabulary v = gguf_vocabulary(f);
    QCOMPARE(v.size(), 32000);
    QCOMPARE(v.pieces[1], std::string("<s>"));
    QCOMPARE(v.pieces[3], std::string("<0x00>"));
    QVERIFY(v.kinds[3] == TokenKind::Byte);
    QVERIFY(v.byte_fallback);
    QCOMPARE(v.bos, 1);
    QCOMPARE(v.eos, 2);
    QCOMPARE(v.unk, 0);
    QCOMPARE(v.scores.size(), size_t{32000});
    EXPECT_LOAD_ERROR(file, "has no weights");
  }

  // The header read alone equals the mapped file's, for a header of more than the first
  // read (1 MiB), a vocabulary-only file and a file with tensors; nothing is mapped.
  void headerAloneEqualsWholeFile() {
    SPECULA_SHARED_FILE(gpt2, "tokenizers/bpe-vocab/ggml-vocab-gpt-2.gguf");
    for (const std::string& file : {gpt2, std::string(SPECULA_SOURCE_DIR "/tests/fuzz/corpus/tensors.gguf")}) {
      const GgufFile whole = GgufFile::open(file), header = GgufFile::read_header(file);
      QVERIFY(header.file == nullptr);
      QCOMPARE(header.metadata.size(), whole.metadata.size());
      for (size_t i = 0; i < whole.metadata.size(); i++) {
        QCOMPARE(header.metadata[i].first, whole.metadata[i].first);
        QCOMPARE(header.metadata[i].second.texts, whole.metadata[i].second.texts);
        QCOMPARE(header.metadata[i].second.integers, whole.metadata[i].second.integers);
      }
      QCOMPARE(header.data_offset, whole.data_offset);
      QCOMPARE(header.tensors.size(), whole.tensors.size());
      for (size_t i = 0; i < whole.tensors.size(); i++) {
        QCOMPARE(header.tensors[i].name, whole.tensors[i].name);
        QCOMPARE(header.tensors[i].shape, whole.tensors[i].shape);
        QCOMPARE(header.tensors[i].bytes, whole.tensors[i].bytes);
        QVERIFY(header.tensors[i].data == nullptr);
      }
      const GgufFile metadata = GgufFile::read_header(file, GgufPart::Metadata);
      QCOMPARE(metadata.metadata.size(), whole.metadata.size());
      QVERIFY(metadata.tensors.empty());
    }
    QVERIFY(GgufFile::read_header(gpt2).find("tokenizer.ggml.merges")->array_size() > 40000);
    // a FIFO is refused at once rather than waited on
    const std::string fifo = path("fifo.gguf");
    QCOMPARE(::mkfifo(fifo.c_str(), 0600), 0);
    QVERIFY_THROWS_EXCEPTION(ModelError, GgufFile::read_header(fifo));
  }

  // Files written by llama.cpp's Python writer (tests/fuzz/make_corpus.py), one with a
  // custom alignment of 8.
  void readsFilesOfTheGgufPackage() {
    for (const char* name : {"tensors.gguf", "align8.gguf"}) {
      const GgufFile f = GgufFile::open(std::string(SPECULA_SOURCE_DIR "/tests/fuzz/corpus/") + name);
      QCOMPARE(f.alignment, std::string(name) == "align8.gguf" ? 8u : 32u);
      QCOMPARE(f.get_int("t.u8"), int64_t{7});
      QCOMPARE(f.get_int("t.i16"), int64_t{-3});
      QCOMPARE(f.get_int("t.u64"), int64_t{1} << 40);
      QCOMPARE(f.get_real("t.f64", 0), 0.5);
      QCOMPARE(f.get_string("t.str", ""), std::string("\xe2\x96\x81hello"));
      QCOMPARE(f.find("t.nested")->arrays.size(), size_t{2});
      QCOMPARE(f.find("t.nested")->arrays[0].integers, (std::vector<int64_t>{1, 2}));
      QCOMPARE(gguf_vocabulary(f).pieces[3], std::string("\xe2\x96\x81" "a"));
      for (const auto& [tensor, tolerance] : {std::pair{"f32", 0.0}, std::pair{"f16", 1e-3}, std::pair{"q8_0", 1.0 / 254 + 1e-3},
                                              std::pair{"q4_0", 1.0 / 8 + 1e-3}}) {
        const GgufTensorInfo* t = f.tensor(tensor);
        QVERIFY(t != nullptr);
        std::vector<uint8_t> aligned(t->data, t->data + t->bytes);
        std::vector<float> values(static_cast<size_t>(t->cols()));
        dequantize_row(t->type, aligned.data(), values.data(), t->cols());
        for (size_t i = 0; i < values.size(); i++) {
          const double expected = -1.0 + 2.0 * static_cast<double>(static_cast<float>(i)) / 255.0;
          QVERIFY2(std::fabs(values[i] - expected) <= tolerance + 1e-7, tensor);
        }
      }
    }
  }

  void writerReaderRoundTrip() {
    GgufWriter w;
    const auto scalar = [](GgufType t, int64_t i, double r) {
      GgufValue v;
      v.type = t;
      v.integer = i;
      v.real = r;
      return v;
    };
    w.set("a.u8", scalar(GgufType::U8, 255, 0));
    w.set("a.i8", scalar(GgufType::I8, -128, 0));
    w.set("a.u16", scalar(GgufType::U16, 65535, 0));
    w.set("a.i16", scalar(GgufType::I16, -32768, 0));
    w.set("a.u32", GgufValue::u32(4000000000u));
    w.set("a.i32", GgufValue::i32(-2000000000));
    w.set("a.u64", GgufValue::u64(18000000000000000000ull));
    w.set("a.i64", scalar(GgufType::I64, -9000000000000000000ll, 0));
    w.set("a.f32", GgufValue::f32(0.1f));
    w.set("a.f64", scalar(GgufType::F64, 0, 0.1));
    w.set("a.bool", GgufValue::boolean(true));
    w.set("a.string", GgufValue::string(std::string("tab\there \xe2\x96\x81 nul:\0.", 17)));
    w.set("a.strings", GgufValue::string_array({"", "x", "\xe2\x96\x81the"}));
    w.set("a.floats", GgufValue::f32_array({1.5f, -2.25f, 1e-30f}));
    w.set("a.ints", GgufValue::i32_array({-1, 0, 7}));
    GgufValue nested;
    nested.type = GgufType::ARRAY;
    nested.element_type = GgufType::ARRAY;
    nested.arrays = {GgufValue::i32_array({1, 2}), GgufValue::string_array({"q"})};
    w.set("a.nested", nested);
    w.set("general.alignment", GgufValue::u32(64));  // ignored: the writer always aligns to 32

    struct T {
      const char* name;
      TensorType type;
      std::vector<int64_t> shape;
    };
    const std::vector<T> tensors = {{"f32", TensorType::F32, {3}},          {"f16", TensorType::F16, {5, 3}},
                                    {"bf16", TensorType::BF16, {2, 3, 4}},  {"q8_0", TensorType::Q8_0, {64, 3}},
                                    {"q4_0", TensorType::Q4_0, {32, 1, 2, 2}}, {"q4_k", TensorType::Q4_K, {256, 2}},
                                    {"q6_k", TensorType::Q6_K, {512}}};
    std::vector<std::vector<uint8_t>> data;
    std::mt19937 rng(3);
    for (const T& t : tensors) {
      int64_t rows = 1;
      for (size_t i = 1; i < t.shape.size(); i++) rows *= t.shape[i];
      std::vector<uint8_t> d(row_bytes(t.type, t.shape[0]) * static_cast<size_t>(rows));
      for (auto& x : d) x = static_cast<uint8_t>(rng());
      data.push_back(d);
      w.add_tensor(t.name, t.type, t.shape, [d](uint8_t* dst) { std::memcpy(dst, d.data(), d.size()); });
    }
    w.write(path("round.gguf"));

    const GgufFile f = GgufFile::open(path("round.gguf"));
    QCOMPARE(f.version, 3u);
    QCOMPARE(f.alignment, 32u);
    QCOMPARE(f.metadata.front().first, std::string("general.alignment"));
    QCOMPARE(f.get_int("a.u8"), int64_t{255});
    QCOMPARE(f.get_int("a.i8"), int64_t{-128});
    QCOMPARE(f.get_int("a.u16"), int64_t{65535});
    QCOMPARE(f.get_int("a.i16"), int64_t{-32768});
    QCOMPARE(f.get_int("a.u32"), int64_t{4000000000});
    QCOMPARE(f.get_int("a.i32"), int64_t{-2000000000});
    QCOMPARE(static_cast<uint64_t>(f.find("a.u64")->integer), 18000000000000000000ull);
    QVERIFY_THROWS_EXCEPTION(ModelError, f.get_int("a.u64"));  // does not fit an int64
    QCOMPARE(f.get_int("a.i64"), int64_t{-9000000000000000000ll});
    QCOMPARE(f.get_real("a.f32", 0), static_cast<double>(0.1f));
    QCOMPARE(f.get_real("a.f64", 0), 0.1);
    QCOMPARE(f.get_bool("a.bool", false), true);
    QCOMPARE(f.get_string("a.string", ""), std::string("tab\there \xe2\x96\x81 nul:\0.", 17));
    QCOMPARE(f.find("a.strings")->texts, (std::vector<std::string>{"", "x", "\xe2\x96\x81the"}));
    QCOMPARE(f.find("a.floats")->reals, (std::vector<double>{1.5, -2.25, static_cast<double>(1e-30f)}));
    QCOMPARE(f.find("a.ints")->integers, (std::vector<int64_t>{-1, 0, 7}));
    QCOMPARE(f.find("a.nested")->arrays.size(), size_t{2});
    QCOMPARE(f.find("a.nested")->arrays[1].texts, std::vector<std::string>{"q"});
    QVERIFY_THROWS_EXCEPTION(ModelError, f.get_string("a.u8", ""));
    QVERIFY_THROWS_EXCEPTION(ModelError, f.get_int("missing.key"));
    QCOMPARE(f.get_int("missing.key", 7), int64_t{7});

    QCOMPARE(f.tensors.size(), tensors.size());
    for (size_t i = 0; i < tensors.size(); i++) {
      const GgufTensorInfo* t = f.tensor(tensors[i].name);
      QVERIFY(t != nullptr);
      QVERIFY(t->type == tensors[i].type);
      QCOMPARE(t->shape, tensors[i].shape);
      QCOMPARE(t->offset % 32, uint64_t{0});
      QCOMPARE(reinterpret_cast<uintptr_t>(t->data) % 32, uintptr_t{0});
      QCOMPARE(t->bytes, data[i].size());
      QVERIFY(std::memcmp(t->data, data[i].data(), data[i].size()) == 0);
    }
  }

  void wrongMagicAndVersion() {
    Spec s;
    s.magic = 0x464c457f;  // an ELF file
    EXPECT_GGUF_ERROR(build(s), "wrong magic");
    s = Spec{};
    s.version = 1;
    EXPECT_GGUF_ERROR(build(s), "unsupported version 1");
    s.version = 0x03000000;
    EXPECT_GGUF_ERROR(build(s), "big-endian");
    EXPECT_GGUF_ERROR(std::vector<uint8_t>{}, "wrong magic");
  }

  // Every prefix of a valid file is truncated somewhere: always a clean error, the same
  // whether the file is parsed whole or read for its header alone.
  void everyTruncationIsAnError() {
    const auto bytes = build(Spec{});
    for (size_t n = 0; n < bytes.size(); n++) {
      const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      const std::string message = parse_error(prefix);
      QVERIFY2(!message.empty(), qPrintable(QString("prefix of %1 bytes parsed").arg(n)));
      const std::string file = path("bad.gguf");
      write_file(file, prefix.data(), prefix.size());
      try {
        GgufFile::read_header(file);
        QFAIL(qPrintable(QString("the header of a %1-byte prefix was read").arg(n)));
      } catch (const ModelError& e) {
        QCOMPARE(std::string(e.what()).substr(file.size()), message.substr(std::string("bad.gguf").size()));
      }
      QVERIFY2(message.find("truncated") != std::string::npos || message.find("past the end") != std::string::npos ||
                   message.find("exceeds") != std::string::npos || message.find("claims") != std::string::npos ||
                   message.find("magic") != std::string::npos,
               message.c_str());
    }
  }

  void tensorPastEndOfFile() {
    Spec s;
    s.data_bytes = 255;
    EXPECT_GGUF_ERROR(build(s), "extends past the end of the file");
    s = Spec{};
    s.offset = 0xffffffffffffffe0ull;  // aligned, and offset + size overflows
    EXPECT_GGUF_ERROR(build(s), "extends past the end of the file");
    s.offset = 64;
    EXPECT_GGUF_ERROR(build(s), "extends past the end of the file");
    s.offset = 4;
    EXPECT_GGUF_ERROR(build(s), "not a multiple of the alignment");
  }

  void absurdDimensionsAndCounts() {
    Spec s;
    s.ne = {32, int64_t{1} << 62};
    EXPECT_GGUF_ERROR(build(s), "absurd dimensions");
    s.ne = {int64_t{1} << 32, int64_t{1} << 32};  // each fine, product too large
    EXPECT_GGUF_ERROR(build(s), "absurd dimensions");
    s.ne = {32, -2};
    EXPECT_GGUF_ERROR(build(s), "absurd dimensions");
    s = Spec{};
    s.n_dims = 5;
    s.ne = {32, 2, 1, 1, 1};
    EXPECT_GGUF_ERROR(build(s), "5 dimensions");
    s = Spec{};
    s.n_tensors = uint64_t{1} << 60;
    EXPECT_GGUF_ERROR(build(s), "tensor count");
    s = Spec{};
    s.n_kv = ~uint64_t{0};
    EXPECT_GGUF_ERROR(build(s), "metadata count");
    s = Spec{};
    s.ne = {33, 2};
    s.ggml_type = 8;  // q8_0 rows must be whole blocks of 32
    EXPECT_GGUF_ERROR(build(s), "not whole q8_0 blocks");
  }

  void unknownTypes() {
    // a type GGML defines reads, whether or not the engine computes with it: its sizes are
    // known (q4_1: 20 bytes per 32 values; iq2_xxs: 66 per 256)
    Spec s;
    s.ggml_type = 3;
    {
      const auto bytes = build(s);
      const GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "ok.gguf");
      QVERIFY(f.tensors.at(0).type == TensorType::Q4_1);
      QCOMPARE(f.tensors.at(0).bytes, size_t{2 * 20});
    }
    s.ggml_type = 16;
    s.ne = {256, 2};
    s.data_bytes = 2 * 66;
    {
      const auto bytes = build(s);
      const GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "ok.gguf");
      QVERIFY(f.tensors.at(0).type == TensorType::IQ2_XXS);
      QCOMPARE(f.tensors.at(0).bytes, size_t{2 * 66});
    }
    // an id GGML does not define may be a newer file, not a broken one: the message says so,
    // with the types that are supported
    s = Spec{};
    s.ggml_type = 4000;
    EXPECT_GGUF_ERROR(build(s), "tensor 't' has type 4000, a tensor type Specula does not know");
    EXPECT_GGUF_ERROR(build(s), "f32, f16, bf16, q8_0, q4_0, q4_K, q6_K");
    QVERIFY(parse_error(build(s)).find("invalid GGUF file") == std::string::npos);
    s.ggml_type = 4;  // q4_2, removed from GGML long ago
    EXPECT_GGUF_ERROR(build(s), "has type 4,");
    s = Spec{};
    s.value_type = 13;
    EXPECT_GGUF_ERROR(build(s), "unknown value type 13");
  }

  void hostileMetadata() {
    // A string claiming more bytes than the file has.
    Bytes b;
    b.put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1);
    b.str("k").put<uint32_t>(8).put<uint64_t>(~uint64_t{0} - 4);
    EXPECT_GGUF_ERROR(b.b, "claims");
    // An array claiming 2^61 elements.
    Bytes a;
    a.put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1);
    a.str("k").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(uint64_t{1} << 61);
    EXPECT_GGUF_ERROR(a.b, "array elements");
    // Arrays nested past any real use.
    Bytes n;
    n.put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1);
    n.str("k").put<uint32_t>(9);
    for (int i = 0; i < 100; i++) n.put<uint32_t>(9).put<uint64_t>(1);
    EXPECT_GGUF_ERROR(n.b, "nests arrays");
    // Duplicate keys, and a bad alignment.
    Bytes d;
    d.put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(2);
    d.str("k").put<uint32_t>(4).put<uint32_t>(1).str("k").put<uint32_t>(4).put<uint32_t>(2);
    EXPECT_GGUF_ERROR(d.b, "duplicate metadata key 'k'");
    Bytes al;
    al.put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1);
    al.str("general.alignment").put<uint32_t>(4).put<uint32_t>(24);
    EXPECT_GGUF_ERROR(al.b, "power of two");
  }

  // Random corruption of a valid file: parse or a ModelError, never a crash.
  void randomCorruptionNeverCrashes() {
    const auto good = build(Spec{});
    std::mt19937 rng(99);
    int parsed = 0, rejected = 0;
    for (int i = 0; i < 3000; i++) {
      auto bytes = good;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; k++) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
      if (rng() % 4 == 0) bytes.resize(rng() % bytes.size());
      (parse_error(bytes).empty() ? parsed : rejected)++;
    }
    QVERIFY(parsed > 0 && rejected > 0);
  }

  void modelLevelErrors() {
    const std::string unknown = path("gpt.gguf");
    write_gguf_model_file(unknown, "gpt2", llama_tensors());
    EXPECT_LOAD_ERROR(unknown, "architecture 'gpt2' is not supported");

    auto tensors = llama_tensors();
    tensors.erase(tensors.begin() + 3);  // blk.0.attn_k.weight
    const std::string missing = path("missing.gguf");
    write_gguf_model_file(missing, "llama", tensors);
    EXPECT_LOAD_ERROR(missing, "missing tensor 'blk.0.attn_k.weight'");

    tensors = llama_tensors();
    tensors[2].second = {64, 32};  // wq with 32 rows
    const std::string shape = path("shape.gguf");
    write_gguf_model_file(shape, "llama", tensors);
    EXPECT_LOAD_ERROR(shape, "layer 0 wq has shape (32 rows, 64 cols), expected (64, 64)");

    const std::string good = path("good.gguf");
    write_gguf_model_file(good, "llama", llama_tensors());
    const auto model = load_model(good);
    QCOMPARE(model->config.n_kv_heads, 2);
    QVERIFY(model->tied_output());
    QVERIFY(model->tokenizer == nullptr);
    QVERIFY(model->weights.layers[0].ffn_norm.type == TensorType::F32);  // converted from f16
    QCOMPARE(static_cast<const float*>(model->weights.layers[0].ffn_norm.data)[63], 0.5f);
    QCOMPARE(static_cast<const float*>(model->weights.final_norm.data)[0], 0.5f);

    // Cancelling through the progress callback.
    std::vector<double> seen;
    LoadOptions options;
    options.progress = [&](double f) {
      seen.push_back(f);
      return f < 0.5;
    };
    QVERIFY_THROWS_EXCEPTION(ModelError, load_model(good, options));
    QVERIFY(!seen.empty() && seen.back() >= 0.5);
    seen.clear();
    options.progress = [&](double f) {
      seen.push_back(f);
      return true;
    };
    load_model(good, options);
    QVERIFY(std::is_sorted(seen.begin(), seen.end()));
    QCOMPARE(seen.back(), 1.0);

    EXPECT_LOAD_ERROR(path("nothing-here.gguf"), "no such file");
  }

  void llama2cCheckpoints() {
    const std::string good = path("tiny.bin");
    const std::vector<float> tied = llama2c_floats(false);
    write_llama2c(good, {kHeader, kHeader + 7}, tied);
    const auto model = load_model(good);
    QCOMPARE(model->format, std::string("llama2.c"));
    QCOMPARE(model->config.hidden_dim, 96);
    QVERIFY(model->tied_output());
    // Zero-copy: the views point into the file's floats in run.c's order.
    QCOMPARE(static_cast<const float*>(model->weights.token_embedding.data)[0], tied[0]);
    QCOMPARE(static_cast<const float*>(model->weights.layers[1].attn_norm.data)[0], tied[40 * 64 + 64]);

    std::vector<int32_t> untied_header(kHeader, kHeader + 7);
    untied_header[5] = -40;
    const std::vector<float> untied = llama2c_floats(true);
    write_llama2c(path("untied.bin"), untied_header, untied);
    const auto u = load_model(path("untied.bin"));
    QVERIFY(!u->tied_output());
    QCOMPARE(static_cast<const float*>(u->weights.output.data)[0], untied[untied.size() - 40 * 64]);

    const std::string truncated = path("truncated.bin");
    write_llama2c(truncated, {kHeader, kHeader + 7}, std::vector<float>(tied.begin(), tied.end() - 1));
    EXPECT_LOAD_ERROR(truncated, "(truncated)");
    std::vector<int32_t> absurd(kHeader, kHeader + 7);
    absurd[0] = 1 << 30;
    write_llama2c(path("absurd.bin"), absurd, tied);
    EXPECT_LOAD_ERROR(path("absurd.bin"), "absurd header");
    absurd = {kHeader, kHeader + 7};
    absurd[4] = 3;  // 4 heads do not group into 3 KV heads
    write_llama2c(path("groups.bin"), absurd, tied);
    EXPECT_LOAD_ERROR(path("groups.bin"), "absurd header");
    write_file(path("short.bin"), "abc", 3);
    EXPECT_LOAD_ERROR(path("short.bin"), "shorter than its header");
    write_file(path("v1.bin"), "ak42\1\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 32);
    EXPECT_LOAD_ERROR(path("v1.bin"), "versioned exports");
  }

  void safetensorsFiles() {
    const auto parse_error_st = [](const std::string& header, size_t data_bytes) -> std::string {
      std::vector<uint8_t> bytes(8 + header.size() + data_bytes);
      const uint64_t n = header.size();
      std::memcpy(bytes.data(), &n, 8);
      std::memcpy(bytes.data() + 8, header.data(), header.size());
      try {
        SafetensorsFile::parse(bytes.data(), bytes.size(), "bad.safetensors");
      } catch (const ModelError& e) {
        return e.what();
      }
      return "";
    };
    // the header read alone from a file says the same
    const auto read_header_error = [&](const std::string& header, size_t data_bytes) -> std::string {
      const std::string file = path("bad.safetensors");
      write_safetensors(file, header, data_bytes);
      try {
        SafetensorsFile::read_header(file);
      } catch (const ModelError& e) {
        return std::string(e.what()).substr(file.size() - std::string("bad.safetensors").size());
      }
      return "";
    };
    const auto expect = [&](const std::string& header, size_t data, const char* fragment) {
      const std::string message = parse_error_st(header, data);
      QVERIFY2(message.find("bad.safetensors") != std::string::npos && message.find(fragment) != std::string::npos,
               ("unexpected message: " + message).c_str());
      QCOMPARE(read_header_error(header, data), message);
    };
    QCOMPARE(parse_error_st(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, "__metadata__": {}})", 24),
             std::string());
    expect("{not json", 0, "not JSON");
    expect("[1, 2]", 0, "not a JSON object");
    expect(R"({"w": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}})", 16, "unsupported dtype I64");
    expect(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}})", 20, "past the end of the file");
    expect(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 24, "needs 24");
    expect(R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 16]}})", 16, "absurd shape");
    expect(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 16]}})", 16, "absurd shape");
    expect(R"({"w": {"dtype": "F32", "shape": [2]}})", 16, "needs dtype, shape and data_offsets");
    expect(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 16, "past the end");
    {
      std::vector<uint8_t> bytes(8, 0xff);  // header length 2^64-1
      QVERIFY_THROWS_EXCEPTION(ModelError, SafetensorsFile::parse(bytes.data(), bytes.size(), "bad.safetensors"));
      QVERIFY_THROWS_EXCEPTION(ModelError, SafetensorsFile::parse(bytes.data(), 5, "bad.safetensors"));
    }

    // Directory level: unknown architecture, missing tensor.
    const fs::path dir = path("hf");
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << R"({"architectures": ["GPT2LMHeadModel"], "hidden_size": 64})";
    write_safetensors((dir / "model.safetensors").string(), "{}", 0);
    const std::string message = load_error(dir.string());
    QVERIFY2(message.find("config.json") != std::string::npos &&
                 message.find("architecture 'GPT2LMHeadModel' is not supported") != std::string::npos,
             message.c_str());
    QCOMPARE(load_error(dir.string(), true), message);
    std::ofstream(dir / "config.json") << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
      "intermediate_size": 96, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
      "vocab_size": 40})";
    write_safetensors((dir / "model.safetensors").string(),
                      R"({"model.embed_tokens.weight": {"dtype": "F32", "shape": [40, 64], "data_offsets": [0, 10240]}})",
                      10240);
    const std::string missing = load_error(dir.string());
    QVERIFY2(missing.find("missing tensor 'model.layers.0.input_layernorm.weight'") != std::string::npos, missing.c_str());
    QCOMPARE(load_error(dir.string(), true), missing);
    std::ofstream(dir / "config.json") << "{\"hidden_size\": ";
    QVERIFY(load_error(dir.string()).find("not valid JSON") != std::string::npos);
    QCOMPARE(load_error(dir.string(), true), load_error(dir.string()));
  }
};

QTEST_GUILESS_MAIN(TestGguf)
#include "test_gguf.moc"
