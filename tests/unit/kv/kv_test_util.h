// Small KV configurations shared by the kv tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kv/spec.h"

namespace ember::kv::testing {

// `num_full` full-attention layers and `num_sliding` sliding ones (window `window`), interleaved
// like Gemma 3 (the full ones last of each run), 1 KV head x 8, bf16.
inline KvCacheConfig MakeConfig(int num_full, int num_sliding, int64_t window, int64_t block_size, int64_t num_blocks) {
  std::vector<LayerKvSpec> layers;
  for (int i = 0; i < num_sliding; ++i) layers.push_back({AttentionKind::kSlidingWindow, window, 1, 8});
  for (int i = 0; i < num_full; ++i) layers.push_back({AttentionKind::kFull, 0, 1, 8});
  auto config = PlanKvGroups(layers, block_size, KvDtype::kBF16);
  EXPECT_TRUE(config.ok());
  KvCacheConfig c = std::move(config).value();
  c.num_blocks = num_blocks;
  return c;
}

inline std::vector<int32_t> Iota(int64_t n, int32_t start) {
  std::vector<int32_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<int32_t>(i);
  return v;
}

}  // namespace ember::kv::testing
