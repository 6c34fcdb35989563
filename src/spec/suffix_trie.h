// A suffix trie cut at max_depth: every substring of at most max_depth tokens of the inserted
// sequences is a node, counting its occurrences (one per start position; a substring never spans
// two sequences). This is the count table suffix decoding reads its probabilities from: for a
// pattern s and a token x, count(s x) / count(s) is how often s was followed by x.
//
// It is the uncompressed form of ArcticInference's suffix tree (csrc/suffix_decoding/
// suffix_tree.cc): the same counts, no path compression, which keeps append and removal simple.
// Memory: at most max_depth nodes per inserted token (each start position adds one path of at
// most max_depth nodes; shared prefixes share nodes): 24 bytes a node plus its edge's slot
// (16 bytes, the table kept between a quarter and half full). Removal returns nodes to a free list.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "spec/trie_edge_table.h"

namespace ember::spec {

class SuffixTrie {
 public:
  using NodeId = int32_t;
  static constexpr NodeId kRoot = 0;
  static constexpr NodeId kNone = -1;

  // Where a sequence being appended to stands: the nodes of its suffixes still shorter than
  // max_depth, oldest (longest) first. Owned by the caller, one per open sequence.
  struct Cursor {
    std::deque<NodeId> open;
  };

  explicit SuffixTrie(int32_t max_depth);

  int32_t max_depth() const { return max_depth_; }

  // Appends `token` to the sequence `cursor` stands for: every open suffix grows by it and a new
  // one starts. O(max_depth).
  void Append(Cursor& cursor, int32_t token);
  // Inserts a whole sequence (a fresh cursor, dropped after).
  void Insert(std::span<const int32_t> sequence);
  // Undoes Insert(sequence): the tokens must be those of one inserted sequence. O(len * depth).
  void Remove(std::span<const int32_t> sequence);

  // The node of `pattern`, or kNone when it never occurs or is longer than max_depth.
  NodeId Find(std::span<const int32_t> pattern) const;
  // The child with the highest count (the smallest token among equals), or kNone for a leaf.
  NodeId MostFrequentChild(NodeId node) const;
  int32_t count(NodeId node) const { return nodes_[node].count; }
  int32_t token(NodeId node) const { return nodes_[node].token; }

  size_t num_nodes() const { return nodes_.size() - free_.size(); }  // the root included
  size_t bytes() const;

 private:
  struct Node {
    int32_t token = -1;
    int32_t count = 0;  // occurrences; 0 only for a node on the free list
    NodeId parent = kNone;
    NodeId first_child = kNone;
    NodeId next_sibling = kNone;
    NodeId prev_sibling = kNone;
  };

  // The child for `token`, created with count 0 when absent.
  NodeId ChildFor(NodeId parent, int32_t token);
  // Unlinks `node` and frees it with everything below it.
  void Release(NodeId node);

  int32_t max_depth_;
  std::vector<Node> nodes_;
  std::vector<NodeId> free_;
  TrieEdgeTable edges_;
};

}  // namespace ember::spec
