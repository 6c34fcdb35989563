// MappedFile: a whole file mapped read-only into memory, shared by the checkpoint readers.
//
// Weights are never copied out of checkpoint files: tensor views point straight into this mapping,
// so it must outlive every view handed out. The mapping is MAP_PRIVATE and PROT_READ; the file is
// assumed not to change while mapped (truncating it underneath raises SIGBUS on access, as with any
// mmap).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ember {

class MappedFile {
 public:
  // Opens and maps `path`. `what` starts every error message (e.g. "GGUF file 'm.gguf'"), so the
  // caller's format is named. Errors:
  //   NotFound   the file does not exist
  //   IoError    open/stat/mmap failed for another reason, or the path is not a regular file
  // An empty file maps to data() == nullptr, size() == 0; the caller decides whether that is bad.
  static Expected<MappedFile> Open(const std::string& path, std::string_view what);

  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  int64_t size() const { return size_; }

  // Hints that bytes [begin, begin + length) are about to be read (MADV_WILLNEED), clipped to the
  // file. Purely advisory: failures are ignored.
  void WillNeed(int64_t begin, int64_t length) const;

  // Drops the pages of a read-only file mapping [data, data + size) from this process's resident
  // set (MADV_DONTNEED; the page cache keeps them, and the next read maps them again). After a
  // tensor-parallel rank has copied its slices out of a checkpoint, the pages it read for them no
  // longer count against it. Advisory: failures are ignored.
  static void DropResidentPages(const uint8_t* data, int64_t size);

 private:
  void Reset();

  const uint8_t* data_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace ember
