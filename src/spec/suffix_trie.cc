#include "spec/suffix_trie.h"

#include <algorithm>

#include "core/check.h"

namespace ember::spec {

SuffixTrie::SuffixTrie(int32_t max_depth) : max_depth_(max_depth) {
  EMBER_CHECK(max_depth >= 1, "suffix trie depth {}", max_depth);
  nodes_.emplace_back();  // the root: the empty pattern, counting every start position
}

SuffixTrie::NodeId SuffixTrie::ChildFor(NodeId parent, int32_t token) {
  if (NodeId child = edges_.Find(parent, token); child != TrieEdgeTable::kAbsent) return child;
  NodeId child;
  if (!free_.empty()) {
    child = free_.back();
    free_.pop_back();
  } else {
    child = static_cast<NodeId>(nodes_.size());
    nodes_.emplace_back();
  }
  Node& n = nodes_[child];
  n = Node{};
  n.token = token;
  n.parent = parent;
  n.next_sibling = nodes_[parent].first_child;
  if (n.next_sibling != kNone) nodes_[n.next_sibling].prev_sibling = child;
  nodes_[parent].first_child = child;
  edges_.Insert(parent, token, child);
  return child;
}

void SuffixTrie::Append(Cursor& cursor, int32_t token) {
  cursor.open.push_back(kRoot);
  ++nodes_[kRoot].count;
  for (NodeId& node : cursor.open) {
    node = ChildFor(node, token);
    ++nodes_[node].count;
  }
  // The oldest suffix is now max_depth long: it stops growing.
  if (static_cast<int32_t>(cursor.open.size()) == max_depth_) cursor.open.pop_front();
}

void SuffixTrie::Insert(std::span<const int32_t> sequence) {
  Cursor cursor;
  for (int32_t token : sequence) Append(cursor, token);
}

void SuffixTrie::Remove(std::span<const int32_t> sequence) {
  const size_t len = sequence.size();
  for (size_t start = 0; start < len; ++start) {
    Node& root = nodes_[kRoot];
    EMBER_CHECK(root.count > 0, "removing a sequence that was not inserted");
    --root.count;
    NodeId node = kRoot;
    const size_t end = std::min(len, start + static_cast<size_t>(max_depth_));
    for (size_t i = start; i < end; ++i) {
      const NodeId child = edges_.Find(node, sequence[i]);
      EMBER_CHECK(child != TrieEdgeTable::kAbsent, "removing a sequence that was not inserted");
      // A node that this occurrence alone held has only this occurrence's path below it.
      if (--nodes_[child].count == 0) {
        Release(child);
        break;
      }
      node = child;
    }
  }
}

void SuffixTrie::Release(NodeId node) {
  Node& n = nodes_[node];
  if (n.prev_sibling != kNone) {
    nodes_[n.prev_sibling].next_sibling = n.next_sibling;
  } else {
    nodes_[n.parent].first_child = n.next_sibling;
  }
  if (n.next_sibling != kNone) nodes_[n.next_sibling].prev_sibling = n.prev_sibling;
  std::vector<NodeId> pending = {node};
  while (!pending.empty()) {
    const NodeId id = pending.back();
    pending.pop_back();
    for (NodeId c = nodes_[id].first_child; c != kNone; c = nodes_[c].next_sibling) pending.push_back(c);
    edges_.Erase(nodes_[id].parent, nodes_[id].token);
    nodes_[id] = Node{};
    free_.push_back(id);
  }
}

SuffixTrie::NodeId SuffixTrie::Find(std::span<const int32_t> pattern) const {
  if (static_cast<int64_t>(pattern.size()) > max_depth_) return kNone;
  NodeId node = kRoot;
  for (int32_t token : pattern) {
    node = edges_.Find(node, token);
    if (node == TrieEdgeTable::kAbsent) return kNone;
  }
  return node;
}

SuffixTrie::NodeId SuffixTrie::MostFrequentChild(NodeId node) const {
  NodeId best = kNone;
  for (NodeId c = nodes_[node].first_child; c != kNone; c = nodes_[c].next_sibling) {
    const Node& n = nodes_[c];
    if (best == kNone || n.count > nodes_[best].count ||
        (n.count == nodes_[best].count && n.token < nodes_[best].token)) {
      best = c;
    }
  }
  return best;
}

size_t SuffixTrie::bytes() const {
  return nodes_.capacity() * sizeof(Node) + free_.capacity() * sizeof(NodeId) + edges_.bytes();
}

}  // namespace ember::spec
