#include "runner/multimodal/encoder_cache.h"

namespace ember {

EncoderCache::Features EncoderCache::Find(const kv::BlockHash& hash) {
  const auto it = index_.find(hash);
  if (it == index_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->features;
}

void EncoderCache::Insert(const kv::BlockHash& hash, Features features) {
  const int64_t bytes = BytesOf(features);
  if (bytes > capacity_bytes_ || index_.contains(hash)) return;
  while (stats_.bytes + bytes > capacity_bytes_) {
    const Entry& oldest = lru_.back();
    stats_.bytes -= BytesOf(oldest.features);
    index_.erase(oldest.hash);
    lru_.pop_back();
    ++stats_.evictions;
  }
  lru_.push_front({hash, std::move(features)});
  index_[hash] = lru_.begin();
  stats_.bytes += bytes;
  stats_.entries = static_cast<int64_t>(index_.size());
}

}  // namespace ember
