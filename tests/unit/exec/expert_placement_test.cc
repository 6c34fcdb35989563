// ExpertPlacement: the contiguous layout, explicit maps and every refusal, and the check against a
// model's shape.
#include "exec/expert_placement.h"

#include <gtest/gtest.h>

#include <vector>

namespace ember::exec {
namespace {

using Ranks = std::vector<int32_t>;

TEST(ExpertPlacementTest, ContiguousGivesEachRankABlockOfExperts) {
  auto p = ExpertPlacement::Contiguous(8, 4);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->experts_per_rank(), 2);
  for (int64_t layer : {0, 5, 61}) {
    EXPECT_EQ(Ranks(p->ranks(layer).begin(), p->ranks(layer).end()), (Ranks{0, 0, 1, 1, 2, 2, 3, 3}));
  }
  EXPECT_EQ(p->experts_of(3, 2), (Ranks{4, 5}));
  EXPECT_EQ(p->rank_of(7, 7), 3);
  EXPECT_TRUE(p->is_contiguous());
  EXPECT_TRUE(p->listed_layers().empty());
  auto one = ExpertPlacement::Contiguous(5, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->experts_of(0, 0), (Ranks{0, 1, 2, 3, 4}));
}

TEST(ExpertPlacementTest, RefusesSizesThatDoNotSplitEvenly) {
  auto uneven = ExpertPlacement::Contiguous(10, 4);
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.status().message().find("10 experts do not split evenly over 4"), std::string::npos)
      << uneven.status().message();
  EXPECT_FALSE(ExpertPlacement::Contiguous(8, 0).ok());
  EXPECT_FALSE(ExpertPlacement::Contiguous(0, 1).ok());
}

TEST(ExpertPlacementTest, LayerListsOverrideTheDefault) {
  std::vector<Ranks> layers(4);
  layers[3] = {1, 0, 1, 0};
  auto p = ExpertPlacement::Create(4, 2, {0, 0, 1, 1}, layers, /*num_layers=*/6);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(Ranks(p->ranks(3).begin(), p->ranks(3).end()), (Ranks{1, 0, 1, 0}));
  EXPECT_EQ(Ranks(p->ranks(2).begin(), p->ranks(2).end()), (Ranks{0, 0, 1, 1}));
  EXPECT_EQ(Ranks(p->ranks(5).begin(), p->ranks(5).end()), (Ranks{0, 0, 1, 1}));
  EXPECT_EQ(p->experts_of(3, 0), (Ranks{1, 3}));
  EXPECT_EQ(p->listed_layers(), (std::vector<int64_t>{3}));
  EXPECT_FALSE(p->is_contiguous());
  EXPECT_EQ(p->num_layers(), 6);
}

TEST(ExpertPlacementTest, RefusesBadListsNamingTheProblem) {
  const auto message = [](Ranks default_ranks, std::vector<Ranks> layers = {}, int64_t num_layers = 0) {
    auto p = ExpertPlacement::Create(4, 2, std::move(default_ranks), std::move(layers), num_layers);
    EXPECT_FALSE(p.ok());
    return p.ok() ? std::string() : p.status().message();
  };
  EXPECT_EQ(message({0, 0, 1}), "expert placement, default: 3 ranks listed, one per expert needs 4");
  EXPECT_EQ(message({0, 0, 1, 2}), "expert placement, default: expert 3 is on rank 2, outside [0, 2)");
  EXPECT_EQ(message({0, 0, 0, 1}),
            "expert placement, default: rank 0 holds 3 experts; every rank must hold E / N = 2 so that expert memory "
            "is the same on every rank");
  EXPECT_EQ(message({0, 0, 1, 1}, {{}, {1, 1, 1, 1}}),
            "expert placement, layer 1: rank 0 holds 0 experts; every rank must hold E / N = 2 so that expert memory "
            "is the same on every rank");
  EXPECT_EQ(message({0, 0, 1, 1}, {{}, {}, {0, 1, 0, 1}}, 2), "expert placement: layer 2 is listed, but num_layers is 2");
}

TEST(ExpertPlacementTest, CheckModelComparesExpertsLayersAndSparseLayers) {
  std::vector<Ranks> layers(3);
  layers[2] = {1, 0, 1, 0};
  auto p = ExpertPlacement::Create(4, 2, {0, 0, 1, 1}, layers, /*num_layers=*/6);
  ASSERT_TRUE(p.ok());
  const std::vector<int32_t> moe = {1, 2, 3, 4, 5};
  EXPECT_TRUE(p->CheckModel(6, 4, moe).ok());
  EXPECT_EQ(p->CheckModel(6, 8, moe).message(), "the expert placement is for 4 experts per layer, the model has 8");
  EXPECT_EQ(p->CheckModel(7, 4, moe).message(), "the expert placement is for 6 decoder layers, the model has 7");
  EXPECT_EQ(p->CheckModel(6, 4, std::vector<int32_t>{1, 3, 4, 5}).message(),
            "the expert placement lists layer 2, which is a dense layer of the model (no routed experts)");
  EXPECT_EQ(p->CheckModel(6, 0, {}).message(),
            "an expert placement needs a mixture-of-experts model; this model has no routed experts");
  // Without num_layers, a listed layer beyond the model is caught by the layer count.
  auto unsized = ExpertPlacement::Create(4, 2, {0, 0, 1, 1}, layers);
  ASSERT_TRUE(unsized.ok());
  EXPECT_EQ(unsized->CheckModel(2, 4, std::vector<int32_t>{0, 1}).message(),
            "the expert placement lists layer 2, the model has 2 decoder layers");
}

}  // namespace
}  // namespace ember::exec
