// Combines the per-group managers over one block pool (vLLM's KVCacheCoordinator): the hybrid
// prefix-cache hit, all-or-nothing allocation across groups, and each request's block lists.
// KvCacheManager adds hashing, statistics and the prefix-caching switch on top.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "kv/block_hash.h"
#include "kv/block_pool.h"
#include "kv/kv_cache_manager.h"
#include "kv/single_type_manager.h"
#include "kv/spec.h"

namespace ember::kv {

class KvCacheCoordinator {
 public:
  explicit KvCacheCoordinator(const KvCacheConfig& config);

  int num_groups() const { return static_cast<int>(managers_.size()); }
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }

  // The longest prefix of at most `max_blocks` blocks of `hashes` every group can resume from.
  // Full-attention groups go first; each group's hit can only shorten the length, so the groups
  // are asked again until all agree (a sliding group's hit depends on where the prefix ends).
  CacheHit FindLongestHit(std::span<const BlockHash> hashes, int64_t max_blocks) const;

  std::optional<KvBlocks> AllocateSlots(uint64_t request, int64_t num_computed_tokens, int64_t num_tokens,
                                        const CacheHit* hit);
  // Caches the request's blocks [.., num_full_blocks) in every group; `hashes` covers them.
  void CacheFullBlocks(uint64_t request, std::span<const BlockHash> hashes, int64_t num_full_blocks);
  void Free(uint64_t request);
  // Gives back the request's blocks past the first NumBlocks(num_tokens) of each group, last
  // first. Returns the new list lengths per group, or empty when nothing changed.
  std::vector<int32_t> TrimTo(uint64_t request, int64_t num_tokens);

  const KvBlocks& Blocks(uint64_t request) const;
  Status CheckInvariants() const;

 private:
  struct RequestBlocks {
    KvBlocks blocks;
    std::vector<int64_t> num_cached;  // per group: leading entries already cached (or null)
  };

  BlockPool pool_;
  int64_t block_size_;
  std::vector<std::unique_ptr<SingleTypeManager>> managers_;  // indexed by group
  std::vector<int> hit_order_;  // full-attention groups first
  std::unordered_map<uint64_t, RequestBlocks> requests_;
};

}  // namespace ember::kv
