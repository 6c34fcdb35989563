#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <new>

namespace ember {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPlainHeap = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kPlainHeap = true;
#else
constexpr bool kPlainHeap = false;
#endif
#else
constexpr bool kPlainHeap = false;
#endif

constexpr size_t kHugePage = size_t{2} << 20;
// Buffers are carved from chunks this large (address space only until written: MAP_NORESERVE,
// and a huge page is committed when its first byte is). A buffer over half of this gets a chunk of
// its own, rounded up to whole huge pages. Space a released buffer leaves in a chunk is not reused:
// the chunk goes back only with its last buffer (weights live as long as their model).
constexpr size_t kChunkBytes = size_t{64} << 20;
constexpr size_t kAlignment = 64;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// One mapping of `bytes` (a multiple of kHugePage) starting on a huge-page boundary; base is null
// when the address space cannot be had.
struct Chunk {
  explicit Chunk(size_t size) : bytes(size) {
    // Over-map by one huge page and trim both ends, so the start is 2 MiB-aligned and every
    // huge page of the chunk can be backed by one.
    const size_t mapped = bytes + kHugePage;
    void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return;
    const auto address = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = RoundUp(address, kHugePage);
    if (aligned > address) munmap(p, aligned - address);
    const size_t tail = mapped - (aligned - address) - bytes;
    if (tail > 0) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
    base = reinterpret_cast<uint8_t*>(aligned);
    // Advice only: where the kernel has no huge page to give (THP off, memory fragmented) the
    // chunk is ordinary pages and everything still works.
    madvise(base, bytes, MADV_HUGEPAGE);
  }
  ~Chunk() {
    if (base != nullptr) munmap(base, bytes);
  }
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;

  uint8_t* base = nullptr;
  size_t bytes = 0;
};

// The chunk new buffers are carved from. Held weakly: once every buffer carved from it is gone
// (a model unloaded) it is unmapped, and the next buffer starts a fresh chunk.
struct Carver {
  std::mutex mutex;
  std::weak_ptr<Chunk> current;
  size_t used = 0;
};

Carver& TheCarver() {
  static Carver carver;
  return carver;
}

}  // namespace

std::shared_ptr<uint8_t> AllocateOnHugePages(size_t bytes) {
  const size_t size = RoundUp(bytes == 0 ? 1 : bytes, kAlignment);
  if constexpr (kPlainHeap) {
    auto* p = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, size));
    if (p == nullptr) throw std::bad_alloc();
    return std::shared_ptr<uint8_t>(p, [](uint8_t* q) { std::free(q); });
  }
  if (size > kChunkBytes / 2) {
    // Large enough to deserve a mapping of its own (carving it would strand most of a chunk).
    auto own = std::make_shared<Chunk>(RoundUp(size, kHugePage));
    if (own->base == nullptr) throw std::bad_alloc();
    return std::shared_ptr<uint8_t>(own, own->base);
  }
  Carver& carver = TheCarver();
  std::lock_guard lock(carver.mutex);
  std::shared_ptr<Chunk> chunk = carver.current.lock();
  if (chunk == nullptr || carver.used + size > chunk->bytes) {
    chunk = std::make_shared<Chunk>(kChunkBytes);
    if (chunk->base == nullptr) throw std::bad_alloc();
    carver.current = chunk;
    carver.used = 0;
  }
  uint8_t* p = chunk->base + carver.used;
  carver.used += size;
  return std::shared_ptr<uint8_t>(chunk, p);
}

std::string ParseTransparentHugePageMode(std::string_view enabled_text) {
  const size_t open = enabled_text.find('[');
  const size_t close = enabled_text.find(']', open);
  if (open == std::string_view::npos || close == std::string_view::npos) return "";
  const std::string_view mode = enabled_text.substr(open + 1, close - open - 1);
  if (mode != "always" && mode != "madvise" && mode != "never") return "";
  return std::string(mode);
}

std::string TransparentHugePageMode(const char* enabled_file) {
  std::ifstream in(enabled_file);
  if (!in) return "";
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParseTransparentHugePageMode(text);
}

}  // namespace ember
