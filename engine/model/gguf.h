// GGUF (version 3, as llama.cpp writes it): a reader over a memory-mapped file and a writer.
//
// File layout: "GGUF" u32 version, u64 tensor count, u64 metadata count, the metadata
// (key string, u32 value type, value), the tensor table (name string, u32 dimension count,
// i64 ne[dims] innermost first, u32 ggml type, u64 offset from the data section), padding
// to `general.alignment` (default 32), then the tensor data. Strings are u64 length + bytes
// (no terminator); arrays are u32 element type + u64 count + elements. Little-endian.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/mapped_file.h"
#include "model/tensor.h"
#include "model/vocabulary.h"

namespace specula {

enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string_view gguf_type_name(GgufType type);
// The name llama.cpp gives a `general.file_type` (enum llama_ftype: 15 is "Q4_K_M"); empty
// for a value it does not define.
std::string_view llama_file_type_name(int64_t file_type);

// One metadata value. Scalars use `integer`, `real` or `text`; arrays fill the vector
// matching their element type.
struct GgufValue {
  GgufType type = GgufType::U8;
  GgufType element_type = GgufType::U8;  // ARRAY only: the type of every element
  int64_t integer = 0;                   // U8..I64 and BOOL; U64 above INT64_MAX keeps its bits
  double real = 0;                       // F32, F64 (F32 converts exactly)
  std::string text;                      // STRING
  std::vector<int64_t> integers;         // ARRAY of integers or bools
  std::vector<double> reals;             // ARRAY of F32 / F64
  std::vector<std::string> texts;        // ARRAY of STRING
  std::vector<GgufValue> arrays;         // ARRAY of ARRAY

  bool is_integer() const;  // U8..I64 or BOOL
  bool is_real() const { return type == GgufType::F32 || type == GgufType::F64; }
  size_t array_size() const;

  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue string_array(std::vector<std::string> v);
  static GgufValue f32_array(const std::vector<float>& v);
  static GgufValue i32_array(const std::vector<int32_t>& v);
};

struct GgufTensorInfo {
  std::string name;
  TensorType type = TensorType::F32;
  std::vector<int64_t> shape;   // (n_dims) ne0 (contiguous) first, as GGUF stores it
  uint64_t offset = 0;          // from the start of the data section
  size_t bytes = 0;             // stored size
  const uint8_t* data = nullptr;  // null in a file read by read_header

  int64_t cols() const { return shape.empty() ? 0 : shape[0]; }
  int64_t rows() const;  // product of the outer dimensions
  TensorView view() const { return TensorView{type, cols(), rows(), data}; }
};

// How much of a GGUF file's header read_header parses.
enum class GgufPart {
  Metadata,            // the key-value pairs only
  MetadataAndTensors,  // and the tensor table, checked against the file's size
};

struct GgufFile {
  std::string path;  // named in every error message
  uint32_t version = 3;
  uint32_t alignment = 32;
  uint64_t data_offset = 0;  // start of the tensor data section in the file
  std::vector<std::pair<std::string, GgufValue>> metadata;  // in file order
  std::vector<GgufTensorInfo> tensors;                      // in file order
  std::shared_ptr<const MappedFile> file;                   // keeps `data` pointers valid; null after read_header

  // Maps and parses `path`. Throws ModelError naming the file and the problem.
  static GgufFile open(const std::string& path);
  // Reads and parses the header of `path` alone (never its tensor data, never mapped), with
  // open()'s checks and messages for the part read; tensors have no `data`.
  static GgufFile read_header(const std::string& path, GgufPart part = GgufPart::MetadataAndTensors);
  // Parses bytes the caller keeps alive; `name` stands for the file in messages.
  static GgufFile parse(const uint8_t* data, size_t size, std::string name);

  const GgufValue* find(std::string_view key) const;
  const GgufTensorInfo* tensor(std::string_view name) const;

  // Typed lookups: a missing key gives `fallback` (or throws when none is given); a value
  // of the wrong type or out of range throws ModelError naming the key.
  int64_t get_int(std::string_view key) const;
  int64_t get_int(std::string_view key, int64_t fallback) const;
  double get_real(std::string_view key, double fallback) const;
  std::string get_string(std::string_view key, std::string fallback) const;
  bool get_bool(std::string_view key, bool fallback) const;

 private:
  friend struct GgufParser;
  std::map<std::string, size_t, std::less<>> key_index_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// The vocabulary stored as tokenizer.ggml.*; empty when the file has none. Throws ModelError
// when the arrays disagree or the tokenizer model is neither "llama" (SentencePiece) nor
// "gpt2" (byte-level BPE).
Vocabulary gguf_vocabulary(const GgufFile& gguf);

class GgufWriter {
 public:
  static constexpr uint32_t kAlignment = 32;

  void set(std::string key, GgufValue value);  // replaces an existing key
  // `fill` writes exactly row_bytes(type, shape[0]) * rows bytes into its argument.
  void add_tensor(std::string name, TensorType type, std::vector<int64_t> shape,
                  std::function<void(uint8_t*)> fill);
  // Writes the file (to a temporary beside it, renamed at the end). Throws ModelError.
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> shape;  // ne0 first
    size_t bytes;
    std::function<void(uint8_t*)> fill;
  };
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace specula
