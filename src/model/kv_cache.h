// A simple per-sequence KV cache: one growing f32 K and V array per layer, indexed by position.
//
// This is the foundation's cache; the paged, block-based cache of src/kv replaces it in the
// engine. Sliding-window layers still keep every position here, but attention reads only the
// window (kernels/attention.h).
#pragma once

#include <cstdint>
#include <vector>

namespace ember {

class KvCache {
 public:
  KvCache(int64_t num_layers, int64_t kv_width) : kv_width_(kv_width), keys_(num_layers), values_(num_layers) {}

  int64_t num_tokens() const { return num_tokens_; }
  int64_t kv_width() const { return kv_width_; }
  // Makes room for positions [num_tokens, num_tokens + count) in every layer.
  void Reserve(int64_t count);
  // Commits `count` new positions after a forward pass wrote them.
  void Advance(int64_t count) { num_tokens_ += count; }
  float* Keys(int64_t layer) { return keys_[layer].data(); }
  float* Values(int64_t layer) { return values_[layer].data(); }

 private:
  int64_t kv_width_;
  int64_t num_tokens_ = 0;
  std::vector<std::vector<float>> keys_;
  std::vector<std::vector<float>> values_;
};

}  // namespace ember
