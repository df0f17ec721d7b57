// Hugging Face safetensors: u64 header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [rows, cols], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {...}}, then the data section the offsets point into.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/mapped_file.h"
#include "model/tensor.h"

namespace specula {

struct SafetensorsTensor {
  std::string name;
  TensorType type = TensorType::F32;  // F32, F16 or BF16
  std::vector<int64_t> shape;         // outermost first, as PyTorch writes it
  const uint8_t* data = nullptr;      // (bytes) bytes, little-endian; null after read_header
  size_t bytes = 0;

  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  int64_t rows() const;
};

struct SafetensorsFile {
  std::string path;
  std::vector<SafetensorsTensor> tensors;  // in header order
  std::shared_ptr<const MappedFile> file;  // keeps `data` pointers valid; null after read_header

  // Maps and validates `path`. Throws ModelError naming the file and the problem.
  static SafetensorsFile open(const std::string& path);
  // Reads and validates the header of `path` alone (never mapped), with open()'s checks
  // and messages; tensors have no `data`.
  static SafetensorsFile read_header(const std::string& path);
  // Validates bytes the caller keeps alive; `name` stands for the file in messages.
  static SafetensorsFile parse(const uint8_t* data, size_t size, std::string name);

 private:
  static SafetensorsFile parse(const uint8_t* data, size_t size, std::string name, uint64_t file_size);
};

}  // namespace specula
