// ExpertLoad's bookkeeping and the figures reported from it (max / mean, tokens per rank).
#include "exec/expert_load.h"

#include <gtest/gtest.h>

#include <vector>

namespace ember::exec {
namespace {

using Counts = std::vector<int64_t>;

ExpertLoad Load(std::vector<int32_t> layers, Counts tokens) {
  ExpertLoad load;
  load.num_experts = 4;
  load.top_k = 2;
  load.layers = std::move(layers);
  load.tokens = std::move(tokens);
  return load;
}

TEST(ExpertLoadTest, ShapeSetsOnceAndKeepsCounts) {
  ExpertLoad load;
  const std::vector<int32_t> layers = {1, 3};
  load.Shape(4, 2, layers);
  ASSERT_EQ(load.num_rows(), 2u);
  EXPECT_EQ(load.tokens, Counts(8, 0));
  load.row(1)[2] = 5;
  load.Shape(4, 2, layers);  // the same shape: counts kept
  EXPECT_EQ(load.row(1)[2], 5);
  load.Zero();
  EXPECT_EQ(load.tokens, Counts(8, 0));
  load.Shape(4, 2, std::vector<int32_t>{1});  // another shape: reset
  EXPECT_EQ(load.layers, (std::vector<int32_t>{1}));
  EXPECT_EQ(load.tokens.size(), 4u);
}

TEST(ExpertLoadTest, AddCopyAndDifference) {
  ExpertLoad total;
  total.Add(Load({0, 2}, {1, 2, 3, 4, 5, 6, 7, 8}));  // an empty load takes the shape
  total.Add(Load({0, 2}, {1, 1, 1, 1, 0, 0, 0, 10}));
  EXPECT_EQ(total.tokens, (Counts{2, 3, 4, 5, 5, 6, 7, 18}));
  EXPECT_EQ(total.layers, (std::vector<int32_t>{0, 2}));
  ExpertLoad copy;
  copy.CopyFrom(total);
  EXPECT_EQ(copy.tokens, total.tokens);
  EXPECT_EQ(copy.top_k, 2);
  const ExpertLoad window = Difference(total, Load({0, 2}, {1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(window.tokens, (Counts{1, 1, 1, 1, 0, 0, 0, 10}));
  EXPECT_EQ(Difference(total, ExpertLoad{}).tokens, total.tokens);
}

TEST(ExpertLoadTest, MaxOverMean) {
  EXPECT_DOUBLE_EQ(MaxOverMean(Counts{4, 0, 0, 0}), 4.0);
  EXPECT_DOUBLE_EQ(MaxOverMean(Counts{3, 3, 3}), 1.0);
  EXPECT_DOUBLE_EQ(MaxOverMean(Counts{1, 2, 3}), 1.5);
  EXPECT_DOUBLE_EQ(MaxOverMean(Counts{0, 0}), 0.0);
  EXPECT_DOUBLE_EQ(MaxOverMean(Counts{}), 0.0);
}

TEST(ExpertLoadTest, RankTokensFollowThePlacementOfTheLayer) {
  std::vector<std::vector<int32_t>> layers(2);
  layers[1] = {1, 0, 0, 1};
  auto placement = ExpertPlacement::Create(4, 2, {0, 0, 1, 1}, layers);
  ASSERT_TRUE(placement.ok());
  const Counts tokens = {10, 1, 2, 7};
  EXPECT_EQ(RankTokens(tokens, *placement, 0), (Counts{11, 9}));
  EXPECT_EQ(RankTokens(tokens, *placement, 1), (Counts{3, 17}));
}

}  // namespace
}  // namespace ember::exec
