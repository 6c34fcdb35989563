// The expert load and placement files: round trips, the documented defaults, and refusals that
// name the file and field.
#include "exec/expert_json.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace ember::exec {
namespace {

using Ranks = std::vector<int32_t>;

std::string ParseError(const std::string& text) {
  auto p = ParseExpertPlacement(text, "p.json");
  EXPECT_FALSE(p.ok()) << text;
  return p.ok() ? std::string() : p.status().message();
}

TEST(ExpertJsonTest, PlacementRoundTrips) {
  std::vector<Ranks> layers(3);
  layers[2] = {1, 0, 1, 0};
  auto p = ExpertPlacement::Create(4, 2, {0, 1, 0, 1}, layers, 4);
  ASSERT_TRUE(p.ok());
  const std::string json = ExpertPlacementToJson(*p);
  EXPECT_EQ(json, "{\"num_experts\":4,\"ep_size\":2,\"num_layers\":4,\"default\":[0,1,0,1],\"layers\":{\"2\":[1,0,1,0]}}\n");
  auto back = ParseExpertPlacement(json, "p.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, *p);
}

TEST(ExpertJsonTest, PlacementWithoutDefaultIsContiguous) {
  auto p = ParseExpertPlacement(R"({"num_experts": 6, "ep_size": 3, "layers": {"10": [2,2,1,1,0,0]}})", "p.json");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(Ranks(p->ranks(0).begin(), p->ranks(0).end()), (Ranks{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(Ranks(p->ranks(10).begin(), p->ranks(10).end()), (Ranks{2, 2, 1, 1, 0, 0}));
  EXPECT_EQ(p->num_layers(), 0);
}

TEST(ExpertJsonTest, PlacementRefusals) {
  EXPECT_EQ(ParseError("[1]"), "p.json: not a JSON object");
  EXPECT_EQ(ParseError(R"({"ep_size": 2})"), "p.json: required field 'num_experts' is missing");
  EXPECT_NE(ParseError(R"({"num_experts": 4, "ep_size": 2, "layer": {}})").find("layer"), std::string::npos);
  EXPECT_EQ(ParseError(R"({"num_experts": 4, "ep_size": 3})"),
            "4 experts do not split evenly over 3 expert-parallel ranks: every rank holds the same number of experts "
            "(E / N), so N must divide E");
  EXPECT_EQ(ParseError(R"({"num_experts": 4, "ep_size": 2, "default": [0, 1, 2, 0]})"),
            "p.json: default[2] must be an integer in [0, 2), got 2");
  EXPECT_EQ(ParseError(R"({"num_experts": 4, "ep_size": 2, "layers": {"01": [0, 0, 1, 1]}})"),
            "p.json: layers key \"01\" is not a decoder layer number");
  EXPECT_EQ(ParseError(R"({"num_experts": 4, "ep_size": 2, "layers": {"-1": [0, 0, 1, 1]}})"),
            "p.json: layers key \"-1\" is not a decoder layer number");
  EXPECT_EQ(ParseError(R"({"num_experts": 4, "ep_size": 2, "layers": {"3": []}})"), "p.json: layers.3 is empty");
  EXPECT_EQ(ParseError(R"({"num_experts": 4, "ep_size": 2, "layers": {"3": [0, 0, 0, 1]}})"),
            "p.json: expert placement, layer 3: rank 0 holds 3 experts; every rank must hold E / N = 2 so that "
            "expert memory is the same on every rank");
  EXPECT_EQ(ParseError(R"({"num_experts": 4, "ep_size": 2, "num_layers": 2, "layers": {"3": [0, 0, 1, 1]}})"),
            "p.json: expert placement: layer 3 is listed, but num_layers is 2");
}

TEST(ExpertJsonTest, LoadRoundTripsInLayerOrder) {
  ExpertLoad load;
  load.num_experts = 3;
  load.top_k = 2;
  load.layers = {2, 10};
  load.tokens = {5, 0, 1, 7, 7, 0};
  const std::string json = ExpertLoadToJson(load, 12);
  EXPECT_EQ(json, "{\"num_experts\":3,\"top_k\":2,\"num_layers\":12,\"layers\":{\"2\":[5,0,1],\"10\":[7,7,0]}}\n");
  auto back = ParseExpertLoad(json, "c.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->num_layers, 12);
  EXPECT_EQ(back->load.layers, load.layers);  // "10" sorts before "2" as text; rows stay in layer order
  EXPECT_EQ(back->load.tokens, load.tokens);
  EXPECT_EQ(back->load.top_k, 2);
}

TEST(ExpertJsonTest, LoadRefusals) {
  const auto error = [](const std::string& text) {
    auto l = ParseExpertLoad(text, "c.json");
    EXPECT_FALSE(l.ok()) << text;
    return l.ok() ? std::string() : l.status().message();
  };
  EXPECT_EQ(error(R"({"num_experts": 2})"), "c.json: required field 'layers' is missing");
  EXPECT_EQ(error(R"({"num_experts": 2, "layers": {"0": [1, 2, 3]}})"), "c.json: layers.0 has 3 counts, num_experts is 2");
  EXPECT_EQ(error(R"({"num_experts": 2, "layers": {"0": [1, -2]}})"),
            "c.json: layers.0[1] must be an integer in [0, 9223372036854775807), got -2");
  EXPECT_EQ(error(R"({"num_experts": 2, "num_layers": 1, "layers": {"1": [1, 2]}})"),
            "c.json: layers.1: layer 1 is not below num_layers 1");
}

TEST(ExpertJsonTest, FilesRoundTrip) {
  const std::string dir = ::testing::TempDir();
  auto p = ExpertPlacement::Contiguous(4, 2);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(WriteExpertPlacementFile(dir + "/placement.json", *p).ok());
  auto read = ReadExpertPlacementFile(dir + "/placement.json");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(*read, *p);
  auto missing = ReadExpertLoadFile(dir + "/no-such-file.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "cannot read " + dir + "/no-such-file.json");
  EXPECT_FALSE(WriteExpertLoadFile(dir + "/no-such-dir/c.json", ExpertLoad{}, 0).ok());
  std::filesystem::remove(dir + "/placement.json");
}

}  // namespace
}  // namespace ember::exec
