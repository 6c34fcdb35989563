#include "core/zeroed_array.h"

#include <sys/mman.h>

#include <new>

namespace ember {

ZeroedPages::ZeroedPages(size_t bytes) {
  if (bytes == 0) return;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
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
