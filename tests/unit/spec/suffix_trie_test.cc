// The path-compressed trie's own edge cases: runs split by a new branch, boundaries that move or
// merge as open sequences grow, runs merged or freed by removal (in order or not), and sequences
// that share long stretches. Counts are held to a brute-force table, and the runs to those of a
// trie built afresh from the same sequences (the compressed form is unique, so any leftover
// boundary shows up as an extra run).
#include "spec/suffix_trie.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace ember::spec {
namespace {

using Tokens = std::vector<int32_t>;

std::map<Tokens, int32_t> BruteForceCounts(const std::vector<Tokens>& seqs, int32_t depth) {
  std::map<Tokens, int32_t> counts;
  for (const Tokens& seq : seqs) {
    for (size_t s = 0; s < seq.size(); ++s) {
      for (size_t e = s + 1; e <= seq.size() && e - s <= static_cast<size_t>(depth); ++e) {
        ++counts[Tokens(seq.begin() + s, seq.begin() + e)];
      }
    }
  }
  return counts;
}

// Every substring has its count and its last token, nothing else is found, and the runs are those
// of a fresh trie over the same sequences.
void ExpectHolds(const SuffixTrie& trie, const std::vector<Tokens>& seqs, int32_t vocab, const std::string& where) {
  const auto counts = BruteForceCounts(seqs, trie.max_depth());
  size_t tokens = 0;
  for (const Tokens& s : seqs) tokens += s.size();
  ASSERT_EQ(trie.count(SuffixTrie::kRoot), static_cast<int32_t>(tokens)) << where;
  for (const auto& [s, n] : counts) {
    const SuffixTrie::NodeId node = trie.Find(s);
    ASSERT_NE(node, SuffixTrie::kNone) << where;
    ASSERT_EQ(trie.count(node), n) << where;
    ASSERT_EQ(trie.token(node), s.back()) << where;
    if (static_cast<int32_t>(s.size()) == trie.max_depth()) continue;
    // The most frequent child, by the table.
    int32_t best = -1, best_count = 0;
    for (int32_t x = 0; x < vocab; ++x) {
      Tokens next = s;
      next.push_back(x);
      auto it = counts.find(next);
      if (it == counts.end()) {
        ASSERT_EQ(trie.Find(next), SuffixTrie::kNone) << where;
      } else if (it->second > best_count) {
        best = x, best_count = it->second;
      }
    }
    const SuffixTrie::NodeId child = trie.MostFrequentChild(node);
    if (best < 0) {
      ASSERT_EQ(child, SuffixTrie::kNone) << where;
    } else {
      ASSERT_NE(child, SuffixTrie::kNone) << where;
      ASSERT_EQ(trie.token(child), best) << where;
      ASSERT_EQ(trie.count(child), best_count) << where;
    }
  }
  ASSERT_EQ(trie.num_nodes(), counts.size() + 1) << where;
  SuffixTrie fresh(trie.max_depth());
  for (const Tokens& s : seqs) fresh.Insert(s);
  ASSERT_EQ(trie.num_runs(), fresh.num_runs()) << where;
  ASSERT_LE(trie.num_runs(), 2 * tokens + 1) << where;
}

// A sequence that mostly copies stretches of earlier ones (long shared prefixes and repeats).
Tokens CopyingSequence(std::mt19937& rng, int32_t vocab, const std::vector<Tokens>& earlier, size_t len) {
  Tokens t;
  while (t.size() < len) {
    if (!earlier.empty() && rng() % 3 != 0) {
      const Tokens& from = earlier[rng() % earlier.size()];
      if (from.empty()) continue;
      const size_t start = rng() % 2 ? 0 : rng() % from.size();
      const size_t n = std::min<size_t>(len - t.size(), 1 + rng() % 12);
      for (size_t i = start; i < std::min(from.size(), start + n); ++i) t.push_back(from[i]);
    } else {
      t.push_back(static_cast<int32_t>(rng() % vocab));
    }
  }
  return t;
}

TEST(SuffixTrie, RunsSplitMoveAndMergeUnderInterleavedAppendsAndRemovals) {
  for (uint32_t seed = 0; seed < 150; ++seed) {
    std::mt19937 rng(seed);
    const int32_t vocab = 2 + static_cast<int32_t>(rng() % 3);
    const int32_t depth = 1 + static_cast<int32_t>(rng() % 9);
    SuffixTrie trie(depth);
    struct Held {
      SuffixTrie::SeqId id;
      Tokens tokens;
      Tokens target;  // what an open sequence grows to
      bool open;
    };
    std::vector<Held> held;  // oldest first
    for (int op = 0; op < 40; ++op) {
      const std::string where = "seed " + std::to_string(seed) + " op " + std::to_string(op);
      std::vector<Tokens> earlier;
      for (const Held& h : held) earlier.push_back(h.open ? h.target : h.tokens);
      const uint32_t kind = rng() % 10;
      if (kind < 2) {  // insert a whole sequence
        const Tokens t = CopyingSequence(rng, vocab, earlier, rng() % 16);
        held.push_back({trie.Insert(t), t, {}, false});
      } else if (kind < 3) {  // open one, to be grown a token at a time
        held.push_back({trie.Open(), {}, CopyingSequence(rng, vocab, earlier, 1 + rng() % 20), true});
      } else if (kind < 8) {  // grow the open ones, interleaved
        for (Held& h : held) {
          if (!h.open) continue;
          for (uint32_t k = rng() % 3; k > 0 && h.tokens.size() < h.target.size(); --k) {
            h.tokens.push_back(h.target[h.tokens.size()]);
            trie.Append(h.id, h.tokens.back());
          }
          if (h.tokens.size() == h.target.size()) {
            trie.Close(h.id);
            h.open = false;
          }
        }
      } else if (!held.empty()) {  // remove: the oldest more often than not
        const size_t i = rng() % 3 ? 0 : rng() % held.size();
        trie.Remove(held[i].id);
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
      }
      std::vector<Tokens> now;
      for (const Held& h : held) {
        now.push_back(h.tokens);
        ASSERT_TRUE(std::ranges::equal(trie.tokens(h.id), h.tokens)) << where;
      }
      ASSERT_EQ(trie.num_sequences(), held.size()) << where;
      ExpectHolds(trie, now, vocab, where);
    }
    while (!held.empty()) {
      trie.Remove(held.front().id);
      held.erase(held.begin());
    }
    EXPECT_EQ(trie.num_runs(), 1u);
    EXPECT_EQ(trie.num_nodes(), 1u);
  }
}

// [1 2 3 4 5] at depth 8 is one run per start position; a second sequence sharing [1 2 3] splits
// the first run, and removing it merges the halves again.
TEST(SuffixTrie, ASharedPrefixSplitsARunAndItsRemovalMergesIt) {
  SuffixTrie trie(8);
  const SuffixTrie::SeqId a = trie.Insert(Tokens{1, 2, 3, 4, 5});
  EXPECT_EQ(trie.num_runs(), 6u);
  EXPECT_EQ(trie.num_nodes(), 16u);  // 5 + 4 + 3 + 2 + 1 substrings and the root
  const SuffixTrie::NodeId mid = trie.Find(Tokens{1, 2, 3});
  EXPECT_EQ(trie.count(mid), 1);
  EXPECT_EQ(trie.token(trie.MostFrequentChild(mid)), 4);
  const SuffixTrie::SeqId b = trie.Insert(Tokens{1, 2, 3, 9});
  // [1 2 3] and [2 3] and [3] now branch into 4 and 9: each of those three runs split, and the
  // new sequence's [9] starts one more.
  EXPECT_EQ(trie.num_runs(), 6u + 3 + 3 + 1);
  EXPECT_EQ(trie.count(trie.Find(Tokens{1, 2, 3})), 2);
  EXPECT_EQ(trie.count(trie.Find(Tokens{1, 2, 3, 9})), 1);
  trie.Remove(a);  // the oldest
  EXPECT_EQ(trie.num_runs(), 5u);  // [1 2 3 9], [2 3 9], [3 9], [9] and the root
  EXPECT_EQ(trie.Find(Tokens{4}), SuffixTrie::kNone);
  EXPECT_EQ(trie.count(trie.Find(Tokens{2, 3, 9})), 1);
  trie.Remove(b);
  EXPECT_EQ(trie.num_runs(), 1u);
}

// A document seen twice: the second copy moves each boundary down a token at a time instead of
// splitting, so the runs stay those of one copy.
TEST(SuffixTrie, ARepeatedDocumentAddsNoRuns) {
  std::mt19937 rng(3);
  Tokens doc(500);
  for (auto& x : doc) x = static_cast<int32_t>(rng() % 1000);
  SuffixTrie trie(24);
  const SuffixTrie::SeqId seq = trie.Open();
  for (int32_t x : doc) trie.Append(seq, x);
  const size_t once = trie.num_runs();
  for (int copy = 0; copy < 3; ++copy) {
    for (int32_t x : doc) trie.Append(seq, x);
  }
  // A few more where copies meet (the suffixes that span the seam) and nothing per token.
  EXPECT_LE(trie.num_runs(), once + 4 * 24);
  EXPECT_EQ(trie.count(trie.Find(std::span(doc).first(24))), 4);
}

TEST(SuffixTrie, RemovingANewerOrAnOpenSequence) {
  SuffixTrie trie(4);
  const SuffixTrie::SeqId a = trie.Insert(Tokens{1, 2, 1, 2});
  const SuffixTrie::SeqId b = trie.Insert(Tokens{1, 2, 3});
  const SuffixTrie::SeqId c = trie.Open();
  trie.Append(c, 2);
  trie.Append(c, 1);
  trie.Remove(b);  // not the oldest: rebuilt from a and c, c still open
  trie.Append(c, 2);
  ExpectHolds(trie, {{1, 2, 1, 2}, {2, 1, 2}}, 4, "after removing b");
  trie.Remove(c);  // open
  ExpectHolds(trie, {{1, 2, 1, 2}}, 4, "after removing c");
  trie.Remove(Tokens{1, 2, 1, 2});
  EXPECT_EQ(trie.num_sequences(), 0u);
  EXPECT_EQ(trie.num_runs(), 1u);
  EXPECT_EQ(trie.count(SuffixTrie::kRoot), 0);
  (void)a;
}

TEST(SuffixTrie, RunsStayLinearInTheTokens) {
  std::mt19937 rng(5);
  for (const int32_t vocab : {32000, 50, 2}) {
    Tokens t(20000);
    for (auto& x : t) x = static_cast<int32_t>(rng() % vocab);
    SuffixTrie trie(24);
    trie.Insert(t);
    EXPECT_LE(trie.num_runs(), 2 * t.size() + 1) << vocab;
    // Vocabulary 2 is the worst case, about 2 runs per token: 80 bytes of runs and 64 to 128 of
    // edge slots, up to twice the runs' share again while their vector grows.
    EXPECT_LT(trie.bytes(), 320 * t.size()) << vocab << " runs " << trie.num_runs();
  }
}

}  // namespace
}  // namespace ember::spec
