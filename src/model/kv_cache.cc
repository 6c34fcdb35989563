#include "model/kv_cache.h"

#include <cstddef>

namespace ember {

void KvCache::Reserve(int64_t count) {
  const size_t needed = static_cast<size_t>((num_tokens_ + count) * kv_width_);
  for (size_t l = 0; l < keys_.size(); ++l) {
    if (keys_[l].size() < needed) {
      keys_[l].resize(needed);
      values_[l].resize(needed);
    }
  }
}

}  // namespace ember
