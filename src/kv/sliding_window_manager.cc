#include "kv/sliding_window_manager.h"

#include <algorithm>

#include "core/check.h"

namespace ember::kv {

SlidingWindowManager::SlidingWindowManager(int64_t window, int group, int64_t block_size, BlockPool& pool)
    : SingleTypeManager(group, block_size, pool),
      window_(window),
      // The query at L reads keys L - window + 1 .. L - 1 from the cache; with L block-aligned,
      // those lie in the last ceil((window - 1) / block_size) blocks before L.
      blocks_needed_for_hit_((window - 1 + block_size - 1) / block_size) {
  EMBER_CHECK(window > 0, "sliding window {}", window);
}

std::vector<BlockId> SlidingWindowManager::FindLongestHit(std::span<const BlockHash> hashes,
                                                          int64_t max_blocks) const {
  const int64_t limit = std::min<int64_t>(max_blocks, static_cast<int64_t>(hashes.size()));
  std::vector<BlockId> hit(limit, kNullBlock);
  if (blocks_needed_for_hit_ == 0) return hit;  // window 1: a query reads only its own key
  // Right to left: the first run of blocks_needed_for_hit_ cached blocks ends the longest hit. A
  // shorter run that reaches block 0 is a hit too, since nothing precedes it.
  int64_t run = 0;
  for (int64_t j = limit - 1; j >= 0; --j) {
    const auto block = pool_.Lookup(hashes[j], group_);
    if (!block) {
      run = 0;
      continue;
    }
    hit[j] = *block;
    if (++run == blocks_needed_for_hit_) {
      hit.resize(j + run);  // entries right of the run belonged to shorter, broken runs
      return hit;
    }
  }
  hit.resize(run);
  return hit;
}

int64_t SlidingWindowManager::NumSkippedBlocks(int64_t num_computed_tokens) const {
  return SlidingWindowSkippedBlocks(window_, block_size_, num_computed_tokens);
}

}  // namespace ember::kv
