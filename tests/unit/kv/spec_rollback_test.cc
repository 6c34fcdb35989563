// Speculative decoding's KV rollback: TrimTo gives back the blocks that only rejected draft
// tokens reached, never a block a verified token uses, never a cached block; sliding-window
// groups release blocks only for positions that were accepted.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv_test_util.h"

namespace ember::kv {
namespace {

using testing::Iota;
using testing::MakeConfig;

TEST(SpecRollback, TrimGivesBackOnlyBlocksPastTheKeptTokens) {
  constexpr int64_t kBlock = 4;
  KvCacheManager kv(MakeConfig(1, 1, 8, kBlock, 64), {});
  // 10 known tokens, computing the last one plus 7 draft tokens: slots for 17 positions.
  std::vector<int32_t> tokens = Iota(10, 1);
  ASSERT_TRUE(kv.AllocateSlots(1, 0, 9, nullptr).has_value());
  kv.CacheFullBlocks(1, tokens, 9, 0);
  ASSERT_TRUE(kv.AllocateSlots(1, 9, 1 + 7, nullptr).has_value());
  const int64_t free_before = kv.num_free_blocks();
  for (const auto& list : kv.Blocks(1).per_group) EXPECT_EQ(list.size(), 5u);  // ceil(17 / 4)
  // Two drafts accepted: 10 + 2 + 1 emitted = 13 tokens, 12 computed. Keep ceil(13 / 4) = 4.
  const std::vector<int32_t> kept = kv.TrimTo(1, 13);
  EXPECT_EQ(kept, (std::vector<int32_t>{4, 4}));
  for (const auto& list : kv.Blocks(1).per_group) EXPECT_EQ(list.size(), 4u);
  EXPECT_EQ(kv.num_free_blocks(), free_before + 2);  // one block per group
  EXPECT_TRUE(kv.TrimTo(1, 13).empty()) << "nothing more to give back";
  EXPECT_TRUE(kv.CheckInvariants().ok()) << kv.CheckInvariants().message();
  kv.Free(1);
  EXPECT_EQ(kv.usage(), 0.0);
}

// A random decode with drafts: each step allocates for the last token plus k drafts, accepts a
// random prefix, caches the verified full blocks and trims. The pool's invariants hold, the lists
// stay exactly as long as the kept tokens need, and a sliding group never released a block that
// a query at an accepted position still reads.
TEST(SpecRollback, RandomVerifyStepsKeepTheCacheConsistent) {
  constexpr int64_t kBlock = 4, kWindow = 10;
  KvCacheManager kv(MakeConfig(1, 2, kWindow, kBlock, 1000), {});
  std::mt19937 rng(3);
  std::vector<int32_t> tokens = Iota(7, 1);
  ASSERT_TRUE(kv.AllocateSlots(1, 0, 6, nullptr).has_value());
  int64_t computed = 6;
  kv.CacheFullBlocks(1, tokens, computed, 0);
  for (int step = 0; step < 400; ++step) {
    const int64_t k = rng() % 8;
    ASSERT_TRUE(kv.AllocateSlots(1, computed, 1 + k, nullptr).has_value()) << step;
    const int64_t slots = computed + 1 + k;
    const int64_t accepted = k == 0 ? 0 : rng() % (k + 1);
    for (int64_t j = 0; j <= accepted; ++j) tokens.push_back(static_cast<int32_t>(rng() % 1000));
    computed += 1 + accepted;  // the last token and the accepted drafts
    ASSERT_EQ(computed + 1, static_cast<int64_t>(tokens.size()));
    kv.CacheFullBlocks(1, tokens, computed, 0);
    kv.TrimTo(1, static_cast<int64_t>(tokens.size()));
    const KvBlocks& blocks = kv.Blocks(1);
    // Slots for every kept token (all accepted: the last one's slot comes with the next step).
    const int64_t want = (std::min<int64_t>(static_cast<int64_t>(tokens.size()), slots) + kBlock - 1) / kBlock;
    for (size_t g = 0; g < blocks.per_group.size(); ++g) {
      ASSERT_EQ(static_cast<int64_t>(blocks.per_group[g].size()), want) << step;
      if (kv.config().groups[g].kind != AttentionKind::kSlidingWindow) continue;
      // The next query is at position `computed`: it reads keys (computed - window, computed].
      const int64_t first_read = std::max<int64_t>(0, computed - kWindow + 1) / kBlock;
      for (int64_t j = first_read; j < want; ++j) ASSERT_NE(blocks.per_group[g][j], kNullBlock) << step << " " << j;
    }
    if (step % 50 == 0) {
      ASSERT_TRUE(kv.CheckInvariants().ok()) << kv.CheckInvariants().message();
    }
  }
  kv.Free(1);
  EXPECT_EQ(kv.usage(), 0.0);
  EXPECT_TRUE(kv.CheckInvariants().ok());
}

}  // namespace
}  // namespace ember::kv
