// The block allocator of a draft model's own paged KV cache (spec/draft_model_proposer.h).
//
// Much simpler than the engine's kv::KvCacheManager on purpose: no prefix cache, no reference
// counts, and sliding-window groups keep every block of a request like full groups do. A drafter
// holds a few short-lived requests whose lengths the proposer bounds, so the blocks a window
// could release are not worth the bookkeeping; the pool is what bounds memory, and a request that
// cannot get blocks simply gets no draft.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/spec.h"

namespace ember::spec {

// One request's blocks: per KV group, the block for positions [j*block_size, (j+1)*block_size)
// at entry j. Every group has the same number of entries.
using DraftBlockTables = std::vector<std::vector<kv::BlockId>>;

class DraftKvBlocks {
 public:
  // Blocks 1..num_blocks-1 start free (block 0 is the null block, kv/spec.h).
  DraftKvBlocks(int64_t num_blocks, int64_t num_groups, int64_t block_size);

  // Grows `tables` so that every group covers `num_tokens` positions. All or nothing: false (and
  // `tables` unchanged) when the free list cannot cover every group.
  bool Grow(DraftBlockTables& tables, int64_t num_tokens);
  // Returns every block of `tables` to the free list and empties it.
  void Free(DraftBlockTables& tables);

  int64_t num_free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_groups() const { return num_groups_; }
  int64_t block_size() const { return block_size_; }

 private:
  int64_t num_groups_;
  int64_t block_size_;
  // A block id belongs to one group at a time (layer i of every group shares physical tensor i),
  // so one free list serves all groups.
  std::vector<kv::BlockId> free_;
};

}  // namespace ember::spec
