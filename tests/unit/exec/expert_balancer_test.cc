// The greedy balancer: a worked example, the slot limit, ties, and layers it did not count.
#include "exec/expert_balancer.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace ember::exec {
namespace {

using Counts = std::vector<int64_t>;
using Ranks = std::vector<int32_t>;

TEST(ExpertBalancerTest, SpreadsAHotBlockOfExperts) {
  // Contiguous: rank 0 gets 8 + 7 + 6 + 5 = 26 tokens, rank 1 gets 4 (max / mean 26 / 15).
  // Greedy: 8 -> r0, 7 -> r1, 6 -> r1 (7 < 8), 5 -> r0 (13 = 13, lower rank), then the ones alternate.
  const Counts tokens = {8, 7, 6, 5, 1, 1, 1, 1};
  auto ranks = BalanceLayer(tokens, 2);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  EXPECT_EQ(*ranks, (Ranks{0, 1, 1, 0, 0, 1, 0, 1}));
  auto balanced = ExpertPlacement::Create(8, 2, *ranks, {});
  auto contiguous = ExpertPlacement::Contiguous(8, 2);
  ASSERT_TRUE(balanced.ok() && contiguous.ok());
  EXPECT_EQ(RankTokens(tokens, *balanced, 0), (Counts{15, 15}));
  EXPECT_DOUBLE_EQ(MaxOverMean(RankTokens(tokens, *contiguous, 0)), 26.0 / 15.0);
}

TEST(ExpertBalancerTest, NeverGivesARankMoreThanItsSlots) {
  // Two slots per rank: the hot expert's rank takes the coldest one, not a second warm one.
  auto ranks = BalanceLayer(Counts{100, 90, 80, 1}, 2);
  ASSERT_TRUE(ranks.ok());
  EXPECT_EQ(*ranks, (Ranks{0, 1, 1, 0}));
  // Random loads: always a valid placement (E / N per rank), and the same answer twice.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int64_t> dist(0, 1000);
  for (int trial = 0; trial < 20; ++trial) {
    Counts tokens(64);
    for (int64_t& t : tokens) t = dist(rng) * (trial % 3 == 0 ? 1 : dist(rng) % 4);
    auto a = BalanceLayer(tokens, 8);
    ASSERT_TRUE(a.ok());
    EXPECT_TRUE(CheckRankList(*a, 64, 8, "balanced").ok());
    EXPECT_EQ(*a, *BalanceLayer(tokens, 8));
  }
}

TEST(ExpertBalancerTest, TiesGoToLowerExpertsAndLowerRanks) {
  // Nothing measured: every rank stays at 0, so the lowest rank fills first: the contiguous layout.
  auto idle = BalanceLayer(Counts{0, 0, 0, 0, 0, 0}, 3);
  ASSERT_TRUE(idle.ok());
  EXPECT_EQ(*idle, (Ranks{0, 0, 1, 1, 2, 2}));
  // Equal loads alternate: each expert goes to the rank that has the least so far.
  auto even = BalanceLayer(Counts{5, 5, 5, 5, 5, 5}, 3);
  ASSERT_TRUE(even.ok());
  EXPECT_EQ(*even, (Ranks{0, 1, 2, 0, 1, 2}));
}

TEST(ExpertBalancerTest, RefusesASizeThatDoesNotDivide) {
  EXPECT_FALSE(BalanceLayer(Counts{1, 2, 3}, 2).ok());
  ExpertLoad load;
  load.num_experts = 6;
  load.layers = {0};
  load.tokens = Counts(6, 1);
  EXPECT_FALSE(BalancePlacement(load, 4).ok());
}

TEST(ExpertBalancerTest, PlacementListsTheCountedLayersOnly) {
  ExpertLoad load;
  load.num_experts = 4;
  load.top_k = 1;
  load.layers = {1, 3};
  load.tokens = {9, 8, 0, 0,   // layer 1: the hot pair split
                 0, 0, 0, 0};  // layer 3: nothing measured, contiguous by the tie rule
  auto p = BalancePlacement(load, 2, /*num_layers=*/5);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->listed_layers(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(Ranks(p->ranks(1).begin(), p->ranks(1).end()), (Ranks{0, 1, 1, 0}));
  EXPECT_EQ(Ranks(p->ranks(3).begin(), p->ranks(3).end()), (Ranks{0, 0, 1, 1}));
  EXPECT_EQ(Ranks(p->ranks(0).begin(), p->ranks(0).end()), (Ranks{0, 0, 1, 1}));  // the contiguous default
  EXPECT_EQ(p->num_layers(), 5);
}

}  // namespace
}  // namespace ember::exec
