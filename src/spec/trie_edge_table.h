// (parent run, token) -> child run for the suffix trie: one open-addressing table for all the
// trie's edges rather than a map per node, because the root and shallow nodes have thousands of
// children while deep ones have one, and a node-per-map layout would cost a heap allocation per
// node. 16 bytes a slot, at most half full.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember::spec {

class TrieEdgeTable {
 public:
  static constexpr int32_t kAbsent = -1;

  int32_t Find(int32_t parent, int32_t token) const;
  // The edge must be absent.
  void Insert(int32_t parent, int32_t token, int32_t child);
  // The edge must be present.
  void Erase(int32_t parent, int32_t token);
  // Points a present edge at another child (a run replaced in place: no tombstone left).
  void Set(int32_t parent, int32_t token, int32_t child);
  size_t size() const { return size_; }
  size_t bytes() const { return slots_.capacity() * sizeof(Slot); }

 private:
  struct Slot {
    uint64_t key;
    int32_t child;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static constexpr uint64_t kErased = ~uint64_t{0} - 1;  // a tombstone keeps probe chains intact

  static uint64_t Key(int32_t parent, int32_t token) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) | static_cast<uint32_t>(token);
  }
  size_t SlotOf(uint64_t key) const;  // the slot holding key, or the empty slot ending its chain
  void Rehash(size_t capacity);

  std::vector<Slot> slots_;
  size_t size_ = 0;
  size_t erased_ = 0;
};

}  // namespace ember::spec
