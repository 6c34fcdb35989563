// Sliding-window attention: a query at position i reads keys (i - window, i]. A request only
// needs the blocks that still intersect the window of its next query, so older blocks are
// released during decode and chunked prefill (their list entries become kNullBlock), and a cache
// hit of length L only needs the ceil((window - 1) / block_size) blocks before L, found by
// scanning right to left for such a run.
#pragma once

#include "kv/single_type_manager.h"

namespace ember::kv {

class SlidingWindowManager final : public SingleTypeManager {
 public:
  SlidingWindowManager(int64_t window, int group, int64_t block_size, BlockPool& pool);

  std::vector<BlockId> FindLongestHit(std::span<const BlockHash> hashes, int64_t max_blocks) const override;
  int64_t NumSkippedBlocks(int64_t num_computed_tokens) const override;

 private:
  const int64_t window_;
  const int64_t blocks_needed_for_hit_;  // cached blocks a resumed query needs before it
};

}  // namespace ember::kv
