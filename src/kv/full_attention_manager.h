// Full attention: every query reads every earlier key, so a request keeps all its blocks and a
// cache hit is the longest run of cached blocks from the start (scanned left to right).
#pragma once

#include "kv/single_type_manager.h"

namespace ember::kv {

class FullAttentionManager final : public SingleTypeManager {
 public:
  using SingleTypeManager::SingleTypeManager;

  std::vector<BlockId> FindLongestHit(std::span<const BlockHash> hashes, int64_t max_blocks) const override;
  int64_t NumSkippedBlocks(int64_t num_computed_tokens) const override { return 0; }
};

}  // namespace ember::kv
