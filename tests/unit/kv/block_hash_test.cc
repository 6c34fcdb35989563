// Chained block hashes: every input part matters, chains extend incrementally, values are stable.
#include "kv/block_hash.h"

#include <gtest/gtest.h>

#include <vector>

namespace ember::kv {
namespace {

TEST(BlockHash, EveryInputPartChangesTheHash) {
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const BlockHash h = HashBlock({}, tokens, 0);
  EXPECT_EQ(h, HashBlock({}, tokens, 0));
  EXPECT_NE(h, HashBlock({}, tokens, 1));               // extra key (cache salt)
  EXPECT_NE(h, HashBlock(BlockHash{1, 0}, tokens, 0));  // parent
  EXPECT_NE(h, HashBlock({}, std::vector<int32_t>{1, 2, 4, 3}, 0));  // token order
}

TEST(BlockHash, StableAcrossBuildsAndProcesses) {
  // Pinned: hashes may be compared across processes (routers, later runs); changing the layout
  // or seed must be deliberate.
  const BlockHash h = HashBlock({}, std::vector<int32_t>{1, 2, 3, 4}, 0);
  EXPECT_EQ(h.lo, 0x26acf4cbbe633f55ULL);
  EXPECT_EQ(h.hi, 0x49555724601bcf40ULL);
}

TEST(BlockHash, ChainsExtendIncrementallyAndDependOnTheWholePrefix) {
  std::vector<int32_t> tokens(50);
  for (int i = 0; i < 50; ++i) tokens[i] = i * 7;
  std::vector<BlockHash> all, grown;
  ExtendBlockHashes(tokens, 8, 3, all);
  EXPECT_EQ(all.size(), 6u);  // full blocks only
  for (size_t n = 0; n <= tokens.size(); n += 5) ExtendBlockHashes(std::span(tokens).first(n), 8, 3, grown);
  EXPECT_EQ(grown, all);
  // A change in block 0 changes every later hash, not only block 0's.
  tokens[0] = -1;
  std::vector<BlockHash> changed;
  ExtendBlockHashes(tokens, 8, 3, changed);
  for (size_t j = 0; j < all.size(); ++j) EXPECT_NE(changed[j], all[j]) << j;
}

TEST(BlockHash, ExtraContentChangesOnlyTheBlocksItOverlapsAndTheirSuccessors) {
  // Positions 10..21 are one image's placeholders: the same ids for any image of that size.
  std::vector<int32_t> tokens(40, 5);
  const std::vector<ExtraContent> image_a = {{10, 22, BlockHash{1, 2}}};
  const std::vector<ExtraContent> image_b = {{10, 22, BlockHash{3, 4}}};
  std::vector<BlockHash> text, a, a_again, b;
  ExtendBlockHashes(tokens, 8, BlockKeys(0), text);
  ExtendBlockHashes(tokens, 8, BlockKeys(0, image_a), a);
  ExtendBlockHashes(tokens, 8, BlockKeys(0, image_a), a_again);
  ExtendBlockHashes(tokens, 8, BlockKeys(0, image_b), b);
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a, a_again);
  EXPECT_EQ(a[0], text[0]);  // block 0 ([0, 8)) holds none of the image
  for (size_t j = 1; j < a.size(); ++j) {
    EXPECT_NE(a[j], text[j]) << j;  // blocks 1 and 2 overlap it; later ones chain from them
    EXPECT_NE(a[j], b[j]) << j;     // another image, same placeholders
  }
  // Where the content starts within the block matters too (the same hash one position later).
  const std::vector<ExtraContent> shifted = {{11, 23, BlockHash{1, 2}}};
  std::vector<BlockHash> moved;
  ExtendBlockHashes(tokens, 8, BlockKeys(0, shifted), moved);
  EXPECT_NE(moved[1], a[1]);
  // Content without tokens in a full block yet changes nothing: a chain grown step by step equals
  // the whole one.
  std::vector<BlockHash> grown;
  for (size_t n = 0; n <= tokens.size(); n += 5) ExtendBlockHashes(std::span(tokens).first(n), 8, BlockKeys(0, image_a), grown);
  EXPECT_EQ(grown, a);
}

}  // namespace
}  // namespace ember::kv
