#include "model/gguf.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "model/model.h"

namespace specula {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxDims = 4;              // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 4;        // nested arrays deeper than this are hostile, not data
constexpr int64_t kMaxElements = int64_t{1} << 50;

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::F64); }

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    case GgufType::STRING: return 8;   // at least its length
    case GgufType::ARRAY: return 12;   // at least its element type and count
  }
  return 1;
}

// A bounds-checked little-endian cursor; every failure names the file and the offset.
// It reads bytes in memory, or a file's start that it reads further as it goes (the
// header alone); either way the bounds checked are the file's.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, const std::string& name)
      : data_(data), available_(size), size_(size), name_(name) {}
  Reader(FilePrefix& prefix, const std::string& name)
      : prefix_(&prefix), size_(static_cast<size_t>(prefix.file_size())), name_(name) {}

  size_t offset() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw ModelError(name_ + ": invalid GGUF file: " + what);
  }

  template <typename T>
  T read(const char* what) {
    if (remaining() < sizeof(T)) {
      fail("truncated at byte " + std::to_string(pos_) + " while reading " + what);
    }
    need(sizeof(T));
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char* what) {
    const uint64_t n = read<uint64_t>(what);
    if (n > remaining()) {
      fail(std::string(what) + " at byte " + std::to_string(pos_ - 8) + " claims " +
           std::to_string(n) + " bytes but only " + std::to_string(remaining()) + " remain");
    }
    need(static_cast<size_t>(n));
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }

  GgufValue read_value(GgufType type, const std::string& key, int depth) {
    GgufValue v;
    v.type = type;
    switch (type) {
      case GgufType::U8: v.integer = read<uint8_t>(key.c_str()); break;
      case GgufType::I8: v.integer = read<int8_t>(key.c_str()); break;
      case GgufType::U16: v.integer = read<uint16_t>(key.c_str()); break;
      case GgufType::I16: v.integer = read<int16_t>(key.c_str()); break;
      case GgufType::U32: v.integer = read<uint32_t>(key.c_str()); break;
      case GgufType::I32: v.integer = read<int32_t>(key.c_str()); break;
      case GgufType::U64: v.integer = static_cast<int64_t>(read<uint64_t>(key.c_str())); break;
      case GgufType::I64: v.integer = read<int64_t>(key.c_str()); break;
      case GgufType::BOOL: v.integer = read<uint8_t>(key.c_str()) != 0; break;
      case GgufType::F32: v.real = read<float>(key.c_str()); break;
      case GgufType::F64: v.real = read<double>(key.c_str()); break;
      case GgufType::STRING: v.text = read_string(key.c_str()); break;
      case GgufType::ARRAY: {
        if (depth >= kMaxArrayDepth) fail("metadata '" + key + "' nests arrays too deeply");
        const uint32_t et = read<uint32_t>(key.c_str());
        if (!valid_value_type(et)) {
          fail("metadata '" + key + "' is an array of unknown value type " + std::to_string(et));
        }
        v.element_type = static_cast<GgufType>(et);
        const uint64_t count = read<uint64_t>(key.c_str());
        if (count > remaining() / scalar_size(v.element_type)) {
          fail("metadata '" + key + "' claims " + std::to_string(count) + " array elements but only " +
               std::to_string(remaining()) + " bytes remain");
        }
        const size_t n = static_cast<size_t>(count);
        for (size_t i = 0; i < n; i++) {
          GgufValue e = read_value(v.element_type, key, depth + 1);
          if (v.element_type == GgufType::STRING) {
            if (i == 0) v.texts.reserve(n);
            v.texts.push_back(std::move(e.text));
          } else if (v.element_type == GgufType::ARRAY) {
            v.arrays.push_back(std::move(e));
          } else if (e.is_real()) {
            if (i == 0) v.reals.reserve(n);
            v.reals.push_back(e.real);
          } else {
            if (i == 0) v.integers.reserve(n);
            v.integers.push_back(e.integer);
          }
        }
        break;
      }
    }
    return v;
  }

 private:
  // The next `n` bytes (within the file) in memory: a prefix reads on, at least doubling.
  void need(size_t n) {
    if (pos_ + n <= available_) return;
    constexpr size_t kFirstRead = size_t{1} << 20;
    data_ = prefix_->read(std::max({pos_ + n, 2 * available_, kFirstRead}));
    available_ = prefix_->available();
  }

  FilePrefix* prefix_ = nullptr;  // null when every byte is in memory
  const uint8_t* data_ = nullptr;
  size_t available_ = 0;          // bytes at data_
  size_t size_;                   // bytes of the file
  const std::string& name_;
  size_t pos_ = 0;
};

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); i++) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::string_view gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::U8: return "u8";
    case GgufType::I8: return "i8";
    case GgufType::U16: return "u16";
    case GgufType::I16: return "i16";
    case GgufType::U32: return "u32";
    case GgufType::I32: return "i32";
    case GgufType::F32: return "f32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::U64: return "u64";
    case GgufType::I64: return "i64";
    case GgufType::F64: return "f64";
  }
  return "unknown";
}

