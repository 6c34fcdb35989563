// The one pool every KV group allocates from: block ids 1..num_blocks-1 (block 0 is the null
// block, never handed out), reference counts, an LRU free queue and the prefix-cache map
// (hash, group) -> block. A free block may still be cached: it keeps its hash until it is
// allocated again, which is what makes prefix reuse after a request ends possible.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "kv/block_hash.h"
#include "kv/spec.h"

namespace ember::kv {

class BlockPool {
 public:
  explicit BlockPool(int64_t num_blocks);

  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t num_free_blocks() const { return num_free_; }  // including free blocks that are cached

  // Takes `n` blocks from the head of the free queue (least recently released first), evicting
  // their cached hashes; each gets reference count 1. The caller checks num_free_blocks() first.
  std::vector<BlockId> Allocate(int64_t n);
  // One more reference to a block (a prefix-cache hit); a free block leaves the free queue.
  void Touch(BlockId block);
  // Drops one reference; at zero the block goes to the tail of the free queue, still cached.
  void Release(BlockId block);

  int32_t ref_count(BlockId block) const { return blocks_[block].ref_count; }

  // Registers a full block under (hash, group). Returns false (and leaves the block uncached) when
  // another block already holds that key, e.g. two requests computed the same prefix at once.
  bool CacheBlock(BlockId block, const BlockHash& hash, int group);
  std::optional<BlockId> Lookup(const BlockHash& hash, int group) const;
  bool IsCached(BlockId block) const { return blocks_[block].cached; }
  int CachedGroup(BlockId block) const { return blocks_[block].group; }  // -1 when not cached
  int64_t num_cached_blocks() const { return static_cast<int64_t>(cached_.size()); }
  // Forgets every hash; blocks keep their references and free-queue positions.
  void ResetPrefixCache();

  // Free-queue ids head (next to allocate) to tail, for tests.
  std::vector<BlockId> FreeQueue() const;
  // Free queue links, counts and cache map agree with the per-block state.
  Status CheckInvariants() const;

 private:
  struct Block {
    int32_t ref_count = 0;
    bool cached = false;
    int group = -1;  // of the cached hash
    BlockHash hash;
    // Free-queue links; the null block is the list's sentinel (it is never free).
    BlockId prev = kNullBlock;
    BlockId next = kNullBlock;
  };
  struct CacheKey {
    BlockHash hash;
    int group = 0;
    friend bool operator==(const CacheKey&, const CacheKey&) = default;
  };
  struct CacheKeyHasher {
    size_t operator()(const CacheKey& k) const noexcept {
      return static_cast<size_t>(k.hash.lo ^ (static_cast<uint64_t>(k.group) * 0x9e3779b97f4a7c15ULL));
    }
  };

  bool InFreeQueue(BlockId block) const;
  void Unlink(BlockId block);
  void PushBack(BlockId block);
  void Evict(BlockId block);

  std::vector<Block> blocks_;  // blocks_[0] is the null block and the free-queue sentinel
  int64_t num_free_ = 0;
  std::unordered_map<CacheKey, BlockId, CacheKeyHasher> cached_;
};

}  // namespace ember::kv
