#include "model/safetensors.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "model/model.h"

namespace specula {

namespace {

constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;  // the reference library's own limit
constexpr int64_t kMaxElements = int64_t{1} << 50;

}  // namespace

int64_t SafetensorsTensor::rows() const {
  int64_t r = 1;
  for (size_t i = 0; i + 1 < shape.size(); i++) r *= shape[i];
  return r;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  auto mapped = MappedFile::open(path);
  SafetensorsFile f = parse(mapped->data(), mapped->size(), path);
  f.file = std::move(mapped);
  return f;
}

SafetensorsFile SafetensorsFile::read_header(const std::string& path) {
  FilePrefix prefix(path);
  const uint8_t* start = prefix.read(8);
  uint64_t header_bytes = 0;
  if (prefix.available() == 8) std::memcpy(&header_bytes, start, 8);
  // a length that does not fit is refused by parse from the first 8 bytes alone
  const bool fits = header_bytes <= kMaxHeaderBytes && header_bytes <= prefix.file_size() - 8;
  const uint8_t* header = prefix.read(fits ? static_cast<size_t>(8 + header_bytes) : 8);
  return parse(header, prefix.available(), path, prefix.file_size());
}

SafetensorsFile SafetensorsFile::parse(const uint8_t* data, size_t size, std::string name) {
  return parse(data, size, std::move(name), size);
}

// `data` holds `size` bytes of a `file_size`-byte file: all of it, or its header alone
// (then tensors get no data pointer).
SafetensorsFile SafetensorsFile::parse(const uint8_t* data, size_t size, std::string name, uint64_t file_size) {
  SafetensorsFile f;
  f.path = std::move(name);
  const auto fail = [&](const std::string& what) -> ModelError {
    return ModelError(f.path + ": invalid safetensors file: " + what);
  };
  if (file_size < 8) throw fail("truncated: " + std::to_string(file_size) + " bytes, no header length");
  uint64_t header_bytes;
  std::memcpy(&header_bytes, data, 8);
  if (header_bytes > kMaxHeaderBytes || header_bytes > file_size - 8) {
    throw fail("header length " + std::to_string(header_bytes) + " does not fit in the " +
               std::to_string(file_size) + "-byte file");
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(data + 8, data + 8 + header_bytes);
  } catch (const nlohmann::json::exception& e) {
    throw fail(std::string("header is not JSON: ") + e.what());
  }
  if (!header.is_object()) throw fail("header is not a JSON object");

  const bool whole = size == file_size;
  const uint8_t* section = data + 8 + header_bytes;
  const uint64_t section_bytes = file_size - 8 - header_bytes;
  for (const auto& item : header.items()) {
    const std::string& key = item.key();  // not a structured binding: lambdas below capture it
    const nlohmann::json& entry = item.value();
    if (key == "__metadata__") continue;
    SafetensorsTensor t;
    t.name = key;
    const auto bad = [&](const std::string& what) { return fail("tensor '" + key + "' " + what); };
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets")) {
      throw bad("needs dtype, shape and data_offsets");
    }
    const auto& dtype = entry["dtype"];
    if (!dtype.is_string()) throw bad("has a dtype that is not a string");
    const std::string d = dtype.get<std::string>();
    if (d == "F32") t.type = TensorType::F32;
    else if (d == "F16") t.type = TensorType::F16;
    else if (d == "BF16") t.type = TensorType::BF16;
    else throw bad("has unsupported dtype " + d + " (F32, F16 and BF16 are read)");

    const auto& shape = entry["shape"];
    if (!shape.is_array() || shape.size() > 4) throw bad("has a shape that is not a list of at most 4 sizes");
    int64_t elements = 1;
    for (const auto& ne : shape) {
      if (!ne.is_number_unsigned() || ne.get<uint64_t>() > static_cast<uint64_t>(kMaxElements)) {
        throw bad("has absurd shape " + shape.dump());
      }
      t.shape.push_back(ne.get<int64_t>());
      if (__builtin_mul_overflow(elements, t.shape.back(), &elements) || elements > kMaxElements) {
        throw bad("has absurd shape " + shape.dump());
      }
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
      throw bad("needs data_offsets [begin, end]");
    }
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end || end > section_bytes) {
      throw bad("data [" + std::to_string(begin) + ", " + std::to_string(end) + ") extends past the end of the file (" +
                std::to_string(section_bytes) + " data bytes)");
    }
    t.bytes = static_cast<size_t>(elements) * static_cast<size_t>(type_traits(t.type).block_bytes);
    if (end - begin != t.bytes) {
      throw bad("holds " + std::to_string(end - begin) + " bytes but its shape " + shape.dump() + " needs " +
                std::to_string(t.bytes));
    }
    t.data = whole ? section + begin : nullptr;
    f.tensors.push_back(std::move(t));
  }
  return f;
}

}  // namespace specula
