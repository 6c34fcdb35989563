// Per-group policy of the hybrid KV cache (vLLM's SingleTypeKVCacheManager): how a group finds
// its part of a prefix-cache hit and which of a request's blocks it no longer needs. The
// bookkeeping shared by every kind (growing a request's block list, caching full blocks) lives
// here too. A request's block list for the group is passed in, so one manager serves every
// request. Adding an attention kind = one subclass + one case in MakeSingleTypeManager.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"
#include "kv/spec.h"

namespace ember::kv {

// What AllocateSlots would do to one group of one request, computed without changing anything.
struct GroupAllocationPlan {
  int64_t num_skipped = 0;        // leading list entries that become (or stay) kNullBlock
  int64_t num_new = 0;            // blocks taken from the free queue
  int64_t num_touched_free = 0;   // hit blocks taken out of the free queue
  int64_t num_released_free = 0;  // held blocks whose last reference goes: they rejoin the queue
};

class SingleTypeManager {
 public:
  SingleTypeManager(int group, int64_t block_size, BlockPool& pool)
      : group_(group), block_size_(block_size), pool_(pool) {}
  virtual ~SingleTypeManager() = default;
  SingleTypeManager(const SingleTypeManager&) = delete;
  SingleTypeManager& operator=(const SingleTypeManager&) = delete;

  // The longest cached prefix of at most `max_blocks` blocks of the chain `hashes` that this group
  // can resume from, as the block list a request would hold (kNullBlock where the group needs no
  // block). Its size is the hit length in blocks. Takes no references.
  virtual std::vector<BlockId> FindLongestHit(std::span<const BlockHash> hashes, int64_t max_blocks) const = 0;
  // Leading blocks that no query at a position >= num_computed_tokens reads.
  virtual int64_t NumSkippedBlocks(int64_t num_computed_tokens) const = 0;

  // How `blocks` (the request's list, or a fresh prefix hit when `blocks_are_hit`) must change so
  // the request holds `num_tokens` slots, given that everything before num_computed_tokens is
  // computed.
  GroupAllocationPlan Plan(const std::vector<BlockId>& blocks, bool blocks_are_hit, int64_t num_computed_tokens,
                           int64_t num_tokens) const;
  // Carries out the first half of `plan`: references the hit's blocks (when `blocks_are_hit`) or
  // releases skipped ones, and pads with kNullBlock. Done for every group before any group
  // allocates, so blocks released anywhere are available and free hit blocks cannot be evicted.
  void SettleHeldBlocks(const GroupAllocationPlan& plan, bool blocks_are_hit, std::vector<BlockId>& blocks) const;
  // The second half: appends plan.num_new blocks from the free queue.
  void AppendNewBlocks(const GroupAllocationPlan& plan, std::vector<BlockId>& blocks) const;
  // Registers blocks [*num_cached, num_full_blocks) of `blocks` under their hashes; null entries
  // are skipped. Advances *num_cached.
  void CacheFullBlocks(const std::vector<BlockId>& blocks, std::span<const BlockHash> hashes,
                       int64_t num_full_blocks, int64_t* num_cached) const;

 protected:
  int64_t NumBlocks(int64_t num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

  const int group_;
  const int64_t block_size_;
  BlockPool& pool_;
};

std::unique_ptr<SingleTypeManager> MakeSingleTypeManager(const KvCacheGroupSpec& spec, int group, int64_t block_size,
                                                         BlockPool& pool);

}  // namespace ember::kv
