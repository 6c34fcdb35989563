#include "support/golden_logits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

namespace ember::test {

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  if (!in.good()) return {};
  in.seekg(0, std::ios::end);
  const auto bytes = static_cast<size_t>(in.tellg());
  in.seekg(0);
  std::vector<float> values(bytes / sizeof(float));
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
  return values;
}

GoldenLogits LoadGoldenLogits(const std::string& dir) {
  GoldenLogits g;
  g.dir = dir;
  std::ifstream in(g.dir + "/golden.json");
  EXPECT_TRUE(in.good()) << "missing fixture " << g.dir;
  const nlohmann::json json = nlohmann::json::parse(in);
  g.prompt_ids = json.at("prompt_ids").get<std::vector<int32_t>>();
  g.greedy_ids = json.at("greedy_ids").get<std::vector<int32_t>>();
  g.vocab_size = json.at("vocab_size").get<int64_t>();
  g.logits = ReadFloats(g.dir + "/" + json.at("logits_file").get<std::string>());
  g.greedy_logits = ReadFloats(g.dir + "/" + json.at("greedy_logits_file").get<std::string>());
  EXPECT_EQ(g.logits.size(), g.prompt_ids.size() * g.vocab_size);
  EXPECT_EQ(g.greedy_logits.size(), g.greedy_ids.size() * g.vocab_size);
  return g;
}

float WorstRelativeError(const float* ours, const float* ref, int64_t rows, int64_t vocab) {
  float worst = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    float scale = 1.0f;
    for (int64_t v = 0; v < vocab; ++v) scale = std::max(scale, std::fabs(ref[r * vocab + v]));
    for (int64_t v = 0; v < vocab; ++v) {
      worst = std::max(worst, std::fabs(ours[r * vocab + v] - ref[r * vocab + v]) / scale);
    }
  }
  return worst;
}

float WorstRowRelative(const std::vector<float>& ours, const std::vector<float>& ref, int64_t width) {
  EXPECT_EQ(ours.size(), ref.size());
  if (ours.size() != ref.size() || width <= 0) return INFINITY;
  float worst = 0.0f;
  for (size_t r = 0; r < ref.size() / width; ++r) {
    float diff = 0.0f, scale = 0.0f;
    for (int64_t j = 0; j < width; ++j) {
      diff = std::max(diff, std::abs(ours[r * width + j] - ref[r * width + j]));
      scale = std::max(scale, std::abs(ref[r * width + j]));
    }
    worst = std::max(worst, diff / std::max(scale, 1e-30f));
  }
  return worst;
}

}  // namespace ember::test
