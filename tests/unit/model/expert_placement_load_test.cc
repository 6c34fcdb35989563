// --expert-placement at load time (LoadOptions::expert_placement): accepted where it fits the
// model, refused with a message naming what differs, and refused for models without experts.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "model/causal_lm.h"
#include "support/source_dir.h"

namespace ember {
namespace {

const std::string kGolden = std::string(EMBER_SOURCE_DIR) + "/tests/golden/";

LoadOptions WithPlacement(Expected<exec::ExpertPlacement> placement) {
  EXPECT_TRUE(placement.ok());
  LoadOptions options;
  options.expert_placement = std::make_shared<const exec::ExpertPlacement>(std::move(*placement));
  return options;
}

std::string LoadError(const std::string& model, const LoadOptions& options) {
  auto loaded = LoadModel(kGolden + model, options);
  EXPECT_FALSE(loaded.ok()) << model;
  return loaded.ok() ? std::string() : loaded.status().message();
}

TEST(ExpertPlacementLoadTest, ModelInfoNamesTheSparseLayers) {
  auto a = LoadModel(kGolden + "muse_spark/tiny_a");
  auto b = LoadModel(kGolden + "muse_spark/tiny_b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->info().num_experts, 8);
  EXPECT_EQ((*a)->info().num_experts_per_token, 2);
  EXPECT_EQ((*a)->info().moe_layers, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ((*b)->info().num_experts, 16);
  EXPECT_EQ((*b)->info().moe_layers, (std::vector<int32_t>{1, 2, 3, 4, 5}));  // layer 0 is dense
}

TEST(ExpertPlacementLoadTest, AFittingPlacementLoadsAndTravelsWithTheOptions) {
  LoadOptions options = WithPlacement(exec::ExpertPlacement::Contiguous(8, 4));
  auto loaded = LoadModel(kGolden + "muse_spark/tiny_a", options);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
}

TEST(ExpertPlacementLoadTest, RefusesPlacementsThatDoNotFit) {
  EXPECT_EQ(LoadError("muse_spark/tiny_a", WithPlacement(exec::ExpertPlacement::Contiguous(16, 4))),
            "--expert-placement does not fit this muse_spark model: the expert placement is for 16 experts per "
            "layer, the model has 8");
  std::vector<std::vector<int32_t>> layers(1);
  layers[0] = std::vector<int32_t>{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1};
  auto on_dense_layer = exec::ExpertPlacement::Create(16, 2, {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, layers);
  EXPECT_EQ(LoadError("muse_spark/tiny_b", WithPlacement(std::move(on_dense_layer))),
            "--expert-placement does not fit this muse_spark model: the expert placement lists layer 0, which is a "
            "dense layer of the model (no routed experts)");
  auto too_many_layers = exec::ExpertPlacement::Create(8, 2, {0, 0, 0, 0, 1, 1, 1, 1}, {}, /*num_layers=*/62);
  EXPECT_EQ(LoadError("muse_spark/tiny_a", WithPlacement(std::move(too_many_layers))),
            "--expert-placement does not fit this muse_spark model: the expert placement is for 62 decoder layers, "
            "the model has 6");
  EXPECT_EQ(LoadError("hf_dense/llama", WithPlacement(exec::ExpertPlacement::Contiguous(8, 2))),
            "--expert-placement does not fit this llama model: an expert placement needs a mixture-of-experts model; "
            "this model has no routed experts");
}

}  // namespace
}  // namespace ember
