#include "core/zeroed_array.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace ember {

ZeroedPages::ZeroedPages(size_t bytes) {
  if (bytes == 0) return;
  // A mapping of at least one huge page starts on a huge-page boundary (over-mapped by one and
  // trimmed at both ends), so every whole 2 MiB of it can be backed by a huge page.
  const size_t align = bytes >= kHugePageBytes ? kHugePageBytes : 0;
  const size_t mapped = bytes + align;
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  if (align > 0) {
    const auto address = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (address + align - 1) / align * align;
    if (aligned > address) munmap(p, aligned - address);
    const size_t tail = mapped - (aligned - address) - bytes;
    if (tail > 0) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
    p = reinterpret_cast<void*>(aligned);
  }
  // Transparent huge pages where the kernel allows them: fewer TLB misses over a large pool
  // (advice only; the pages are still committed as they are first written).
  madvise(p, bytes, MADV_HUGEPAGE);
  data_ = p;
  bytes_ = bytes;
}

ZeroedPages::~ZeroedPages() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

ZeroedPages& ZeroedPages::operator=(ZeroedPages&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, bytes_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

}  // namespace ember
