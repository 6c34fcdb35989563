// BlockPool: LRU free queue, reference counts, the null block, cache map and eviction.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace ember::kv {
namespace {

BlockHash H(uint64_t x) { return BlockHash{x, ~x}; }

TEST(BlockPool, NullBlockIsNeverHandedOut) {
  BlockPool pool(5);
  EXPECT_EQ(pool.num_free_blocks(), 4);
  EXPECT_EQ(pool.FreeQueue(), (std::vector<BlockId>{1, 2, 3, 4}));
  const std::vector<BlockId> all = pool.Allocate(4);
  EXPECT_EQ(std::count(all.begin(), all.end(), kNullBlock), 0);
  EXPECT_EQ(pool.num_free_blocks(), 0);
  for (BlockId b : all) pool.Release(b);
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

TEST(BlockPool, ReleasedBlocksGoToTheTailAllocationTakesTheHead) {
  BlockPool pool(6);
  const std::vector<BlockId> a = pool.Allocate(2);
  EXPECT_EQ(a, (std::vector<BlockId>{1, 2}));
  pool.Release(2);
  pool.Release(1);
  EXPECT_EQ(pool.FreeQueue(), (std::vector<BlockId>{3, 4, 5, 2, 1}));
  EXPECT_EQ(pool.Allocate(4), (std::vector<BlockId>{3, 4, 5, 2}));
  EXPECT_EQ(pool.FreeQueue(), (std::vector<BlockId>{1}));
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

TEST(BlockPool, RefCountsKeepSharedBlocksOutOfTheFreeQueue) {
  BlockPool pool(4);
  const BlockId b = pool.Allocate(1)[0];
  pool.Touch(b);  // a second request shares it
  EXPECT_EQ(pool.ref_count(b), 2);
  pool.Release(b);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  pool.Release(b);
  EXPECT_EQ(pool.num_free_blocks(), 3);
  EXPECT_EQ(pool.FreeQueue().back(), b);
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

TEST(BlockPool, CachedFreeBlockIsReusedByTouchAndEvictedByAllocate) {
  BlockPool pool(4);
  const std::vector<BlockId> a = pool.Allocate(2);
  EXPECT_TRUE(pool.CacheBlock(a[0], H(1), 0));
  EXPECT_TRUE(pool.CacheBlock(a[1], H(2), 0));
  pool.Release(a[1]);
  pool.Release(a[0]);
  EXPECT_EQ(pool.FreeQueue(), (std::vector<BlockId>{3, a[1], a[0]}));
  // The same hash in another group is a different key.
  EXPECT_FALSE(pool.Lookup(H(1), 1).has_value());
  // A prefix hit on a free cached block takes it out of the free queue.
  ASSERT_EQ(pool.Lookup(H(1), 0), a[0]);
  pool.Touch(a[0]);
  EXPECT_EQ(pool.FreeQueue(), (std::vector<BlockId>{3, a[1]}));
  EXPECT_TRUE(pool.CheckInvariants().ok());
  // Allocating the free cached block evicts its hash; the referenced one stays cached.
  EXPECT_EQ(pool.Allocate(2), (std::vector<BlockId>{3, a[1]}));
  EXPECT_FALSE(pool.Lookup(H(2), 0).has_value());
  EXPECT_EQ(pool.Lookup(H(1), 0), a[0]);
  EXPECT_EQ(pool.num_cached_blocks(), 1);
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

TEST(BlockPool, DuplicateKeyLeavesTheSecondBlockUncached) {
  BlockPool pool(4);
  const std::vector<BlockId> a = pool.Allocate(2);
  EXPECT_TRUE(pool.CacheBlock(a[0], H(7), 0));
  EXPECT_FALSE(pool.CacheBlock(a[1], H(7), 0));
  EXPECT_FALSE(pool.IsCached(a[1]));
  EXPECT_TRUE(pool.CacheBlock(a[1], H(7), 1));  // another group
  EXPECT_TRUE(pool.CheckInvariants().ok());
  pool.ResetPrefixCache();
  EXPECT_EQ(pool.num_cached_blocks(), 0);
  EXPECT_FALSE(pool.Lookup(H(7), 0).has_value());
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

}  // namespace
}  // namespace ember::kv
