#include "core/huge_pages.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <new>

#include "core/zeroed_array.h"

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

// Buffers are carved from chunks this large (address space only until written: MAP_NORESERVE,
// and a huge page is committed when its first byte is). A buffer over half of this gets a chunk of
// its own, rounded up to whole huge pages. Space a released buffer leaves in a chunk is not reused:
// the chunk goes back only with its last buffer (weights live as long as their model).
constexpr size_t kChunkBytes = size_t{64} << 20;
constexpr size_t kAlignment = 64;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// A chunk is a ZeroedPages of whole huge pages: it starts on a huge-page boundary and is advised
// MADV_HUGEPAGE, so every huge page of it can be backed by one (advice only: where the kernel has
// none to give, THP off or memory fragmented, it is ordinary pages and everything still works).
using Chunk = ZeroedPages;

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
    auto own = std::make_shared<Chunk>(RoundUp(size, kHugePageBytes));
    return std::shared_ptr<uint8_t>(own, static_cast<uint8_t*>(own->data()));
  }
  Carver& carver = TheCarver();
  std::lock_guard lock(carver.mutex);
  std::shared_ptr<Chunk> chunk = carver.current.lock();
  if (chunk == nullptr || carver.used + size > chunk->bytes()) {
    chunk = std::make_shared<Chunk>(kChunkBytes);
    carver.current = chunk;
    carver.used = 0;
  }
  uint8_t* p = static_cast<uint8_t*>(chunk->data()) + carver.used;
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
