#include "formats/mapped_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cerrno>
#include <cstring>
#include <utility>

namespace ember {

Expected<MappedFile> MappedFile::Open(const std::string& path, std::string_view what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound(fmt::format("{}: no such file", what));
    return IoError(fmt::format("{}: cannot open: {}", what, std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return IoError(fmt::format("{}: cannot stat: {}", what, std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError(fmt::format("{}: not a regular file", what));
  }
  MappedFile file;
  file.size_ = static_cast<int64_t>(st.st_size);
  if (file.size_ == 0) {
    // mmap refuses length 0; an empty mapping is still a valid (if useless) answer.
    ::close(fd);
    return file;
  }
  void* mapping = ::mmap(nullptr, static_cast<size_t>(file.size_), PROT_READ, MAP_PRIVATE, fd, 0);
  const int mmap_errno = errno;
  // The mapping keeps the file alive; the descriptor is no longer needed either way.
  ::close(fd);
  if (mapping == MAP_FAILED) {
    return IoError(fmt::format("{}: mmap of {} bytes failed: {}", what, file.size_,
                               std::strerror(mmap_errno)));
  }
  file.data_ = static_cast<const uint8_t*>(mapping);
#ifdef MADV_DONTDUMP
  // Weights can be hundreds of GB; a crash dump should not try to write them out again.
  ::madvise(mapping, static_cast<size_t>(file.size_), MADV_DONTDUMP);
#endif
  return file;
}

MappedFile::~MappedFile() { Reset(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::Reset() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  data_ = nullptr;
  size_ = 0;
}

void MappedFile::WillNeed(int64_t begin, int64_t length) const {
  if (data_ == nullptr || begin < 0 || length <= 0 || begin >= size_) return;
  // madvise wants a page-aligned start; round down (the extra bytes are ours too).
  const int64_t page = ::sysconf(_SC_PAGESIZE) > 0 ? ::sysconf(_SC_PAGESIZE) : 4096;
  const int64_t start = begin - begin % page;
  const int64_t end = std::min(size_, begin + std::min(length, size_ - begin));
  ::madvise(const_cast<uint8_t*>(data_ + start), static_cast<size_t>(end - start), MADV_WILLNEED);
}

void MappedFile::DropResidentPages(const uint8_t* data, int64_t size) {
  if (data == nullptr || size <= 0) return;
  const int64_t page = ::sysconf(_SC_PAGESIZE) > 0 ? ::sysconf(_SC_PAGESIZE) : 4096;
  const auto address = reinterpret_cast<uintptr_t>(data);
  const uintptr_t start = address - address % static_cast<uintptr_t>(page);
  ::madvise(reinterpret_cast<void*>(start), static_cast<size_t>(address + size - start), MADV_DONTNEED);
}

}  // namespace ember
