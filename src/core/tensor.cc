#include "core/tensor.h"

#include <fmt/format.h>

namespace ember {

const char* DeviceName(Device device) {
  switch (device) {
    case Device::kHost: return "host";
    case Device::kCuda: return "cuda";
  }
  return "unknown device";
}

std::string Shape::ToString() const {
  std::string out = "[";
  for (int i = 0; i < rank_; ++i) out += fmt::format("{}{}", i ? ", " : "", dims_[i]);
  return out + "]";
}

TensorView TensorView::Slice0(int64_t i) const {
  EMBER_CHECK(shape.rank() >= 1 && i >= 0 && i < shape[0], "slice {} of {}", i, shape.ToString());
  TensorView view;
  view.dtype = dtype;
  view.device = device;
  view.shape = shape.Inner();
  const int64_t inner_bytes = DTypeBytes(dtype, view.NumElements());
  view.data = static_cast<const uint8_t*>(data) + i * inner_bytes;
  return view;
}

}  // namespace ember
