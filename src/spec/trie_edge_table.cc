#include "spec/trie_edge_table.h"

#include <algorithm>

#include "core/check.h"

namespace ember::spec {
namespace {

// A 64-bit finalizer (MurmurHash3's): parent ids and token ids are small, dense integers whose
// low bits alone would cluster.
uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

}  // namespace

size_t TrieEdgeTable::SlotOf(uint64_t key) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = Mix(key) & mask;; i = (i + 1) & mask) {
    if (slots_[i].key == key || slots_[i].key == kEmpty) return i;
  }
}

int32_t TrieEdgeTable::Find(int32_t parent, int32_t token) const {
  if (slots_.empty()) return kAbsent;
  const Slot& slot = slots_[SlotOf(Key(parent, token))];
  return slot.key == kEmpty ? kAbsent : slot.child;
}

void TrieEdgeTable::Insert(int32_t parent, int32_t token, int32_t child) {
  if (2 * (size_ + erased_ + 1) > slots_.size()) {
    // Grow when live edges fill a quarter; otherwise only the tombstones are cleared.
    Rehash(4 * (size_ + 1) > slots_.size() ? std::max<size_t>(16, 2 * slots_.size()) : slots_.size());
  }
  const uint64_t key = Key(parent, token);
  const size_t mask = slots_.size() - 1;
  for (size_t i = Mix(key) & mask;; i = (i + 1) & mask) {
    Slot& slot = slots_[i];
    EMBER_DCHECK(slot.key != key, "edge ({}, {}) inserted twice", parent, token);
    if (slot.key == kEmpty || slot.key == kErased) {
      if (slot.key == kErased) --erased_;
      slot = {key, child};
      ++size_;
      return;
    }
  }
}

void TrieEdgeTable::Erase(int32_t parent, int32_t token) {
  EMBER_CHECK(!slots_.empty());
  Slot& slot = slots_[SlotOf(Key(parent, token))];
  EMBER_CHECK(slot.key != kEmpty, "erasing a missing edge ({}, {})", parent, token);
  slot.key = kErased;
  --size_;
  ++erased_;
}

void TrieEdgeTable::Set(int32_t parent, int32_t token, int32_t child) {
  EMBER_CHECK(!slots_.empty());
  Slot& slot = slots_[SlotOf(Key(parent, token))];
  EMBER_CHECK(slot.key != kEmpty, "setting a missing edge ({}, {})", parent, token);
  slot.child = child;
}

void TrieEdgeTable::Rehash(size_t capacity) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{kEmpty, kAbsent});
  size_ = 0;
  erased_ = 0;
  const size_t mask = capacity - 1;
  for (const Slot& s : old) {
    if (s.key == kEmpty || s.key == kErased) continue;
    size_t i = Mix(s.key) & mask;
    while (slots_[i].key != kEmpty) i = (i + 1) & mask;
    slots_[i] = s;
    ++size_;
  }
}

}  // namespace ember::spec
