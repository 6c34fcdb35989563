// Sliding-window groups release blocks that leave the window during decode and chunked prefill,
// while full-attention groups keep growing.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv_test_util.h"

namespace ember::kv {
namespace {

using testing::Iota;
using testing::MakeConfig;

int64_t NonNull(const std::vector<BlockId>& blocks) {
  return static_cast<int64_t>(blocks.size()) - std::count(blocks.begin(), blocks.end(), kNullBlock);
}

TEST(SlidingWindow, DecodeHoldsABoundedNumberOfBlocks) {
  constexpr int64_t kWindow = 64, kBlock = 16;
  KvCacheManager kv(MakeConfig(2, 2, kWindow, kBlock, 400), {});  // 1 full + 1 sliding group
  ASSERT_EQ(kv.num_groups(), 2);
  const int full = kv.config().groups[0].kind == AttentionKind::kFull ? 0 : 1;
  const int sliding = 1 - full;
  std::vector<int32_t> tokens = Iota(40, 1);
  ASSERT_TRUE(kv.AllocateSlots(1, 0, 40, nullptr).has_value());
  int64_t computed = 40;
  int64_t max_sliding = 0;
  for (int step = 0; step < 3000; ++step) {
    tokens.push_back(step);
    const auto appended = kv.AllocateSlots(1, computed, 1, nullptr);
    ASSERT_TRUE(appended.has_value()) << step;
    ++computed;
    kv.CacheFullBlocks(1, tokens, computed, 0);
    const KvBlocks& blocks = kv.Blocks(1);
    const int64_t s = NonNull(blocks.per_group[sliding]);
    max_sliding = std::max(max_sliding, s);
    // Keys (computed - 64, computed] span at most ceil(63 / 16) + 1 = 5 blocks.
    ASSERT_LE(s, (kWindow - 1 + kBlock - 1) / kBlock + 1) << step;
    // Both lists are position-aligned; the full one holds every block.
    ASSERT_EQ(blocks.per_group[full].size(), blocks.per_group[sliding].size());
    ASSERT_EQ(NonNull(blocks.per_group[full]), (computed + kBlock - 1) / kBlock);
    // Released entries are at the front, and none this step's query reads was released.
    const int64_t first_needed = std::max<int64_t>(0, (computed - 1) - kWindow + 1) / kBlock;
    for (int64_t j = 0; j < static_cast<int64_t>(blocks.per_group[sliding].size()); ++j) {
      ASSERT_EQ(blocks.per_group[sliding][j] == kNullBlock, j < first_needed) << step << " " << j;
    }
  }
  EXPECT_EQ(max_sliding, 5);
  EXPECT_TRUE(kv.CheckInvariants().ok()) << kv.CheckInvariants().message();
  // 3040 tokens: 190 full blocks; the last query (3039) reads keys 2976..3039, blocks 186..189.
  EXPECT_EQ(NonNull(kv.Blocks(1).per_group[sliding]), 4);
  EXPECT_EQ(kv.num_free_blocks(), 399 - 190 - 4);
  kv.Free(1);
  EXPECT_EQ(kv.usage(), 0.0);
}

TEST(SlidingWindow, ChunkedPrefillHoldsAboutWindowPlusChunk) {
  constexpr int64_t kWindow = 1024, kBlock = 16, kChunk = 512, kPrompt = 20000;
  // Only sliding layers: a long prompt must fit in a pool far smaller than the prompt.
  const int64_t bound = (kWindow + kChunk) / kBlock + 2;
  KvCacheManager kv(MakeConfig(0, 2, kWindow, kBlock, 1 + bound), {});
  const std::vector<int32_t> prompt = Iota(kPrompt, 3);
  for (int64_t done = 0; done < kPrompt; done += kChunk) {
    const int64_t n = std::min(kChunk, kPrompt - done);
    ASSERT_TRUE(kv.AllocateSlots(7, done, n, nullptr).has_value()) << done;
    kv.CacheFullBlocks(7, prompt, done + n, 0);
    ASSERT_LE(NonNull(kv.Blocks(7).per_group[0]), bound);
  }
  EXPECT_EQ(static_cast<int64_t>(kv.Blocks(7).per_group[0].size()), kPrompt / kBlock);
  EXPECT_TRUE(kv.CheckInvariants().ok());
  // The window's blocks are cached: the same prompt resumes near its end without the rest.
  const CacheHit hit = kv.FindCachedPrefix(prompt, 0);
  EXPECT_EQ(hit.num_tokens, kPrompt - kBlock);
  EXPECT_EQ(NonNull(hit.blocks.per_group[0]), (kWindow - 1 + kBlock - 1) / kBlock);
  kv.Free(7);
  EXPECT_EQ(kv.usage(), 0.0);
}

TEST(SlidingWindow, ReleasedBlocksAreAvailableToTheSameCall) {
  // Window 16, block 16: the query at position 32 reads keys 17..32 (blocks 1 and 2), so block 0
  // goes back in the same AllocateSlots that needs a block, which is why 3 usable blocks suffice.
  KvCacheManager kv(MakeConfig(0, 1, 16, 16, 4), {.enable_prefix_caching = false});
  ASSERT_TRUE(kv.AllocateSlots(1, 0, 32, nullptr).has_value());
  EXPECT_EQ(kv.num_free_blocks(), 1);
  const BlockId block1 = kv.Blocks(1).per_group[0][1];
  ASSERT_TRUE(kv.AllocateSlots(2, 0, 16, nullptr).has_value());
  EXPECT_EQ(kv.num_free_blocks(), 0);
  const auto appended = kv.AllocateSlots(1, 32, 1, nullptr);
  ASSERT_TRUE(appended.has_value());
  ASSERT_EQ(appended->per_group[0].size(), 1u);
  EXPECT_EQ(kv.Blocks(1).per_group[0], (std::vector<BlockId>{kNullBlock, block1, appended->per_group[0][0]}));
  // Now nothing is left to release: the next block cannot be had, and nothing changes.
  EXPECT_FALSE(kv.AllocateSlots(1, 33, 16, nullptr).has_value());
  EXPECT_EQ(kv.Blocks(1).per_group[0][1], block1);
  EXPECT_TRUE(kv.CheckInvariants().ok());
}

}  // namespace
}  // namespace ember::kv
