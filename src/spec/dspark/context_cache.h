// DSparkContextCache: the drafter's prefix cache, so that a request whose prompt prefix the
// target took from its own prefix cache can still be drafted for.
//
// The drafter's context K/V at a position is a function of the target's tap hidden states there,
// and those are a function of the tokens up to it (ember's forward is batch invariant). So the
// context rows of a full block of the target's prefix cache (block_size tokens) are keyed exactly
// by the target's chained block hash (kv/block_hash.h: the whole prefix and the request's cache
// salt): equal hashes, equal rows. Without this cache a chat request whose system prompt is
// cached gets drafts from a context without it (it starts after a gap: fewer accepted tokens from
// a drafter with full-attention layers, and from one with a window until the gap has left the
// window). Blocks arrive as requests project their rows, which they do when they draft
// (dspark_proposer.h): at a load where speculation is off nothing is stored. vLLM gets the same by
// keeping the drafter's context K/V in the target's paged KV cache; ember's drafter keeps its
// context per request (context_store.h), so the blocks are copied in and out of this store.
//
// Bounded by bytes, least recently used first out. Sized by the caller to hold as many positions
// as the target's KV cache: anything the target can have cached, the drafter can too.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "spec/dspark/context_store.h"

namespace ember::spec::dspark {

class DSparkContextCache {
 public:
  // `kv_width` floats per position per layer (K and V each); `block_size` positions per block:
  // the target's KV block size, so a prefix-cache hit (block aligned) is whole blocks here too.
  DSparkContextCache(int64_t num_layers, int64_t kv_width, int64_t block_size, int64_t capacity_bytes);

  int64_t block_size() const { return block_size_; }
  int64_t bytes_per_block() const { return 2 * num_layers_ * block_size_ * kv_width_ * static_cast<int64_t>(sizeof(float)); }
  int64_t capacity_blocks() const { return capacity_blocks_; }
  int64_t num_blocks() const { return static_cast<int64_t>(lru_.size()); }

  // Stores block j of `context` under hashes[j] for every j in [first_block, hashes.size()) whose
  // positions the context holds; a block already stored only becomes the most recently used.
  // Returns the first block not stored (the caller's next first_block).
  int64_t Store(std::span<const kv::BlockHash> hashes, int64_t first_block, const DSparkContext& context);

  // Fills an empty `context` that must continue at `position` (a multiple of block_size; hashes
  // covers at least position / block_size blocks) with the cached rows it needs there: every
  // block before `position`, or with a window only those that reach into the window before it.
  // True when every needed block was cached: the context then ends at `position`. False leaves
  // the context restarted at `position` (it cannot draft until a windowed drafter's window
  // refills).
  bool Restore(std::span<const kv::BlockHash> hashes, int64_t position, DSparkContext& context);

  int64_t hits() const { return hits_; }      // blocks restored
  int64_t misses() const { return misses_; }  // Restore calls that lacked a block

 private:
  struct Entry {
    kv::BlockHash hash;
    std::vector<float> kv;  // K then V, each [num_layers, block_size, kv_width]: DSparkContext::Append's layout
  };
  using Lru = std::list<Entry>;  // most recently used first

  void Touch(Lru::iterator it) { lru_.splice(lru_.begin(), lru_, it); }

  int64_t num_layers_;
  int64_t kv_width_;
  int64_t block_size_;
  int64_t capacity_blocks_;
  Lru lru_;
  std::unordered_map<kv::BlockHash, Lru::iterator> index_;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

}  // namespace ember::spec::dspark
