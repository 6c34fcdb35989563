#include "core/tensor.h"

#include <fmt/format.h>

namespace ember {

std::string Shape::ToString() const {
  std::string out = "[";
  for (int i = 0; i < rank_; ++i) out += fmt::format("{}{}", i ? ", " : "", dims_[i]);
  return out + "]";
}

TensorView TensorView::Slice0(int64_t i) const {
  EMBER_CHECK(shape.rank() >= 1 && i >= 0 && i < shape[0], "slice {} of {}", i, shape.ToString());
  std::vector<int64_t> inner;
  for (int d = 1; d < shape.rank(); ++d) inner.push_back(shape[d]);
  TensorView view;
  view.dtype = dtype;
  view.shape = Shape(inner);
  const int64_t inner_bytes = DTypeBytes(dtype, view.NumElements());
  view.data = static_cast<const uint8_t*>(data) + i * inner_bytes;
  return view;
}

}  // namespace ember
