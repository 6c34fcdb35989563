#include "kv/single_type_manager.h"

#include <algorithm>

#include "core/check.h"
#include "kv/full_attention_manager.h"
#include "kv/sliding_window_manager.h"

namespace ember::kv {

GroupAllocationPlan SingleTypeManager::Plan(const std::vector<BlockId>& blocks, bool blocks_are_hit,
                                            int64_t num_computed_tokens, int64_t num_tokens) const {
  GroupAllocationPlan plan;
  const int64_t held = static_cast<int64_t>(blocks.size());
  plan.num_skipped = NumSkippedBlocks(num_computed_tokens);
  for (int64_t j = 0; j < held; ++j) {
    const BlockId b = blocks[j];
    if (b == kNullBlock) continue;
    if (j < plan.num_skipped) {
      // A hit block the window does not need is simply not taken; a held one is released.
      if (!blocks_are_hit && pool_.ref_count(b) == 1) ++plan.num_released_free;
    } else if (blocks_are_hit && pool_.ref_count(b) == 0) {
      ++plan.num_touched_free;
    }
  }
  // Skipped positions the list does not reach yet are padded with kNullBlock, never allocated.
  plan.num_new = std::max<int64_t>(0, NumBlocks(num_tokens) - std::max(held, plan.num_skipped));
  return plan;
}

void SingleTypeManager::SettleHeldBlocks(const GroupAllocationPlan& plan, bool blocks_are_hit,
                                         std::vector<BlockId>& blocks) const {
  for (int64_t j = 0; j < static_cast<int64_t>(blocks.size()); ++j) {
    BlockId& b = blocks[j];
    if (b == kNullBlock) continue;
    if (j < plan.num_skipped) {
      if (!blocks_are_hit) pool_.Release(b);
      b = kNullBlock;
    } else if (blocks_are_hit) {
      pool_.Touch(b);
    }
  }
  if (static_cast<int64_t>(blocks.size()) < plan.num_skipped) blocks.resize(plan.num_skipped, kNullBlock);
}

void SingleTypeManager::AppendNewBlocks(const GroupAllocationPlan& plan, std::vector<BlockId>& blocks) const {
  const std::vector<BlockId> fresh = pool_.Allocate(plan.num_new);
  blocks.insert(blocks.end(), fresh.begin(), fresh.end());
}

void SingleTypeManager::CacheFullBlocks(const std::vector<BlockId>& blocks, std::span<const BlockHash> hashes,
                                        int64_t num_full_blocks, int64_t* num_cached) const {
  const int64_t end = std::min<int64_t>(num_full_blocks, static_cast<int64_t>(blocks.size()));
  EMBER_CHECK(end <= static_cast<int64_t>(hashes.size()), "caching {} blocks with {} hashes", end, hashes.size());
  for (int64_t j = *num_cached; j < end; ++j) {
    const BlockId b = blocks[j];
    // Null entries were released before anyone cached them; cached ones came from a prefix hit.
    if (b == kNullBlock || pool_.IsCached(b)) continue;
    pool_.CacheBlock(b, hashes[j], group_);
  }
  *num_cached = std::max(*num_cached, end);
}

std::unique_ptr<SingleTypeManager> MakeSingleTypeManager(const KvCacheGroupSpec& spec, int group, int64_t block_size,
                                                         BlockPool& pool) {
  switch (spec.kind) {
    case AttentionKind::kFull: return std::make_unique<FullAttentionManager>(group, block_size, pool);
    case AttentionKind::kSlidingWindow:
      return std::make_unique<SlidingWindowManager>(spec.window, group, block_size, pool);
  }
  EMBER_CHECK(false, "unknown attention kind {}", static_cast<int>(spec.kind));
  return nullptr;
}

}  // namespace ember::kv
