#include "kv/full_attention_manager.h"

#include <algorithm>

namespace ember::kv {

std::vector<BlockId> FullAttentionManager::FindLongestHit(std::span<const BlockHash> hashes,
                                                          int64_t max_blocks) const {
  std::vector<BlockId> hit;
  const int64_t limit = std::min<int64_t>(max_blocks, static_cast<int64_t>(hashes.size()));
  for (int64_t j = 0; j < limit; ++j) {
    // The chain makes a later block's hash depend on every earlier one: the first miss ends the prefix.
    const auto block = pool_.Lookup(hashes[j], group_);
    if (!block) break;
    hit.push_back(*block);
  }
  return hit;
}

}  // namespace ember::kv
