// A suffix trie cut at max_depth: every substring of at most max_depth tokens of the held
// sequences is a node, counting its occurrences (one per start position; a substring never spans
// two sequences). This is the count table suffix decoding reads its probabilities from: for a
// pattern s and a token x, count(s x) / count(s) is how often s was followed by x.
//
// Stored path compressed, as ArcticInference's suffix tree (csrc/suffix_decoding/suffix_tree.cc):
// a run is a chain of trie nodes each with one child and all with the same count, kept as one
// record whose tokens are a reference into a held sequence. Think of each start position as a path
// of min(max_depth, tokens left) nodes; counts are paths through a node. A run ends only where the
// trie branches or where some path ends, and each start position has one path end and adds at most
// one branch, so there are at most 2 runs per token (plus the root) however deep the trie is. The
// trie keeps its own copy of each sequence (the references point into it).
//
// Memory per token, at most: 2 runs of 40 bytes, their 2 edge slots (16 bytes, the table kept
// between a quarter and half full) and the token itself, ~150 to 210 bytes before the vectors'
// growth slack. That worst case is a tiny alphabet (vocabulary 2); text that rarely repeats needs
// about 1.3 runs per token, and text that repeats long stretches fewer (a repeat adds no runs).
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
  // A held sequence. Ids grow with each Open, so a smaller id is an older sequence.
  using SeqId = int32_t;

  // A node of the (uncompressed) trie: `offset` nodes into run `run` (1 for its first token). The
  // root is the only node with offset 0.
  struct NodeId {
    int32_t run;
    int32_t offset;
    bool operator==(const NodeId&) const = default;
  };
  static constexpr NodeId kRoot{0, 0};
  static constexpr NodeId kNone{-1, 0};

  explicit SuffixTrie(int32_t max_depth);

  int32_t max_depth() const { return max_depth_; }

  // Starts an empty sequence that Append grows.
  SeqId Open();
  // Appends `token` to an open sequence: each of its suffixes still shorter than max_depth grows
  // by it and a new one starts. O(max_depth); a suffix seen only once (most of them, on text that
  // does not repeat) grows its run in place without a table lookup.
  void Append(SeqId seq, int32_t token);
  // No more appends to `seq`: drops what Append needs (max_depth ints).
  void Close(SeqId seq);
  // A whole sequence: Open, Append each token, Close.
  SeqId Insert(std::span<const int32_t> sequence);
  // Forgets a held sequence: counts drop, runs that reach zero are freed, and runs left a single
  // child with an equal count merge with it. O(len * max_depth) for the oldest held sequence (the
  // only one an eviction in order removes); any other is removed by rebuilding the trie from the
  // rest, O(their tokens * max_depth) (see RemoveOldest for why).
  void Remove(SeqId seq);
  // Remove for the oldest held sequence with exactly these tokens (there must be one).
  void Remove(std::span<const int32_t> sequence);
  std::span<const int32_t> tokens(SeqId seq) const;
  size_t num_sequences() const;

  // The node of `pattern`, or kNone when it never occurs or is longer than max_depth.
  NodeId Find(std::span<const int32_t> pattern) const;
  // The child with the highest count (the smallest token among equals), or kNone for a leaf.
  NodeId MostFrequentChild(NodeId node) const;
  int32_t count(NodeId node) const { return runs_[node.run].count; }
  int32_t token(NodeId node) const;  // the node's last token; -1 for the root

  size_t num_nodes() const { return num_nodes_; }  // of the uncompressed trie, the root included
  size_t num_runs() const { return runs_.size() - free_.size(); }  // stored, the root included
  size_t bytes() const;  // everything allocated, sequences included

 private:
  using RunId = int32_t;
  static constexpr RunId kRootRun = 0;
  static constexpr RunId kNoRun = -1;

  struct Run {
    int32_t token = -1;  // the first token: the run's key among its parent's edges
    int32_t count = 0;   // paths through the run; 0 only on the free list
    int32_t length = 0;  // nodes in the run; 0 only for the root
    // The run's tokens are tokens(ref_seq)[ref_end - length, ref_end), and tokens(ref_seq) ends
    // with the whole path to the run's end at ref_end. ref_seq is the newest sequence with a path
    // through the run, which is what lets RemoveOldest leave no reference to what it removes.
    SeqId ref_seq = -1;
    int32_t ref_end = 0;
    RunId parent = kNoRun;
    RunId first_child = kNoRun;
    RunId next_sibling = kNoRun;
    RunId prev_sibling = kNoRun;
  };

  struct Sequence {
    std::vector<int32_t> tokens;
    // While open, max_depth slots: open[p % max_depth] is the run where the suffix starting at p
    // ends, for the starts p whose suffix is still shorter than max_depth. Empty once closed.
    std::vector<RunId> open;
    bool live = false;
  };

  size_t Index(SeqId seq) const;  // checks that `seq` is held
  Sequence& Seq(SeqId seq);
  const Sequence& Seq(SeqId seq) const;
  int32_t TokenAt(const Run& run, int32_t index) const;  // index 0 is the run's first token

  // Grows the path that ends at run `at` by `token`, which is tokens(seq)[end - 1]; returns the
  // run where it ends now.
  RunId Extend(RunId at, int32_t token, SeqId seq, int32_t end);
  // Records that a path of `seq` ending at tokens(seq)[end - 1] now goes through `run`'s end.
  void Touch(RunId run, SeqId seq, int32_t end);
  RunId NewRun();
  RunId NewLeaf(RunId parent, int32_t token, SeqId seq, int32_t end);
  // Puts `replacement` in `run`'s place among its parent's children and edges.
  void ReplaceChild(RunId run, RunId replacement);
  // Cuts run `run` after its first `length` nodes; the new top part is returned, `run` keeps the
  // rest (so its id stays valid for its children and any path ending at it).
  RunId SplitTop(RunId run, int32_t length);
  // `child` (the only child of `run`, whose paths all go into it) absorbs `run`.
  void Fuse(RunId run, RunId child);
  void FuseWithOnlyChildIfEqual(RunId run);
  // Unlinks `run` and frees it with everything below it.
  void Release(RunId run);

  void RemoveOldest();
  void RebuildWithout(SeqId removed);

  int32_t max_depth_;
  std::vector<Run> runs_;
  std::vector<RunId> free_;
  TrieEdgeTable edges_;
  size_t num_nodes_ = 1;
  std::deque<Sequence> seqs_;  // seqs_[i] is id first_seq_ + i; the front one is live
  SeqId first_seq_ = 0;
  std::vector<RunId> pending_;  // Release's scratch
};

}  // namespace ember::spec
