#include "spec/ngram_proposer.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace ember::spec {
namespace {

using Tokens = std::vector<int32_t>;

// The rule written the slow, obvious way: for n from max_n down to min_n, the earliest start s
// whose n tokens equal the last n and that is not the suffix itself (s + n < len).
Tokens BruteForceLookup(const Tokens& t, int32_t min_n, int32_t max_n, int32_t max_tokens) {
  const int64_t len = static_cast<int64_t>(t.size());
  for (int32_t n = max_n; n >= min_n; --n) {
    if (n >= len) continue;
    for (int64_t s = 0; s + n < len; ++s) {
      bool equal = true;
      for (int32_t j = 0; j < n && equal; ++j) equal = t[s + j] == t[len - n + j];
      if (!equal) continue;
      Tokens out;
      for (int64_t p = s + n; p < len && static_cast<int32_t>(out.size()) < max_tokens; ++p) out.push_back(t[p]);
      return out;
    }
  }
  return {};
}

Tokens Lookup(const Tokens& t, int32_t min_n, int32_t max_n, int32_t max_tokens) {
  Draft d;
  ProposeByPromptLookup(t, min_n, max_n, max_tokens, d);
  EXPECT_TRUE(d.confidences.empty());
  return d.tokens;
}

TEST(NgramProposer, VllmDocExample) {
  // vLLM's docstring example: [1,2,3,4,2,3], n in [2,3], k = 4 -> [2,3] matched at 1, draft [4,2,3].
  EXPECT_EQ(Lookup({1, 2, 3, 4, 2, 3}, 2, 3, 4), (Tokens{4, 2, 3}));
}

TEST(NgramProposer, PrefersLongestThenEarliest) {
  // [7 8] occurs at 0 and 3; [9 7 8] at 2..4 only as the longer match.
  const Tokens t = {7, 8, 1, 9, 7, 8, 2, 9, 7, 8};
  EXPECT_EQ(Lookup(t, 1, 3, 2), (Tokens{2, 9}));  // 3-gram [9 7 8] at 3 -> follows 2, 9
  EXPECT_EQ(Lookup(t, 1, 2, 2), (Tokens{1, 9}));  // 2-gram [7 8]: earliest at 0
  EXPECT_EQ(Lookup(t, 1, 1, 3), (Tokens{1, 9, 7}));  // [8] earliest at 1
}

TEST(NgramProposer, EdgeCases) {
  EXPECT_TRUE(Lookup({}, 1, 4, 5).empty());
  EXPECT_TRUE(Lookup({5}, 1, 4, 5).empty());
  EXPECT_TRUE(Lookup({1, 2, 3, 4}, 1, 4, 5).empty());  // nothing recurs
  EXPECT_EQ(Lookup({5, 5}, 1, 4, 5), (Tokens{5}));      // overlapping occurrence
  EXPECT_EQ(Lookup({5, 5, 5, 5}, 1, 2, 8), (Tokens{5, 5}));  // [5 5] at 0 -> 5 5 until the end
  EXPECT_EQ(Lookup({1, 2, 1, 2}, 2, 2, 1), (Tokens{1}));  // max_tokens 1
  EXPECT_TRUE(Lookup({1, 2, 1, 2}, 3, 4, 4).empty());      // only a 2-gram recurs: below min_n
  EXPECT_TRUE(Lookup({1, 2, 1, 2}, 2, 2, 0).empty());      // max_tokens 0: no guess
  // The match may end right before the suffix: the one token between is the whole draft.
  EXPECT_EQ(Lookup({3, 4, 3, 4, 3}, 3, 3, 4), (Tokens{4, 3}));
}

TEST(NgramProposer, MatchesBruteForceOnRandomSequences) {
  for (uint32_t seed = 0; seed < 3000; ++seed) {
    std::mt19937 rng(seed);
    const int32_t vocab = 2 + static_cast<int32_t>(rng() % 5);
    const int32_t len = static_cast<int32_t>(rng() % 40);
    const int32_t min_n = 1 + static_cast<int32_t>(rng() % 4);
    const int32_t max_n = min_n + static_cast<int32_t>(rng() % 4);
    const int32_t k = 1 + static_cast<int32_t>(rng() % 6);
    Tokens t(len);
    for (auto& x : t) x = static_cast<int32_t>(rng() % vocab);
    ASSERT_EQ(Lookup(t, min_n, max_n, k), BruteForceLookup(t, min_n, max_n, k))
        << "seed " << seed << " min " << min_n << " max " << max_n << " k " << k;
  }
}

TEST(NgramProposer, ProposesForEachInputOfABatch) {
  SpeculativeConfig config;
  config.prompt_lookup_min = 2;
  config.prompt_lookup_max = 3;
  NgramProposer proposer(config);
  EXPECT_EQ(proposer.name(), "ngram");
  const Tokens a = {1, 2, 3, 4, 2, 3};
  const Tokens b = {9, 9, 9};
  const Tokens c = {1, 2};
  const ProposalInput inputs[] = {{.req = 1, .tokens = a, .max_tokens = 2},
                                  {.req = 2, .tokens = b, .max_tokens = 4},
                                  {.req = 3, .tokens = c, .max_tokens = 4}};
  std::vector<Draft> drafts(3);
  proposer.Propose(inputs, drafts);
  EXPECT_EQ(drafts[0].tokens, (Tokens{4, 2}));
  EXPECT_EQ(drafts[1].tokens, (Tokens{9}));
  EXPECT_TRUE(drafts[2].tokens.empty());
}

// A long prompt with a repeated tail: the scan still finds the earliest copy.
TEST(NgramProposer, LongContext) {
  std::mt19937 rng(7);
  Tokens t(100000);
  for (auto& x : t) x = static_cast<int32_t>(rng() % 50000);
  const Tokens tail = {t[500], t[501], t[502], t[503]};
  t.insert(t.end(), tail.begin(), tail.end());
  EXPECT_EQ(Lookup(t, 2, 4, 3), (Tokens{t[504], t[505], t[506]}));
  EXPECT_EQ(Lookup(t, 2, 4, 3), BruteForceLookup(t, 2, 4, 3));
}

}  // namespace
}  // namespace ember::spec
