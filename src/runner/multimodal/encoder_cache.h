// Encoder outputs kept by content hash (vLLM's encoder cache, keyed by mm_hash): a repeated image
// or clip is encoded once, and a long item whose placeholders a chunked prefill splits over
// several steps is encoded once for all of them. Least recently used entries go first when the
// byte budget is exceeded; an entry a step is still reading stays alive through its shared_ptr.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/lru_cache.h"
#include "kv/block_hash.h"

namespace ember {

struct EncoderCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t evictions = 0;
  int64_t bytes = 0;    // held now
  int64_t entries = 0;  // held now
};

class EncoderCache {
 public:
  using Features = std::shared_ptr<const std::vector<float>>;

  // capacity_bytes 0 disables the cache (every lookup misses, nothing is kept).
  explicit EncoderCache(int64_t capacity_bytes) : lru_(capacity_bytes) {}

  // The cached features of `hash` (counted as a hit, and made most recent), or null (a miss).
  Features Find(const kv::BlockHash& hash);
  // Keeps `features` under `hash`, evicting least recently used entries to fit; an entry larger
  // than the whole budget is not kept.
  void Insert(const kv::BlockHash& hash, Features features);

  const EncoderCacheStats& stats() const { return stats_; }
  int64_t capacity_bytes() const { return lru_.capacity(); }

 private:
  LruCache<kv::BlockHash, Features> lru_;  // cost: bytes of features
  EncoderCacheStats stats_;
};

}  // namespace ember
