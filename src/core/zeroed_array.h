// Zero-filled memory that costs nothing until it is written: anonymous pages the kernel maps in
// one at a time on first touch. A KV pool of several GiB held in a std::vector was zero-filled
// byte by byte before the server could answer /health (a 4 GiB pool took about 4 s); reserved
// this way it takes microseconds, and resident memory grows only as blocks are used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>

namespace ember {

// The transparent huge page size on x86-64.
constexpr size_t kHugePageBytes = size_t{2} << 20;

// Owns `bytes` bytes of zeroed, page-aligned, lazily committed memory (mmap, MAP_NORESERVE),
// advised MADV_HUGEPAGE and starting on a huge-page boundary when it is at least one huge page;
// throws std::bad_alloc when the address space cannot be had.
class ZeroedPages {
 public:
  ZeroedPages() = default;
  explicit ZeroedPages(size_t bytes);
  ~ZeroedPages();
  ZeroedPages(ZeroedPages&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  ZeroedPages& operator=(ZeroedPages&& other) noexcept;
  ZeroedPages(const ZeroedPages&) = delete;
  ZeroedPages& operator=(const ZeroedPages&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// `n` zero-valued Ts in ZeroedPages, for trivial Ts whose all-zero bytes are the value zero.
template <typename T>
class ZeroedArray {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  ZeroedArray() = default;
  explicit ZeroedArray(size_t n) : pages_(n * sizeof(T)), size_(n) {}
  ZeroedArray(ZeroedArray&& other) noexcept
      : pages_(std::move(other.pages_)), size_(std::exchange(other.size_, 0)) {}
  ZeroedArray& operator=(ZeroedArray&& other) noexcept {
    pages_ = std::move(other.pages_);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }

  T* data() { return static_cast<T*>(pages_.data()); }
  const T* data() const { return static_cast<const T*>(pages_.data()); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  std::span<T> span() { return {data(), size_}; }
  std::span<const T> span() const { return {data(), size_}; }

 private:
  ZeroedPages pages_;
  size_t size_ = 0;
};

}  // namespace ember
