// Prefix caching through KvCacheManager: full-only and hybrid hits, the last-token rule, cache
// salt, LRU eviction under pressure, the hybrid hit rule and all-or-nothing allocation.
#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <vector>

#include "kv/block_hash.h"
#include "kv/kv_cache_coordinator.h"
#include "kv_test_util.h"

namespace ember::kv {
namespace {

using testing::Iota;
using testing::MakeConfig;

// Runs a whole prompt as one request: lookup, allocate, compute, cache.
KvBlocks RunPrompt(KvCacheManager& kv, uint64_t id, const std::vector<int32_t>& prompt, uint64_t key = 0) {
  const CacheHit hit = kv.FindCachedPrefix(prompt, key);
  const int64_t n = static_cast<int64_t>(prompt.size());
  EXPECT_TRUE(kv.AllocateSlots(id, hit.num_tokens, n - hit.num_tokens, &hit).has_value());
  kv.CacheFullBlocks(id, prompt, n, key);
  EXPECT_TRUE(kv.CheckInvariants().ok()) << kv.CheckInvariants().message();
  return kv.Blocks(id);
}

class PrefixCacheTest : public ::testing::TestWithParam<bool> {  // hybrid?
 protected:
  KvCacheConfig Config(int64_t num_blocks) const {
    // Hybrid: 2 full + 4 sliding layers (window 40: a resumed query needs ceil(39/16) = 3 blocks).
    return GetParam() ? MakeConfig(2, 4, 40, 16, num_blocks) : MakeConfig(2, 0, 0, 16, num_blocks);
  }
};

TEST_P(PrefixCacheTest, SamePromptTwiceHitsEveryFullBlockButNeverTheLastToken) {
  KvCacheManager kv(Config(64), {});
  for (int64_t n : {100, 96}) {  // 96 = exactly 6 blocks: the hit must stop one block short
    kv.ResetPrefixCache();
    const std::vector<int32_t> prompt = Iota(n, 1000);
    const KvBlocks first = RunPrompt(kv, 1, prompt);
    const CacheHit hit = kv.FindCachedPrefix(prompt, 0);
    const int64_t expect_blocks = (n - 1) / 16;
    EXPECT_EQ(hit.num_tokens, expect_blocks * 16) << n;
    ASSERT_EQ(hit.blocks.per_group.size(), static_cast<size_t>(kv.num_groups()));
    for (int g = 0; g < kv.num_groups(); ++g) {
      const auto& blocks = hit.blocks.per_group[g];
      ASSERT_EQ(static_cast<int64_t>(blocks.size()), expect_blocks);
      const bool sliding = kv.config().groups[g].kind == AttentionKind::kSlidingWindow;
      for (int64_t j = 0; j < expect_blocks; ++j) {
        // A sliding group only takes the 3 blocks before the hit's end.
        if (sliding && j < expect_blocks - 3) {
          EXPECT_EQ(blocks[j], kNullBlock);
        } else {
          EXPECT_EQ(blocks[j], first.per_group[g][j]);
        }
      }
    }
    // The second request shares the hit blocks (2 references) and owns the rest.
    ASSERT_TRUE(kv.AllocateSlots(2, hit.num_tokens, n - hit.num_tokens, &hit).has_value());
    EXPECT_TRUE(kv.CheckInvariants().ok()) << kv.CheckInvariants().message();
    const KvBlocks& second = kv.Blocks(2);
    EXPECT_EQ(second.per_group[0].size(), first.per_group[0].size());
    EXPECT_NE(second.per_group[0].back(), first.per_group[0].back());
    kv.Free(1);
    kv.Free(2);
    EXPECT_EQ(kv.usage(), 0.0);
  }
  EXPECT_EQ(kv.prefix_cache_stats().queries, 2 * (100 + 96) + 0);
  EXPECT_EQ(kv.prefix_cache_stats().hits, 96 + 80);
}

TEST_P(PrefixCacheTest, ExtraKeySeparatesRequests) {
  KvCacheManager kv(Config(64), {});
  const std::vector<int32_t> prompt = Iota(80, 5);
  RunPrompt(kv, 1, prompt, /*key=*/11);
  EXPECT_EQ(kv.FindCachedPrefix(prompt, 12).num_tokens, 0);
  EXPECT_EQ(kv.FindCachedPrefix(prompt, 11).num_tokens, 64);
}

TEST_P(PrefixCacheTest, SharedPrefixDivergesAfterTheCommonBlocks) {
  KvCacheManager kv(Config(64), {});
  std::vector<int32_t> a = Iota(70, 0);
  std::vector<int32_t> b = a;
  b[40] = -1;  // differs inside block 2: blocks 0 and 1 are shared
  RunPrompt(kv, 1, a);
  const CacheHit hit = kv.FindCachedPrefix(b, 0);
  // Full-only: 2 blocks. Hybrid: the sliding groups need 3 blocks before the end, and blocks 0-1
  // reach the start, so 2 blocks are a hit as well.
  EXPECT_EQ(hit.num_tokens, 32);
}

TEST_P(PrefixCacheTest, EvictionUnderPressureTakesTheTailFirst) {
  // Exactly the blocks one 100-token request needs: 7 per group.
  const int64_t per_request = 7 * (GetParam() ? 3 : 1);
  KvCacheManager kv(Config(1 + per_request), {});
  const std::vector<int32_t> prompt = Iota(100, 7);
  RunPrompt(kv, 1, prompt);
  kv.Free(1);
  EXPECT_EQ(kv.num_free_blocks(), per_request);
  EXPECT_EQ(kv.FindCachedPrefix(prompt, 0).num_tokens, 96);
  // Another prompt takes 2 blocks per group: the freed request's tail goes first.
  const std::vector<int32_t> other = Iota(20, 90000);
  RunPrompt(kv, 2, other);
  // Blocks were freed position-major across groups, so every group lost blocks 5 and 6.
  EXPECT_EQ(kv.FindCachedPrefix(prompt, 0).num_tokens, 80);
  EXPECT_TRUE(kv.CheckInvariants().ok());
  kv.Free(2);
  // A pool full of other data evicts everything.
  for (uint64_t id = 10; id < 10 + 7; ++id) RunPrompt(kv, id, Iota(16, 50000 + 100 * static_cast<int32_t>(id)));
  EXPECT_EQ(kv.FindCachedPrefix(prompt, 0).num_tokens, 0);
}

TEST_P(PrefixCacheTest, AllocationCountsFreeHitBlocksAndChangesNothingWhenShort) {
  const int64_t groups = GetParam() ? 3 : 1;
  KvCacheManager kv(Config(1 + 4 * groups), {});
  const std::vector<int32_t> a = Iota(33, 0);  // 3 blocks: 2 full and cached + 1 partial
  RunPrompt(kv, 1, a);
  kv.Free(1);
  std::vector<int32_t> b = Iota(65, 0);  // same first 2 blocks, 5 blocks in all
  const CacheHit hit = kv.FindCachedPrefix(b, 0);
  ASSERT_EQ(hit.num_tokens, 32);
  // 3 new blocks fit in the 4 free ones, but the 2 hit blocks are free too: 5 > 4.
  const int64_t free_before = kv.num_free_blocks();
  EXPECT_FALSE(kv.AllocateSlots(2, 32, 33, &hit).has_value());
  EXPECT_EQ(kv.num_free_blocks(), free_before);
  EXPECT_EQ(kv.FindCachedPrefix(b, 0).num_tokens, 32);
  EXPECT_TRUE(kv.CheckInvariants().ok());
  // 1 new block fits.
  const CacheHit hit2 = kv.FindCachedPrefix(b, 0);
  const auto appended = kv.AllocateSlots(2, 32, 1, &hit2);
  ASSERT_TRUE(appended.has_value());
  EXPECT_EQ(appended->per_group[0].size(), 3u);  // the hit's 2 blocks and a new one
  EXPECT_EQ(kv.num_free_blocks(), (4 - 3) * groups);
  kv.Free(2);
  EXPECT_EQ(kv.usage(), 0.0);
}

TEST_P(PrefixCacheTest, DisabledPrefixCachingNeverHits) {
  KvCacheManager kv(Config(64), {.enable_prefix_caching = false});
  const std::vector<int32_t> prompt = Iota(100, 1);
  RunPrompt(kv, 1, prompt);
  kv.Free(1);
  const CacheHit hit = kv.FindCachedPrefix(prompt, 0);
  EXPECT_EQ(hit.num_tokens, 0);
  EXPECT_EQ(kv.prefix_cache_stats().queries, 0);
}

INSTANTIATE_TEST_SUITE_P(FullAndHybrid, PrefixCacheTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Hybrid" : "FullOnly"; });

// The hybrid rule on hand-placed cache contents: the sliding group's hit must end where the full
// group's prefix can, so the coordinator shortens until both agree.
TEST(KvCacheCoordinator, HybridHitIsTheFullPrefixCutToASlidingRun) {
  KvCacheConfig config = MakeConfig(1, 1, 33, 16, 40);  // window 33: 2 blocks before the end
  KvCacheCoordinator coordinator(config);
  int full = 0, sliding = 1;
  if (config.groups[0].kind != AttentionKind::kFull) std::swap(full, sliding);
  std::vector<BlockHash> hashes;
  ExtendBlockHashes(Iota(8 * 16, 0), 16, 0, hashes);
  BlockPool& pool = coordinator.pool();
  auto cache = [&](int group, int j) {
    const BlockId b = pool.Allocate(1)[0];
    EXPECT_TRUE(pool.CacheBlock(b, hashes[j], group));
    pool.Release(b);
    return b;
  };
  for (int j = 0; j < 8; ++j) cache(full, j);
  std::vector<BlockId> s(8, kNullBlock);
  for (int j : {0, 1, 2, 4, 6}) s[j] = cache(sliding, j);
  CacheHit hit = coordinator.FindLongestHit(hashes, 8);
  EXPECT_EQ(hit.num_tokens, 3 * 16);  // runs of 2: only blocks 1-2 (0-2 reaches the start)
  EXPECT_EQ(hit.blocks.per_group[sliding], (std::vector<BlockId>{kNullBlock, s[1], s[2]}));
  EXPECT_EQ(hit.blocks.per_group[full].size(), 3u);
  s[5] = cache(sliding, 5);
  hit = coordinator.FindLongestHit(hashes, 8);
  EXPECT_EQ(hit.num_tokens, 7 * 16);  // blocks 5-6 end at 7
  EXPECT_EQ(hit.blocks.per_group[sliding],
            (std::vector<BlockId>{kNullBlock, kNullBlock, kNullBlock, kNullBlock, kNullBlock, s[5], s[6]}));
  // The full group bounds it: with max 6 blocks the sliding run must end by block 6.
  hit = coordinator.FindLongestHit(hashes, 6);
  EXPECT_EQ(hit.num_tokens, 6 * 16);  // blocks 4-5
  EXPECT_TRUE(coordinator.CheckInvariants().ok());
}

}  // namespace
}  // namespace ember::kv
