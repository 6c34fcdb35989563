// PlanKvGroups and KvBytesPerSequence on real layer patterns: Gemma 3 270M and Muse Spark Open.
#include "kv/spec.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "model/muse_spark_config.h"

namespace ember::kv {
namespace {

std::vector<LayerKvSpec> MuseSparkLayers(const MuseSparkConfig& c, bool all_full) {
  std::vector<LayerKvSpec> layers;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const bool sliding = !all_full && c.IsSliding(i);
    layers.push_back({sliding ? AttentionKind::kSlidingWindow : AttentionKind::kFull,
                      sliding ? c.sliding_window : 0, c.num_key_value_heads, c.head_dim});
  }
  return layers;
}

TEST(PlanKvGroups, Gemma3_270M) {
  // 18 layers, every 6th full attention, the rest sliding window 512; 1 KV head x 256.
  std::vector<LayerKvSpec> layers;
  for (int i = 0; i < 18; ++i) {
    const bool full = (i + 1) % 6 == 0;
    layers.push_back({full ? AttentionKind::kFull : AttentionKind::kSlidingWindow, full ? 0 : 512, 1, 256});
  }
  auto config = PlanKvGroups(layers, 16, KvDtype::kBF16);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->layers_per_group, 3);
  ASSERT_EQ(config->groups.size(), 6u);  // 3 full layers = 1 group, 15 sliding = 5 groups of 3
  int full = 0;
  for (const KvCacheGroupSpec& g : config->groups) {
    EXPECT_EQ(g.layers.size(), 3u);
    if (g.kind == AttentionKind::kFull) {
      ++full;
      EXPECT_EQ(g.layers, (std::vector<int>{5, 11, 17}));
    } else {
      EXPECT_EQ(g.window, 512);
    }
  }
  EXPECT_EQ(full, 1);
  for (int i = 0; i < 18; ++i) {
    const KvCacheGroupSpec& g = config->groups[config->group_of_layer[i]];
    EXPECT_EQ(g.layers[config->tensor_of_layer[i]], i);
  }
  // 3 tensors x 16 tokens x 2 (K, V) x 256 x 2 bytes.
  EXPECT_EQ(config->BytesPerBlock(), 3 * 16 * 2 * 256 * 2);
}

TEST(PlanKvGroups, MuseSparkOpenHybridSavingAtOneMillionTokens) {
  const MuseSparkConfig model = MuseSparkConfig::MuseSparkOpen();
  const std::vector<LayerKvSpec> hybrid_layers = MuseSparkLayers(model, false);
  int num_full = 0;
  for (const LayerKvSpec& l : hybrid_layers) num_full += l.kind == AttentionKind::kFull;
  ASSERT_EQ(hybrid_layers.size(), 62u);
  ASSERT_EQ(num_full, 16);
  constexpr int64_t kTokens = 1048576;
  for (KvDtype dtype : {KvDtype::kBF16, KvDtype::kFp8E4M3}) {
    auto hybrid = PlanKvGroups(hybrid_layers, 16, dtype);
    auto all_full = PlanKvGroups(MuseSparkLayers(model, true), 16, dtype);
    ASSERT_TRUE(hybrid.ok() && all_full.ok());
    EXPECT_EQ(hybrid->layers_per_group, 16);
    EXPECT_EQ(hybrid->groups.size(), 4u);  // 1 full + 3 sliding (16, 16, 14 layers; the last padded)
    EXPECT_EQ(all_full->groups.size(), 1u);
    const int64_t hybrid_bytes = KvBytesPerSequence(*hybrid, kTokens);
    const int64_t full_bytes = KvBytesPerSequence(*all_full, kTokens);
    const double ratio = static_cast<double>(hybrid_bytes) / static_cast<double>(full_bytes);
    std::printf("Muse Spark Open, %s KV, %lld tokens: hybrid %.3f GiB, all-full %.3f GiB, ratio %.4f\n",
                std::string(KvDtypeName(dtype)).c_str(), static_cast<long long>(kTokens), hybrid_bytes / 1073741824.0,
                full_bytes / 1073741824.0, ratio);
    // 16 of 62 layers keep everything; the sliding ones add ~129 blocks each: slightly over 1/4.
    EXPECT_GT(ratio, 0.25);
    EXPECT_LT(ratio, 0.27);
  }
}

}  // namespace
}  // namespace ember::kv
