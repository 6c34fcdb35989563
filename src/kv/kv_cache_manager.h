// The scheduler-facing KV cache API: which blocks each request holds in each KV group, prefix
// caching, and the pool's usage. Pure host logic (no KV memory); one instance per engine, used
// from the engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/status.h"
#include "kv/block_hash.h"
#include "kv/spec.h"

namespace ember::kv {

// One block list per KV group. Sliding-window groups hold kNullBlock where they released a block.
struct KvBlocks {
  std::vector<std::vector<BlockId>> per_group;
};

struct KvCacheManagerOptions {
  bool enable_prefix_caching = true;
};

struct PrefixCacheStats {
  int64_t queries = 0;  // prompt tokens looked up
  int64_t hits = 0;     // of which found cached
};

// The longest cached prefix of a request's tokens.
struct CacheHit {
  int64_t num_tokens = 0;  // multiple of block_size, always < the request's token count
  KvBlocks blocks;         // the cached blocks per group (kNullBlock where a sliding group skips)
};

class KvCacheManager {
 public:
  // config.num_blocks (>= 2, see NumBlocksForBudget) and config.groups must be set.
  KvCacheManager(KvCacheConfig config, KvCacheManagerOptions options);
  ~KvCacheManager();
  KvCacheManager(KvCacheManager&&) noexcept;
  KvCacheManager& operator=(KvCacheManager&&) noexcept;

  const KvCacheConfig& config() const;
  int num_groups() const;

  // Prefix-cache lookup for a request that holds no blocks yet. `keys` (the cache salt's hash,
  // multimodal content) separate requests that must not share blocks. Takes no references, so the hit is
  // valid only until the next AllocateSlots/Free/ResetPrefixCache: look up right before
  // allocating. Empty (and not counted in the stats) when prefix caching is off.
  CacheHit FindCachedPrefix(std::span<const int32_t> tokens, const BlockKeys& keys);
  // How many of `tokens` FindCachedPrefix would find cached now, without counting the lookup in
  // the stats (0 when prefix caching is off): a data-parallel front end's routing hint.
  int64_t CachedPrefixTokens(std::span<const int32_t> tokens, const BlockKeys& keys) const;

  // Makes the request able to hold num_computed_tokens + num_new_tokens (+ num_lookahead) token
  // slots in every group. On a request's first call, `hit` (from FindCachedPrefix, or null) is
  // taken over with references. Releases sliding-window blocks that no query from
  // num_computed_tokens on can read (their entries become kNullBlock in Blocks(); the runner's
  // copy may keep the old ids, which sliding attention never reads). Returns the entries appended
  // per group this call (on the first call every entry, hit blocks included; kNullBlock where a
  // sliding group pads), or nullopt when the pool is short (then nothing changed). A later call
  // ignores `hit`.
  std::optional<KvBlocks> AllocateSlots(uint64_t request, int64_t num_computed_tokens, int64_t num_new_tokens,
                                        const CacheHit* hit, int64_t num_lookahead = 0);

  // After a step: registers the request's blocks that are now full (tokens[0 .. num_computed))
  // under their chained hashes so later requests can reuse them.
  // `keys` must be the ones the request was looked up with (its chain keeps the first call's).
  void CacheFullBlocks(uint64_t request, std::span<const int32_t> tokens, int64_t num_computed_tokens,
                       const BlockKeys& keys);

  // Returns every block the request holds (cached ones stay reusable until evicted, LRU); the
  // request's next AllocateSlots is a first call again. A request holding nothing is ignored.
  void Free(uint64_t request);

  // Speculative decoding's rollback: gives back the blocks past those that hold the request's first
  // `num_tokens` slots (the ones only rejected draft tokens used). Returns the new block-list
  // length per group for the runner, or empty when nothing was given back.
  std::vector<int32_t> TrimTo(uint64_t request, int64_t num_tokens);

  // Every block the request holds, per group; the request must hold blocks (checked).
  const KvBlocks& Blocks(uint64_t request) const;
  int64_t num_free_blocks() const;  // including evictable cached blocks
  double usage() const;             // fraction of usable blocks in use by requests
  const PrefixCacheStats& prefix_cache_stats() const;
  // Drops every cached hash (blocks in use keep their data); used by tests and admin endpoints.
  // Blocks that requests hold stay held but are no longer found or re-registered.
  void ResetPrefixCache();

  // Debug check for tests: pool links and counts, reference counts equal to the requests' block
  // lists, one group per block, cache map consistent. Ok, or Internal with the first violation.
  Status CheckInvariants() const;

 private:
  CacheHit Lookup(std::span<const int32_t> tokens, const BlockKeys& keys) const;
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::kv