std::string_view llama_file_type_name(int64_t file_type) {
  // indexed by value; 5, 6 and 33-35 were removed from llama.cpp, 4 is no longer written
  static constexpr std::string_view kNames[] = {
      "F32", "F16", "Q4_0", "Q4_1", "Q4_1_SOME_F16", "", "", "Q8_0", "Q5_0", "Q5_1",
      "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ2_XXS",
      "IQ2_XS", "Q2_K_S", "IQ3_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ3_M", "IQ2_S", "IQ2_M",
      "IQ4_XS", "IQ1_M", "BF16", "", "", "", "TQ1_0", "TQ2_0", "MXFP4_MOE"};
  if (file_type < 0 || file_type >= static_cast<int64_t>(std::size(kNames))) return {};
  return kNames[file_type];
}

bool GgufValue::is_integer() const {
  return type != GgufType::F32 && type != GgufType::F64 && type != GgufType::STRING &&
         type != GgufType::ARRAY;
}

size_t GgufValue::array_size() const {
  if (type != GgufType::ARRAY) return 0;
  return integers.size() + reals.size() + texts.size() + arrays.size();
}

GgufValue GgufValue::u32(uint32_t v) { GgufValue r; r.type = GgufType::U32; r.integer = v; return r; }
GgufValue GgufValue::i32(int32_t v) { GgufValue r; r.type = GgufType::I32; r.integer = v; return r; }
GgufValue GgufValue::u64(uint64_t v) {
  GgufValue r;
  r.type = GgufType::U64;
  r.integer = static_cast<int64_t>(v);
  return r;
}
GgufValue GgufValue::f32(float v) { GgufValue r; r.type = GgufType::F32; r.real = v; return r; }
GgufValue GgufValue::boolean(bool v) { GgufValue r; r.type = GgufType::BOOL; r.integer = v; return r; }
GgufValue GgufValue::string(std::string v) {
  GgufValue r;
  r.type = GgufType::STRING;
  r.text = std::move(v);
  return r;
}
GgufValue GgufValue::string_array(std::vector<std::string> v) {
  GgufValue r;
  r.type = GgufType::ARRAY;
  r.element_type = GgufType::STRING;
  r.texts = std::move(v);
  return r;
}
GgufValue GgufValue::f32_array(const std::vector<float>& v) {
  GgufValue r;
  r.type = GgufType::ARRAY;
  r.element_type = GgufType::F32;
  r.reals.assign(v.begin(), v.end());
  return r;
}
GgufValue GgufValue::i32_array(const std::vector<int32_t>& v) {
  GgufValue r;
  r.type = GgufType::ARRAY;
  r.element_type = GgufType::I32;
  r.integers.assign(v.begin(), v.end());
  return r;
}

int64_t GgufTensorInfo::rows() const {
  int64_t r = 1;
  for (size_t i = 1; i < shape.size(); i++) r *= shape[i];
  return r;
}

struct GgufParser {
  static void parse(GgufFile& f, Reader& in, const uint8_t* data, GgufPart part);
};

GgufFile GgufFile::open(const std::string& path) {
  auto mapped = MappedFile::open(path);
  GgufFile f = parse(mapped->data(), mapped->size(), path);
  f.file = std::move(mapped);
  return f;
}

GgufFile GgufFile::read_header(const std::string& path, GgufPart part) {
  FilePrefix prefix(path);
  GgufFile f;
  f.path = path;
  Reader in(prefix, f.path);
  GgufParser::parse(f, in, nullptr, part);
  return f;
}

