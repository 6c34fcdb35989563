#include "runner/multimodal/encoder_cache.h"

namespace ember {

EncoderCache::Features EncoderCache::Find(const kv::BlockHash& hash) {
  const Features* found = lru_.Find(hash);
  ++(found != nullptr ? stats_.hits : stats_.misses);
  return found != nullptr ? *found : nullptr;
}

void EncoderCache::Insert(const kv::BlockHash& hash, Features features) {
  const auto bytes = static_cast<int64_t>(features->size() * sizeof(float));
  stats_.evictions += lru_.Insert(hash, std::move(features), bytes);
  stats_.bytes = lru_.cost();
  stats_.entries = lru_.size();
}

}  // namespace ember
