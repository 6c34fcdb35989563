#include "spec/suffix_proposer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace ember::spec {
namespace {

using Tokens = std::vector<int32_t>;

// Occurrence counts of every substring of at most `depth` tokens, counted by brute force.
struct SubstringCounts {
  explicit SubstringCounts(int32_t max_depth) : depth(max_depth) {}
  int32_t depth;
  std::map<Tokens, int32_t> counts;

  void Add(const Tokens& seq) {
    for (size_t s = 0; s < seq.size(); ++s) {
      for (size_t e = s + 1; e <= seq.size() && e - s <= static_cast<size_t>(depth); ++e) {
        ++counts[Tokens(seq.begin() + s, seq.begin() + e)];
      }
    }
  }
  int32_t Count(const Tokens& s) const {
    auto it = counts.find(s);
    return it == counts.end() ? 0 : it->second;
  }
};

// The speculation rule written plainly over the brute-force counts (see SpeculateFromTrie).
SuffixCandidate ReferenceSpeculate(const SubstringCounts& table, const Tokens& context, int32_t max_tokens,
                                   float factor, float min_prob, int32_t vocab) {
  SuffixCandidate best;
  const int32_t longest = std::min<int32_t>(static_cast<int32_t>(context.size()), table.depth) - 1;
  for (int32_t m = 1; m <= longest; ++m) {
    Tokens cur(context.end() - m, context.end());
    if (table.Count(cur) == 0) break;
    const int32_t budget = std::min(max_tokens, static_cast<int32_t>(static_cast<float>(m) * factor + 1e-6f));
    SuffixCandidate c;
    float prob = 1.0f;
    while (static_cast<int32_t>(c.tokens.size()) < budget) {
      int32_t best_token = -1;
      int32_t best_count = 0;
      for (int32_t x = 0; x < vocab; ++x) {
        Tokens next = cur;
        next.push_back(x);
        const int32_t n = static_cast<int32_t>(next.size()) <= table.depth ? table.Count(next) : 0;
        if (n > best_count) best_token = x, best_count = n;
      }
      if (best_token < 0) break;
      prob *= static_cast<float>(best_count) / static_cast<float>(table.Count(cur));
      if (prob < min_prob) break;
      c.tokens.push_back(best_token);
      c.probs.push_back(prob);
      c.score += prob;
      cur.push_back(best_token);
    }
    if (budget > 0 && c.score >= best.score) best = c;
  }
  return best;
}

Tokens RandomTokens(std::mt19937& rng, int32_t vocab, size_t len) {
  Tokens t(len);
  for (auto& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

SpeculativeConfig SuffixConfig(int32_t depth, int32_t cached, float factor, float min_prob) {
  SpeculativeConfig c;
  c.method = Method::kSuffix;
  c.suffix_max_tree_depth = depth;
  c.suffix_max_cached_requests = cached;
  c.suffix_max_spec_factor = factor;
  c.suffix_min_token_prob = min_prob;
  return c;
}

Draft ProposeOne(SuffixProposer& p, RequestId req, const Tokens& tokens, int32_t max_tokens, int64_t prompt = 0) {
  const ProposalInput in{.req = req, .tokens = tokens, .num_prompt_tokens = prompt, .max_tokens = max_tokens};
  Draft d;
  p.Propose(std::span(&in, 1), std::span(&d, 1));
  EXPECT_EQ(d.tokens.size(), d.confidences.size());
  return d;
}

TEST(SuffixTrie, CountsMatchBruteForceThroughInsertAndRemove) {
  for (uint32_t seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(seed);
    const int32_t vocab = 2 + static_cast<int32_t>(rng() % 4);
    const int32_t depth = 1 + static_cast<int32_t>(rng() % 6);
    SuffixTrie trie(depth);
    std::vector<Tokens> seqs;
    for (int i = 0; i < 5; ++i) seqs.push_back(RandomTokens(rng, vocab, rng() % 20));
    for (const Tokens& s : seqs) trie.Insert(s);
    // Remove the odd ones; the trie must count exactly what remains, with no node left over.
    SubstringCounts remaining(depth);
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (i % 2) {
        trie.Remove(seqs[i]);
      } else {
        remaining.Add(seqs[i]);
      }
    }
    for (const auto& [s, n] : remaining.counts) {
      const SuffixTrie::NodeId node = trie.Find(s);
      ASSERT_NE(node, SuffixTrie::kNone) << "seed " << seed;
      ASSERT_EQ(trie.count(node), n) << "seed " << seed;
    }
    EXPECT_EQ(trie.num_nodes(), remaining.counts.size() + 1) << "seed " << seed;  // + the root
    for (size_t i = 0; i < seqs.size(); i += 2) trie.Remove(seqs[i]);
    EXPECT_EQ(trie.num_nodes(), 1u);
    EXPECT_EQ(trie.count(SuffixTrie::kRoot), 0);
  }
}

TEST(SuffixTrie, PatternsLongerThanTheDepthAreNotFound) {
  SuffixTrie trie(2);
  trie.Insert(Tokens{1, 2, 3});
  EXPECT_NE(trie.Find(Tokens{1, 2}), SuffixTrie::kNone);
  EXPECT_EQ(trie.Find(Tokens{1, 2, 3}), SuffixTrie::kNone);
  EXPECT_EQ(trie.Find(Tokens{2, 1}), SuffixTrie::kNone);
  EXPECT_EQ(trie.count(trie.Find(Tokens{})), 3);  // the root counts start positions
}

// A worked example: [5 6 7 5 6], depth 4, factor 1, up to 4 tokens.
//   m = 1: [6] occurs twice, once followed by 7: draft [7] at 1/2 (budget 1), score 0.5.
//   m = 2: [5 6] twice, 7 once, then [5 6 7] -> 5 with ratio 1: [7 5] at 1/2, 1/2, score 1.
//   m = 3: [7 5 6] once, at the end: nothing follows.
TEST(SuffixProposer, WorkedExample) {
  SuffixProposer p(SuffixConfig(4, 0, 1.0f, 0.1f));
  EXPECT_EQ(p.name(), "suffix");
  const Draft d = ProposeOne(p, 1, {5, 6, 7, 5, 6}, 4);
  EXPECT_EQ(d.tokens, (Tokens{7, 5}));
  EXPECT_EQ(d.confidences, (std::vector<float>{0.5f, 0.5f}));
  // A 0.6 floor stops before the first token.
  SuffixProposer strict(SuffixConfig(4, 0, 1.0f, 0.6f));
  EXPECT_TRUE(ProposeOne(strict, 1, {5, 6, 7, 5, 6}, 4).tokens.empty());
}

TEST(SuffixProposer, EdgeCases) {
  SuffixProposer p(SuffixConfig(8, 4, 1.0f, 0.1f));
  EXPECT_TRUE(ProposeOne(p, 1, {}, 4).tokens.empty());
  EXPECT_TRUE(ProposeOne(p, 2, {3}, 4).tokens.empty());
  EXPECT_TRUE(ProposeOne(p, 3, {1, 2, 3, 4}, 4).tokens.empty());  // the suffix occurs only at the end
  EXPECT_EQ(ProposeOne(p, 4, {1, 2, 1, 2, 1, 2}, 1).tokens, (Tokens{1}));  // max_tokens 1
  // Up to 8: the 4-token match [1 2 1 2] drafts [1 2] at 1/2 each (score 1), but the 2-token
  // match [1 2] (3 times, twice followed) drafts [1 2] at 2/3 each and scores higher.
  const Draft d = ProposeOne(p, 5, {1, 2, 1, 2, 1, 2}, 8);
  EXPECT_EQ(d.tokens, (Tokens{1, 2}));
  EXPECT_EQ(d.confidences, (std::vector<float>{2.0f / 3.0f, 2.0f / 3.0f}));
  EXPECT_EQ(p.num_active_requests(), 5u);
}

// The proposer against the brute-force rule over whole sessions: completed requests feed the
// global counts (with eviction), and a live request grows token by token (incremental appends).
TEST(SuffixProposer, MatchesBruteForceOnRandomSessions) {
  int checked_nonempty = 0;
  for (uint32_t seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(seed);
    const int32_t vocab = 2 + static_cast<int32_t>(rng() % 4);
    const int32_t depth = 1 + static_cast<int32_t>(rng() % 7);
    const int32_t cached = static_cast<int32_t>(rng() % 4);
    const float factors[] = {0.5f, 1.0f, 2.0f, 4.0f};
    const float min_probs[] = {0.0f, 0.1f, 0.3f, 0.6f};
    const float factor = factors[rng() % 4];
    const float min_prob = min_probs[rng() % 4];
    SuffixProposer p(SuffixConfig(depth, cached, factor, min_prob));

    std::vector<Tokens> outputs;  // completed outputs, oldest first
    const int num_completed = static_cast<int>(rng() % 6);
    for (int r = 0; r < num_completed; ++r) {
      const Tokens prompt = RandomTokens(rng, vocab, rng() % 6);
      const Tokens output = RandomTokens(rng, vocab, rng() % 15);
      Tokens all = prompt;
      all.insert(all.end(), output.begin(), output.end());
      ProposeOne(p, 100 + r, all, 3);  // holds state that release must drop
      p.OnReleased(100 + r, all, static_cast<int64_t>(prompt.size()), /*completed=*/true);
      if (cached > 0 && !output.empty()) outputs.push_back(output);
    }
    while (static_cast<int32_t>(outputs.size()) > cached) outputs.erase(outputs.begin());
    ASSERT_EQ(p.num_cached_requests(), outputs.size());
    ASSERT_EQ(p.num_active_requests(), 0u);
    SubstringCounts global(depth);
    for (const Tokens& o : outputs) global.Add(o);

    const Tokens live = RandomTokens(rng, vocab, 1 + rng() % 30);
    for (size_t len = 0; len <= live.size(); ++len) {
      const Tokens span(live.begin(), live.begin() + len);
      const int32_t k = 1 + static_cast<int32_t>(rng() % 6);
      SubstringCounts local(depth);
      local.Add(span);
      SuffixCandidate want = ReferenceSpeculate(local, span, k, factor, min_prob, vocab);
      if (!outputs.empty()) {
        SuffixCandidate g = ReferenceSpeculate(global, span, k, factor, min_prob, vocab);
        if (g.score > want.score) want = g;
      }
      const Draft got = ProposeOne(p, 7, span, k);
      ASSERT_EQ(got.tokens, want.tokens) << "seed " << seed << " len " << len;
      ASSERT_EQ(got.confidences, want.probs) << "seed " << seed << " len " << len;
      checked_nonempty += !want.tokens.empty();
    }
  }
  EXPECT_GT(checked_nonempty, 1000);  // the sessions do exercise matches
}

TEST(SuffixProposer, IncrementalAppendsMatchAFreshProposer) {
  for (uint32_t seed = 0; seed < 100; ++seed) {
    std::mt19937 rng(seed);
    const Tokens tokens = RandomTokens(rng, 3, 60);
    SuffixProposer incremental(SuffixConfig(6, 0, 2.0f, 0.1f));
    size_t len = 0;
    while (len < tokens.size()) {
      len = std::min(tokens.size(), len + 1 + rng() % 4);  // steps of 1 to 4 tokens (accepted drafts)
      const Tokens span(tokens.begin(), tokens.begin() + len);
      SuffixProposer fresh(SuffixConfig(6, 0, 2.0f, 0.1f));
      const Draft a = ProposeOne(incremental, 1, span, 5);
      const Draft b = ProposeOne(fresh, 1, span, 5);
      ASSERT_EQ(a.tokens, b.tokens) << "seed " << seed << " len " << len;
      ASSERT_EQ(a.confidences, b.confidences);
    }
  }
}

TEST(SuffixProposer, RebuildsWhenTheSpanDoesNotExtendWhatItSaw) {
  SuffixProposer p(SuffixConfig(6, 0, 2.0f, 0.0f));
  // Seen [1 2 3 1 2 3 1 2]: it would draft 3.
  EXPECT_EQ(ProposeOne(p, 1, {1, 2, 3, 1, 2, 3, 1, 2}, 1).tokens, (Tokens{3}));
  // A different span under the same id (same length + 1, other tokens): drafts as a fresh one.
  const Tokens other = {4, 2, 5, 4, 2, 5, 4, 2, 9};
  SuffixProposer fresh(SuffixConfig(6, 0, 2.0f, 0.0f));
  EXPECT_EQ(ProposeOne(p, 1, other, 3).tokens, ProposeOne(fresh, 1, other, 3).tokens);
  // A shorter span (a recompute from a truncated history): rebuilt, so the old 9 is forgotten.
  const Tokens shorter = {4, 2, 5, 4, 2};
  const Draft d = ProposeOne(p, 1, shorter, 3);
  EXPECT_EQ(d.tokens, (Tokens{5, 4, 2}));
  EXPECT_EQ(d.confidences, ProposeOne(fresh, 2, shorter, 3).confidences);
  // Only the last token changed: still detected (the ends are compared).
  const Tokens changed_last = {4, 2, 5, 4, 7};
  EXPECT_TRUE(ProposeOne(p, 1, changed_last, 3).tokens.empty());
}

TEST(SuffixProposer, GlobalCacheLearnsCompletedOutputsAndEvictsTheOldest) {
  SuffixProposer p(SuffixConfig(8, 2, 4.0f, 0.1f));
  const Tokens outputs[] = {{10, 11, 12, 13}, {20, 21, 22, 23}, {30, 31, 32, 33}};
  for (int r = 0; r < 3; ++r) {
    Tokens all = {1, 2};  // the prompt: not cached
    all.insert(all.end(), outputs[r].begin(), outputs[r].end());
    ProposeOne(p, r, all, 4);
    p.OnReleased(r, all, 2, true);
    EXPECT_EQ(p.num_cached_requests(), std::min(r + 1, 2));
  }
  EXPECT_EQ(p.num_active_requests(), 0u);
  // A new request ending in 20 21 drafts the cached continuation; the evicted first output and
  // the prompts are gone.
  EXPECT_EQ(ProposeOne(p, 9, {5, 20, 21}, 4).tokens, (Tokens{22, 23}));
  EXPECT_EQ(ProposeOne(p, 9, {5, 20, 21, 30, 31}, 4).tokens, (Tokens{32, 33}));
  EXPECT_TRUE(ProposeOne(p, 10, {5, 10, 11}, 4).tokens.empty());
  EXPECT_TRUE(ProposeOne(p, 11, {5, 1, 2}, 4).tokens.empty());
  // The global trie holds exactly the two newest outputs.
  SuffixTrie two(8);
  two.Insert(outputs[1]);
  two.Insert(outputs[2]);
  EXPECT_EQ(p.global_trie().num_nodes(), two.num_nodes());
}

TEST(SuffixProposer, ReleaseWithoutCompletionDropsStateWithoutLearning) {
  SuffixProposer p(SuffixConfig(8, 4, 4.0f, 0.1f));
  const Tokens tokens = {1, 40, 41, 42, 43};
  ProposeOne(p, 1, tokens, 4);
  EXPECT_EQ(p.num_active_requests(), 1u);
  p.OnReleased(1, tokens, 1, /*completed=*/false);
  EXPECT_EQ(p.num_active_requests(), 0u);
  EXPECT_EQ(p.num_cached_requests(), 0u);
  EXPECT_EQ(p.global_trie().num_nodes(), 1u);
  EXPECT_TRUE(ProposeOne(p, 2, {7, 40, 41}, 4).tokens.empty());
  // Completed, the same output is learned.
  p.OnReleased(1, tokens, 1, /*completed=*/true);
  EXPECT_EQ(ProposeOne(p, 2, {7, 40, 41}, 4).tokens, (Tokens{42, 43}));
}

TEST(SuffixProposer, NoGlobalCacheWhenLimitIsZero) {
  SuffixProposer p(SuffixConfig(8, 0, 4.0f, 0.1f));
  p.OnReleased(1, Tokens{1, 40, 41, 42}, 1, true);
  EXPECT_EQ(p.num_cached_requests(), 0u);
  EXPECT_TRUE(ProposeOne(p, 2, {7, 40, 41}, 4).tokens.empty());
}

}  // namespace
}  // namespace ember::spec