GgufFile GgufFile::parse(const uint8_t* data, size_t size, std::string name) {
  GgufFile f;
  f.path = std::move(name);
  Reader in(data, size, f.path);
  GgufParser::parse(f, in, data, GgufPart::MetadataAndTensors);
  return f;
}

// Fills `f` from `in`; tensors point into `data` (the whole file), or nowhere when it is null.
void GgufParser::parse(GgufFile& f, Reader& in, const uint8_t* data, GgufPart part) {
  const uint64_t size = in.remaining();

  if (size < 4 || in.read<uint32_t>("magic") != kMagic) in.fail("wrong magic (expected \"GGUF\")");
  f.version = in.read<uint32_t>("version");
  if (f.version != 2 && f.version != 3) {
    const bool swapped = __builtin_bswap32(f.version) == 2 || __builtin_bswap32(f.version) == 3;
    in.fail("unsupported version " + std::to_string(f.version) +
            (swapped ? " (a big-endian file)" : " (only versions 2 and 3 are read)"));
  }
  const uint64_t n_tensors = in.read<uint64_t>("tensor count");
  const uint64_t n_kv = in.read<uint64_t>("metadata count");
  // Each metadata entry takes at least 13 bytes and each tensor entry at least 32, so
  // counts beyond that are lies; checking first keeps allocations bounded by the file size.
  if (n_kv > in.remaining() / 13) in.fail("metadata count " + std::to_string(n_kv) + " exceeds what the file can hold");
  if (n_tensors > in.remaining() / 32) in.fail("tensor count " + std::to_string(n_tensors) + " exceeds what the file can hold");

  for (uint64_t i = 0; i < n_kv; i++) {
    std::string key = in.read_string("metadata key");
    const uint32_t type = in.read<uint32_t>("metadata value type");
    if (!valid_value_type(type)) in.fail("metadata '" + key + "' has unknown value type " + std::to_string(type));
    GgufValue value = in.read_value(static_cast<GgufType>(type), key, 0);
    if (!f.key_index_.emplace(key, f.metadata.size()).second) in.fail("duplicate metadata key '" + key + "'");
    f.metadata.emplace_back(std::move(key), std::move(value));
  }
  if (part == GgufPart::Metadata) return;

  if (const GgufValue* a = f.find("general.alignment")) {
    if (!a->is_integer() || a->integer <= 0 || a->integer > (1 << 30) || !std::has_single_bit(static_cast<uint64_t>(a->integer))) {
      in.fail("general.alignment must be a power of two, not " +
              (a->is_integer() ? std::to_string(a->integer) : "a " + std::string(gguf_type_name(a->type))));
    }
    f.alignment = static_cast<uint32_t>(a->integer);
  }

  for (uint64_t i = 0; i < n_tensors; i++) {
    GgufTensorInfo t;
    t.name = in.read_string("tensor name");
    const uint32_t n_dims = in.read<uint32_t>("tensor dimension count");
    if (n_dims < 1 || n_dims > kMaxDims) {
      in.fail("tensor '" + t.name + "' has " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    }
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
      const int64_t ne = in.read<int64_t>("tensor dimension");
      t.shape.push_back(ne);
      if (ne < 0 || ne > kMaxElements || __builtin_mul_overflow(elements, ne, &elements) || elements > kMaxElements) {
        in.fail("tensor '" + t.name + "' has absurd dimensions " + shape_string(t.shape) +
                (d + 1 < n_dims ? "..." : ""));
      }
    }
    const uint32_t ggml_type = in.read<uint32_t>("tensor type");
    const auto type = tensor_type_from_ggml(ggml_type);
    if (!type) {
      // A type id GGML did not define when this was written: perhaps a newer file, not a
      // broken one, and without its block size the rest of the table cannot be read.
      throw ModelError(f.path + ": tensor '" + t.name + "' has type " + std::to_string(ggml_type) +
                       ", a tensor type Specula does not know (it computes with " + supported_type_names() + ")");
    }
    t.type = *type;
    const TypeTraits& traits = type_traits(t.type);
    if (t.shape[0] % traits.block_elements != 0) {
      in.fail("tensor '" + t.name + "' rows of " + std::to_string(t.shape[0]) +
              " values are not whole " + std::string(traits.name) + " blocks");
    }
    t.offset = in.read<uint64_t>("tensor offset");
    if (t.offset % f.alignment != 0) {
      in.fail("tensor '" + t.name + "' offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
              std::to_string(f.alignment));
    }
    // elements <= 2^50 and block_bytes / block_elements <= 8 (i64, f64), so this cannot overflow.
    t.bytes = static_cast<size_t>(elements / traits.block_elements * traits.block_bytes);
    if (!f.tensor_index_.emplace(t.name, f.tensors.size()).second) in.fail("duplicate tensor '" + t.name + "'");
    f.tensors.push_back(std::move(t));
  }

  const uint64_t table_end = in.offset();
  f.data_offset = (table_end + f.alignment - 1) / f.alignment * f.alignment;
  if (n_tensors > 0 && f.data_offset > size) in.fail("truncated before the tensor data section");
  for (GgufTensorInfo& t : f.tensors) {
    const uint64_t available = size - f.data_offset;
    if (t.offset > available || t.bytes > available - t.offset) {
      in.fail("tensor '" + t.name + "' (" + std::to_string(t.bytes) + " bytes at data offset " +
              std::to_string(t.offset) + ") extends past the end of the file (" + std::to_string(size) + " bytes)");
    }
    t.data = data == nullptr ? nullptr : data + f.data_offset + t.offset;
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata[it->second].second;
}

const GgufTensorInfo* GgufFile::tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors[it->second];
}

