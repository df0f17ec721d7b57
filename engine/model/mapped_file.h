// A read-only memory-mapped file. Model weights are views into it, so loading a model
// costs no copy and the OS pages weights in on first use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace specula {

class MappedFile {
 public:
  // Maps the whole file read-only. Throws ModelError naming the file when it cannot.
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_ = nullptr;  // (size_) bytes, null for an empty file
  size_t size_ = 0;
};

}  // namespace specula
