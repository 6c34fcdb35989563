// Tensors as the model layer passes them: non-owning, row-major views of an n-dimensional array
// of one dtype on one device. TensorView is read-only (weights: mmapped checkpoint files or owned
// buffers); Tensor is writable (activations, taken from a step's Workspace, core/workspace.h).
// Only kHost memory exists today; the device field is real so that a second backend's tensors
// are told apart, and a host kernel given a device tensor fails a check instead of reading it.
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

enum class Device : uint8_t {
  kHost,  // CPU memory: every tensor today
  kCuda,  // a CUDA device's memory (the GPU backend, when one is built)
};

const char* DeviceName(Device device);

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
  // The shape without its first dimension ([E, N, K] -> [N, K]); rank must be >= 1.
  Shape Inner() const {
    Shape inner;
    for (int i = 1; i < rank_; ++i) inner.dims_[inner.rank_++] = dims_[i];
    return inner;
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
  Device device = Device::kHost;

  int64_t NumElements() const { return shape.NumElements(); }
  int64_t NumBytes() const { return DTypeBytes(dtype, NumElements()); }
  template <typename T>
  const T* As() const { return static_cast<const T*>(data); }
  // The view of index `i` along the first dimension (e.g. one expert of [E, N, K]).
  TensorView Slice0(int64_t i) const;
};

struct Tensor {
  DType dtype = DType::kF32;
  Shape shape;
  void* data = nullptr;
  Device device = Device::kHost;

  int64_t NumElements() const { return shape.NumElements(); }
  int64_t NumBytes() const { return DTypeBytes(dtype, NumElements()); }
  // The data as T*, checked: a host kernel must never get another device's memory or the
  // wrong element type.
  template <typename T>
  T* HostAs(DType expected) const {
    EMBER_CHECK(device == Device::kHost, "tensor on {} used as host memory", DeviceName(device));
    EMBER_CHECK(dtype == expected, "tensor of {} used as {}", DTypeName(dtype), DTypeName(expected));
    return static_cast<T*>(data);
  }
  TensorView View() const { return {dtype, shape, data, device}; }
};

}  // namespace ember
