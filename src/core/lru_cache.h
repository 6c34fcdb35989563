// A least-recently-used map bounded by a cost budget (bytes, entries, ...): Find makes an entry the
// most recent, Insert evicts from the least recent end until the new entry fits. Not thread-safe;
// callers that share one lock around it.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <unordered_map>
#include <utility>

namespace ember {

template <typename Key, typename Value, typename Hash = std::hash<Key>>
class LruCache {
 public:
  explicit LruCache(int64_t capacity) : capacity_(capacity) {}

  // The value under `key`, now the most recent; null when absent.
  const Value* Find(const Key& key) {
    const auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return &it->second->value;
  }

  // Keeps `value` under `key` at `cost`, evicting the least recently used entries until it fits.
  // A key already present keeps its entry, and a value costing more than the whole capacity is
  // not kept. Returns how many entries were evicted.
  int64_t Insert(const Key& key, Value value, int64_t cost) {
    if (cost > capacity_ || index_.contains(key)) return 0;
    int64_t evicted = 0;
    while (cost_ + cost > capacity_) {
      cost_ -= lru_.back().cost;
      index_.erase(lru_.back().key);
      lru_.pop_back();
      ++evicted;
    }
    lru_.push_front({key, std::move(value), cost});
    index_[key] = lru_.begin();
    cost_ += cost;
    return evicted;
  }

  int64_t capacity() const { return capacity_; }
  int64_t cost() const { return cost_; }  // held now
  int64_t size() const { return static_cast<int64_t>(lru_.size()); }

 private:
  struct Entry {
    Key key;
    Value value;
    int64_t cost;
  };
  int64_t capacity_;
  int64_t cost_ = 0;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<Key, typename std::list<Entry>::iterator, Hash> index_;
};

}  // namespace ember
