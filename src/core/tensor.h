// TensorView: a non-owning, row-major view of an n-dimensional array of one dtype.
// Weights live in mmapped checkpoint files or in owned buffers; views point into them.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtypes.h"

namespace ember {

inline constexpr int kMaxTensorRank = 6;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) {
    EMBER_CHECK(dims.size() <= kMaxTensorRank, "rank {} > {}", dims.size(), kMaxTensorRank);
    for (int64_t d : dims) dims_[rank_++] = d;
  }
  explicit Shape(const std::vector<int64_t>& dims) {
    EMBER_CHECK(dims.size() <= kMaxTensorRank, "rank {} > {}", dims.size(), kMaxTensorRank);
    for (int64_t d : dims) dims_[rank_++] = d;
  }

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t NumElements() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  bool operator==(const Shape& other) const {
    if (rank_ != other.rank_) return false;
    for (int i = 0; i < rank_; ++i) if (dims_[i] != other.dims_[i]) return false;
    return true;
  }
  // "[4, 8, 16]"
  std::string ToString() const;

 private:
  std::array<int64_t, kMaxTensorRank> dims_{};
  int rank_ = 0;
};

struct TensorView {
  DType dtype = DType::kF32;
  Shape shape;
  const void* data = nullptr;

  int64_t NumElements() const { return shape.NumElements(); }
  int64_t NumBytes() const { return DTypeBytes(dtype, NumElements()); }
  template <typename T>
  const T* As() const { return static_cast<const T*>(data); }
  // The view of index `i` along the first dimension (e.g. one expert of [E, N, K]).
  TensorView Slice0(int64_t i) const;
};

}  // namespace ember