namespace {

[[noreturn]] void wrong_type(const GgufFile& f, std::string_view key, const GgufValue& v, const char* expected) {
  throw ModelError(f.path + ": metadata '" + std::string(key) + "' is a " + std::string(gguf_type_name(v.type)) +
                   ", expected " + expected);
}

}  // namespace

int64_t GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) throw ModelError(path + ": metadata '" + std::string(key) + "' is missing");
  if (!v->is_integer() || (v->type == GgufType::U64 && v->integer < 0)) wrong_type(*this, key, *v, "an integer");
  return v->integer;
}

int64_t GgufFile::get_int(std::string_view key, int64_t fallback) const {
  return find(key) ? get_int(key) : fallback;
}

double GgufFile::get_real(std::string_view key, double fallback) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return fallback;
  if (v->is_real()) return v->real;
  if (v->is_integer()) return static_cast<double>(v->integer);
  wrong_type(*this, key, *v, "a number");
}

std::string GgufFile::get_string(std::string_view key, std::string fallback) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return fallback;
  if (v->type != GgufType::STRING) wrong_type(*this, key, *v, "a string");
  return v->text;
}

bool GgufFile::get_bool(std::string_view key, bool fallback) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_integer()) wrong_type(*this, key, *v, "a bool");
  return v->integer != 0;
}

