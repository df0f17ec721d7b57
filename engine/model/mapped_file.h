// A read-only memory-mapped file. Model weights are views into it, so loading a model
// costs no copy and the OS pages weights in on first use. FilePrefix reads the start of a
// file instead, for readers that want its header and nothing else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

// The first bytes of a regular file, read on demand (never mapped), and the file's size.
class FilePrefix {
 public:
  // Opens `path` (a FIFO or device is refused before it could block). Throws ModelError
  // naming the file, with the messages of MappedFile::open.
  explicit FilePrefix(const std::string& path);
  ~FilePrefix();
  FilePrefix(const FilePrefix&) = delete;
  FilePrefix& operator=(const FilePrefix&) = delete;

  uint64_t file_size() const { return file_size_; }
  // Makes the first min(n, file_size()) bytes available and returns them; the pointer is
  // valid until the next call. Throws ModelError when the read fails.
  const uint8_t* read(size_t n);
  size_t available() const { return bytes_.size(); }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  std::vector<uint8_t> bytes_;  // (available) the start of the file
};

}  // namespace specula
