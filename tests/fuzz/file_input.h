// The fuzz input as a file path, for parsers that open files (GGUF, safetensors): one in-memory
// file (memfd) per process, rewritten for each input, reached through /proc/self/fd.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace ember::fuzz {

inline std::string AsFile(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("ember-fuzz-input", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0 || (size > 0 && pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))) {
    std::abort();  // the harness itself failed, not the parser
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

// The parsers promise that every byte range they hand out lies inside the file.
inline void CheckInside(const uint8_t* begin, int64_t bytes, const uint8_t* file, int64_t file_size) {
  if (bytes < 0 || (bytes > 0 && (begin < file || begin + bytes > file + file_size))) __builtin_trap();
}

}  // namespace ember::fuzz