Vocabulary gguf_vocabulary(const GgufFile& f) {
  Vocabulary vocab;
  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  if (tokens == nullptr) return vocab;
  const std::string model = f.get_string("tokenizer.ggml.model", "llama");
  if (model == "gpt2") {
    vocab.model = TokenizerModel::ByteLevelBpe;
    vocab.bos = vocab.eos = vocab.unk = -1;
    vocab.add_bos = vocab.add_dummy_prefix = vocab.byte_fallback = false;
  } else if (model != "llama") {
    throw ModelError(f.path + ": tokenizer.ggml.model '" + model +
                     "' is not supported (only 'llama', SentencePiece, and 'gpt2', byte-level BPE)");
  }
  if (tokens->type != GgufType::ARRAY || tokens->element_type != GgufType::STRING) {
    throw ModelError(f.path + ": tokenizer.ggml.tokens is not an array of strings");
  }
  vocab.pieces = tokens->texts;
  const size_t n = vocab.pieces.size();
  if (const GgufValue* scores = f.find("tokenizer.ggml.scores")) {
    if (scores->type != GgufType::ARRAY || scores->reals.size() != n) {
      throw ModelError(f.path + ": tokenizer.ggml.scores must be " + std::to_string(n) + " numbers");
    }
    vocab.scores.assign(scores->reals.begin(), scores->reals.end());
  } else {
    vocab.scores.assign(n, 0.0f);
  }
  if (const GgufValue* types = f.find("tokenizer.ggml.token_type")) {
    if (types->type != GgufType::ARRAY || types->integers.size() != n) {
      throw ModelError(f.path + ": tokenizer.ggml.token_type must be " + std::to_string(n) + " integers");
    }
    for (int64_t t : types->integers) {
      if (t < static_cast<int64_t>(TokenKind::Normal) || t > static_cast<int64_t>(TokenKind::Byte)) {
        throw ModelError(f.path + ": tokenizer.ggml.token_type has unknown kind " + std::to_string(t));
      }
      vocab.kinds.push_back(static_cast<TokenKind>(t));
    }
  } else {
    vocab.kinds.assign(n, TokenKind::Normal);
  }
  if (vocab.model == TokenizerModel::ByteLevelBpe) {
    const GgufValue* merges = f.find("tokenizer.ggml.merges");
    if (merges == nullptr || merges->type != GgufType::ARRAY || merges->element_type != GgufType::STRING) {
      throw ModelError(f.path + ": a byte-level BPE vocabulary needs tokenizer.ggml.merges (an array of strings)");
    }
    vocab.merges = merges->texts;
    vocab.pre = f.get_string("tokenizer.ggml.pre", "");
  } else {
    // GGUF has no byte-fallback flag: SentencePiece vocabularies with it carry all 256 byte pieces.
    vocab.byte_fallback = std::count(vocab.kinds.begin(), vocab.kinds.end(), TokenKind::Byte) == 256;
  }
  const auto token_id = [&](const char* key, int fallback) {
    const int64_t id = f.get_int(key, fallback);
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      throw ModelError(f.path + ": " + key + " " + std::to_string(id) + " is outside the vocabulary of " +
                       std::to_string(n));
    }
    return static_cast<int>(id);
  };
  vocab.bos = token_id("tokenizer.ggml.bos_token_id", vocab.bos);
  vocab.eos = token_id("tokenizer.ggml.eos_token_id", vocab.eos);
  vocab.unk = token_id("tokenizer.ggml.unknown_token_id", vocab.unk);
  vocab.pad = token_id("tokenizer.ggml.padding_token_id", vocab.pad);
  vocab.eot = token_id("tokenizer.ggml.eot_token_id", -1);
  vocab.eom = token_id("tokenizer.ggml.eom_token_id", -1);
  // fill-in-the-middle ids, under their current names or the older prefix/suffix/middle ones
  vocab.fim.prefix = token_id("tokenizer.ggml.fim_pre_token_id", token_id("tokenizer.ggml.prefix_token_id", -1));
  vocab.fim.suffix = token_id("tokenizer.ggml.fim_suf_token_id", token_id("tokenizer.ggml.suffix_token_id", -1));
  vocab.fim.middle = token_id("tokenizer.ggml.fim_mid_token_id", token_id("tokenizer.ggml.middle_token_id", -1));
  vocab.fim.pad = token_id("tokenizer.ggml.fim_pad_token_id", -1);
  vocab.fim.repo = token_id("tokenizer.ggml.fim_rep_token_id", -1);
  vocab.fim.sep = token_id("tokenizer.ggml.fim_sep_token_id", -1);
  const std::string fim_order = f.get_string("specula.fim.order", "psm");
  if (fim_order != "psm" && fim_order != "spm") {
    throw ModelError(f.path + ": specula.fim.order is \"" + fim_order + "\"; it is \"psm\" or \"spm\"");
  }
  vocab.fim.spm = fim_order == "spm";
  vocab.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", vocab.add_bos);
  vocab.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", vocab.add_eos);
  vocab.add_dummy_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", vocab.add_dummy_prefix);
  return vocab;
}

