#include "spec/dspark/context_cache.h"

#include <algorithm>

#include "core/check.h"

namespace ember::spec::dspark {

DSparkContextCache::DSparkContextCache(int64_t num_layers, int64_t kv_width, int64_t block_size,
                                       int64_t capacity_bytes)
    : num_layers_(num_layers), kv_width_(kv_width), block_size_(block_size) {
  EMBER_CHECK(num_layers > 0 && kv_width > 0 && block_size > 0 && capacity_bytes >= 0);
  capacity_blocks_ = capacity_bytes / bytes_per_block();
}

int64_t DSparkContextCache::Store(std::span<const kv::BlockHash> hashes, int64_t first_block,
                                  const DSparkContext& context) {
  EMBER_CHECK(context.num_layers() == num_layers_ && context.kv_width() == kv_width_);
  const int64_t num_blocks = static_cast<int64_t>(hashes.size());
  int64_t j = std::max<int64_t>(first_block, (context.begin() + block_size_ - 1) / block_size_);
  const int64_t rows = block_size_ * kv_width_;
  for (; j < num_blocks && (j + 1) * block_size_ <= context.end(); ++j) {
    if (capacity_blocks_ == 0) continue;
    if (auto it = index_.find(hashes[j]); it != index_.end()) {
      Touch(it->second);
      continue;
    }
    if (static_cast<int64_t>(lru_.size()) >= capacity_blocks_) {
      // Reuse the least recently used entry's buffer.
      index_.erase(lru_.back().hash);
      lru_.splice(lru_.begin(), lru_, std::prev(lru_.end()));
    } else {
      lru_.emplace_front();
      lru_.front().kv.resize(2 * num_layers_ * rows);
    }
    Entry& e = lru_.front();
    e.hash = hashes[j];
    for (int64_t l = 0; l < num_layers_; ++l) {
      std::copy_n(context.K(l, j * block_size_), rows, e.kv.data() + l * rows);
      std::copy_n(context.V(l, j * block_size_), rows, e.kv.data() + (num_layers_ + l) * rows);
    }
    index_[e.hash] = lru_.begin();
  }
  return j;
}

bool DSparkContextCache::Restore(std::span<const kv::BlockHash> hashes, int64_t position, DSparkContext& context) {
  EMBER_CHECK(context.size() == 0 && position % block_size_ == 0 &&
              static_cast<int64_t>(hashes.size()) * block_size_ >= position);
  const int64_t window = context.window();
  const int64_t first_needed = window > 0 ? std::max<int64_t>(0, position - window) : 0;
  const int64_t first_block = first_needed / block_size_;
  const int64_t end_block = position / block_size_;
  std::vector<Lru::iterator> found;
  for (int64_t j = first_block; j < end_block; ++j) {
    auto it = index_.find(hashes[j]);
    if (it == index_.end()) {
      ++misses_;
      context.RestartAt(position);
      return false;
    }
    found.push_back(it->second);
  }
  context.RestartAt(first_block * block_size_);
  for (Lru::iterator it : found) {
    context.Append(it->kv.data(), it->kv.data() + num_layers_ * block_size_ * kv_width_, block_size_);
    Touch(it);
  }
  hits_ += end_block - first_block;
  return true;
}

}  // namespace ember::spec::dspark
