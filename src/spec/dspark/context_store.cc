#include "spec/dspark/context_store.h"

#include <algorithm>

#include "core/check.h"

namespace ember::spec::dspark {

DSparkContext::DSparkContext(int64_t num_layers, int64_t kv_width, int64_t window)
    : num_layers_(num_layers), kv_width_(kv_width), window_(window), k_(num_layers), v_(num_layers) {
  EMBER_CHECK(num_layers > 0 && kv_width > 0 && (window == -1 || window > 0));
}

int64_t DSparkContext::bytes() const {
  int64_t floats = 0;
  for (int64_t l = 0; l < num_layers_; ++l) floats += static_cast<int64_t>(k_[l].size() + v_[l].size());
  return floats * static_cast<int64_t>(sizeof(float));
}

void DSparkContext::TruncateTo(int64_t position) {
  EMBER_CHECK(position >= 0);
  if (position >= end_) return;
  if (position < begin_) return RestartAt(position);
  const size_t keep = static_cast<size_t>((position - begin_) * kv_width_);
  for (int64_t l = 0; l < num_layers_; ++l) {
    k_[l].resize(keep);
    v_[l].resize(keep);
  }
  end_ = position;
}

void DSparkContext::RestartAt(int64_t position) {
  EMBER_CHECK(position >= 0);
  for (int64_t l = 0; l < num_layers_; ++l) {
    k_[l].clear();
    v_[l].clear();
  }
  begin_ = end_ = position;
}

void DSparkContext::Append(const float* k, const float* v, int64_t count, int64_t layer_stride) {
  EMBER_CHECK(count >= 0);
  const int64_t floats = count * kv_width_;
  const int64_t stride = layer_stride < 0 ? floats : layer_stride;
  EMBER_CHECK(stride >= floats);
  for (int64_t l = 0; l < num_layers_; ++l) {
    k_[l].insert(k_[l].end(), k + l * stride, k + l * stride + floats);
    v_[l].insert(v_[l].end(), v + l * stride, v + l * stride + floats);
  }
  end_ += count;
  if (window_ > 0 && size() >= max_rows()) TrimFront();
}

void DSparkContext::TrimFront() {
  // Keep the last `window` rows: the most any block query at end() or later can read.
  const int64_t drop = size() - window_;
  if (drop <= 0) return;
  const auto floats = static_cast<std::ptrdiff_t>(drop * kv_width_);
  for (int64_t l = 0; l < num_layers_; ++l) {
    k_[l].erase(k_[l].begin(), k_[l].begin() + floats);
    v_[l].erase(v_[l].begin(), v_[l].begin() + floats);
  }
  begin_ += drop;
}

bool DSparkContext::CanDraftAt(int64_t anchor) const { return end_ == anchor && size() > 0; }

}  // namespace ember::spec::dspark
