#include "model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "model/model.h"

namespace specula {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ModelError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw ModelError(path + ": not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* data = nullptr;
  if (size > 0) {
    data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw ModelError(path + ": cannot map " + std::to_string(size) + " bytes: " + std::strerror(err));
    }
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  return std::shared_ptr<const MappedFile>(
      new MappedFile(path, static_cast<const uint8_t*>(data), size));
}

FilePrefix::FilePrefix(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw ModelError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw ModelError(path + ": not a regular file");
  }
  file_size_ = static_cast<uint64_t>(st.st_size);
}

FilePrefix::~FilePrefix() { ::close(fd_); }

const uint8_t* FilePrefix::read(size_t n) {
  const size_t want = static_cast<size_t>(std::min<uint64_t>(n, file_size_));
  size_t have = bytes_.size();
  if (want > have) {
    bytes_.resize(want);
    while (have < want) {
      const ssize_t got = ::pread(fd_, bytes_.data() + have, want - have, static_cast<off_t>(have));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        const int err = got < 0 ? errno : 0;
        bytes_.resize(have);
        throw ModelError(path_ + ": cannot read: " + (err ? std::strerror(err) : "the file shrank while being read"));
      }
      have += static_cast<size_t>(got);
    }
  }
  return bytes_.data();
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace specula
