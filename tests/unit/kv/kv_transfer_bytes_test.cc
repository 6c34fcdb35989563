// What disaggregation moves per request for Muse Spark Open's KV layout (62 layers, full attention
// on layers 1, 5, ..., 61 and a 2,048-key sliding window on the other 46; 16 KV heads of 64;
// reference/muse_spark.md §2): the layout a producer sends (kv/kv_transfer.h) against what an
// all-full-attention cache of the same model would send. At long context the sliding layers send
// only their window, so the ratio falls to 16/62 = 0.258 (the "about 0.26"). Printed for
// the record; bounded so a change to what moves cannot pass unnoticed.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "kv/kv_transfer.h"
#include "kv/spec.h"

namespace ember {
namespace {

kv::KvCacheConfig MuseSparkOpenKv(bool all_full) {
  std::vector<kv::LayerKvSpec> layers;
  for (int l = 0; l < 62; ++l) {
    const bool full = all_full || l % 4 == 1;
    layers.push_back({full ? kv::AttentionKind::kFull : kv::AttentionKind::kSlidingWindow, full ? 0 : 2048, 16, 64});
  }
  auto config = kv::PlanKvGroups(layers, 16, kv::KvDtype::kBF16);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return *config;
}

TEST(KvTransferBytesTest, MuseSparkOpenMovesAboutAQuarterOfAnAllFullCacheAtLongContext) {
  const kv::KvCacheConfig hybrid = MuseSparkOpenKv(false);
  const kv::KvCacheConfig full = MuseSparkOpenKv(true);
  double ratio_at_1m = 0;
  for (int64_t tokens : {int64_t{2048}, int64_t{8192}, int64_t{131072}, int64_t{1048575}}) {
    const KvTransferLayout moved = KvLayoutFor(hybrid, tokens, 0);
    const KvTransferLayout all = KvLayoutFor(full, tokens, 0);
    const double ratio = static_cast<double>(moved.PayloadBytes()) / static_cast<double>(all.PayloadBytes());
    // One message per request; its pieces when the blocks are consecutive: groups x layers x parts.
    const size_t pieces = moved.groups.size() * moved.layers_per_group * moved.parts().size();
    std::printf("Muse Spark Open, %8lld prompt tokens: %10.1f MiB moved, all-full %10.1f MiB, ratio %.3f, 1 message "
                "of >= %zu pieces\n",
                static_cast<long long>(tokens), moved.PayloadBytes() / 1048576.0, all.PayloadBytes() / 1048576.0,
                ratio, pieces);
    if (tokens <= 2048) EXPECT_GT(ratio, 0.99);  // everything is inside the window
    ratio_at_1m = ratio;
  }
  EXPECT_GT(ratio_at_1m, 16.0 / 62);
  EXPECT_LT(ratio_at_1m, 0.26);
}

}  // namespace
}  // namespace ember