void GgufWriter::set(std::string key, GgufValue value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::add_tensor(std::string name, TensorType type, std::vector<int64_t> shape,
                            std::function<void(uint8_t*)> fill) {
  if (shape.empty() || shape.size() > static_cast<size_t>(kMaxDims)) {
    throw ModelError("GGUF writer: tensor '" + name + "' needs 1 to 4 dimensions");
  }
  int64_t rows = 1;
  for (size_t i = 1; i < shape.size(); i++) rows *= shape[i];
  const size_t bytes = row_bytes(type, shape[0]) * static_cast<size_t>(rows);
  tensors_.push_back(Tensor{std::move(name), type, std::move(shape), bytes, std::move(fill)});
}

namespace {

class FileWriter {
 public:
  explicit FileWriter(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "wb")) {
    if (f_ == nullptr) throw ModelError(path + ": cannot create: " + std::strerror(errno));
  }
  ~FileWriter() {
    if (f_ != nullptr) std::fclose(f_);
  }
  void bytes(const void* p, size_t n) {
    if (n > 0 && std::fwrite(p, 1, n, f_) != n) throw ModelError(path_ + ": write failed: " + std::strerror(errno));
    written_ += n;
  }
  template <typename T>
  void put(T v) { bytes(&v, sizeof v); }
  void string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad(size_t alignment) {
    static const uint8_t zeros[64] = {};
    while (written_ % alignment != 0) bytes(zeros, std::min(alignment - written_ % alignment, sizeof zeros));
  }
  void close() {
    const int rc = std::fclose(f_);
    f_ = nullptr;
    if (rc != 0) throw ModelError(path_ + ": write failed: " + std::strerror(errno));
  }

 private:
  std::string path_;
  std::FILE* f_;
  size_t written_ = 0;
};

void write_scalar(FileWriter& out, GgufType type, int64_t integer, double real) {
  switch (type) {
    case GgufType::U8: case GgufType::BOOL: out.put(static_cast<uint8_t>(integer)); break;
    case GgufType::I8: out.put(static_cast<int8_t>(integer)); break;
    case GgufType::U16: out.put(static_cast<uint16_t>(integer)); break;
    case GgufType::I16: out.put(static_cast<int16_t>(integer)); break;
    case GgufType::U32: out.put(static_cast<uint32_t>(integer)); break;
    case GgufType::I32: out.put(static_cast<int32_t>(integer)); break;
    case GgufType::U64: out.put(static_cast<uint64_t>(integer)); break;
    case GgufType::I64: out.put(integer); break;
    case GgufType::F32: out.put(static_cast<float>(real)); break;
    case GgufType::F64: out.put(real); break;
    case GgufType::STRING: case GgufType::ARRAY: break;
  }
}

void write_value(FileWriter& out, const GgufValue& v) {
  if (v.type == GgufType::STRING) {
    out.string(v.text);
  } else if (v.type == GgufType::ARRAY) {
    out.put(static_cast<uint32_t>(v.element_type));
    out.put<uint64_t>(v.array_size());
    for (const std::string& s : v.texts) out.string(s);
    for (const GgufValue& a : v.arrays) write_value(out, a);
    for (int64_t i : v.integers) write_scalar(out, v.element_type, i, 0);
    for (double r : v.reals) write_scalar(out, v.element_type, 0, r);
  } else {
    write_scalar(out, v.type, v.integer, v.real);
  }
}

}  // namespace

void GgufWriter::write(const std::string& path) const {
  const std::string temporary = path + ".partial";
  try {
    FileWriter out(temporary);
    out.put(kMagic);
    out.put<uint32_t>(3);
    out.put<uint64_t>(tensors_.size());
    // general.alignment is always written first and always kAlignment, whatever was set.
    const auto is_alignment = [](const auto& kv) { return kv.first == "general.alignment"; };
    const size_t n_kv = 1 + metadata_.size() - std::count_if(metadata_.begin(), metadata_.end(), is_alignment);
    out.put<uint64_t>(n_kv);
    out.string("general.alignment");
    out.put(static_cast<uint32_t>(GgufType::U32));
    out.put(kAlignment);
    for (const auto& kv : metadata_) {
      if (is_alignment(kv)) continue;
      out.string(kv.first);
      out.put(static_cast<uint32_t>(kv.second.type));
      write_value(out, kv.second);
    }
    uint64_t offset = 0;
    for (const Tensor& t : tensors_) {
      out.string(t.name);
      out.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
      for (int64_t ne : t.shape) out.put(ne);
      out.put(static_cast<uint32_t>(t.type));
      out.put(offset);
      offset += (t.bytes + kAlignment - 1) / kAlignment * kAlignment;
    }
    out.pad(kAlignment);
    std::vector<uint8_t> buffer;
    for (const Tensor& t : tensors_) {
      buffer.assign(t.bytes, 0);
      t.fill(buffer.data());
      out.bytes(buffer.data(), buffer.size());
      out.pad(kAlignment);
    }
    out.close();
  } catch (...) {
    std::remove(temporary.c_str());
    throw;
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw ModelError(path + ": cannot rename the written file into place: " + std::strerror(errno));
  }
}

}  // namespace specula
