// The tiny DSpark fixtures of tests/golden/dspark (scripts/dspark/make_fixture.py): a drafter in
// the checkpoint layout, the made-up target's embedding and lm_head, the context features and the
// torch reference's outputs. Shared by the DSpark test files.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtypes.h"
#include "formats/safetensors.h"
#include "model/linear.h"
#include "spec/dspark/drafter.h"
#include "support/source_dir.h"

namespace ember::spec::dspark::test {

inline std::string FixtureDir(const char* name) {
  return std::string(EMBER_SOURCE_DIR) + "/tests/golden/dspark/" + name;
}

// Every element of a bf16/f32/i32 tensor as float.
inline std::vector<float> ReadFloats(const SafetensorsFile& file, const std::string& name) {
  const SafetensorTensor* t = file.Find(name);
  EMBER_CHECK(t != nullptr, "{} has no tensor {}", file.path(), name);
  std::vector<float> out(t->view.NumElements());
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t->dtype) {
      case DType::kF32: out[i] = t->view.As<float>()[i]; break;
      case DType::kBF16: out[i] = BF16ToF32(t->view.As<uint16_t>()[i]); break;
      case DType::kI32: out[i] = static_cast<float>(t->view.As<int32_t>()[i]); break;
      default: EMBER_CHECK(false, "tensor {} has an unexpected dtype", name);
    }
  }
  return out;
}

inline std::vector<int32_t> ReadInts(const SafetensorsFile& file, const std::string& name) {
  std::vector<float> f = ReadFloats(file, name);
  return std::vector<int32_t>(f.begin(), f.end());
}

inline std::unique_ptr<SafetensorsFile> OpenOrDie(const std::string& path) {
  auto file = SafetensorsFile::Open(path);
  EMBER_CHECK(file.ok(), "{}", file.status().ToString());
  return std::move(*file);
}

inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  EMBER_CHECK(in.good(), "cannot read {}", path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

// One fixture directory, loaded: the drafter over the fixture target's embedding and lm_head.
struct Fixture {
  std::string dir;
  std::unique_ptr<SafetensorsFile> target;
  Linear embed, lm_head;
  std::unique_ptr<DSparkDrafter> drafter;
  std::unique_ptr<SafetensorsFile> inputs, expected;
  std::vector<float> features;  // [T, width]
  int64_t width = 0;             // the drafter's feature_width (kept: tests may move the drafter out)
  nlohmann::json cases;

  explicit Fixture(const char* name) : dir(FixtureDir(name)) {
    target = OpenOrDie(dir + "/target.safetensors");
    embed = Linear::Dense(target->Find("embed_tokens.weight")->view);
    lm_head = Linear::Dense(target->Find("lm_head.weight")->view);
    auto config = LoadDSparkConfig(dir);
    EMBER_CHECK(config.ok(), "{}", config.status().ToString());
    auto weights = LoadDSparkWeights(dir, *config);
    EMBER_CHECK(weights.ok(), "{}", weights.status().ToString());
    auto created = DSparkDrafter::Create(*config, std::move(*weights), SharedTargetWeights::FromTable(&embed, &lm_head));
    EMBER_CHECK(created.ok(), "{}", created.status().ToString());
    drafter = std::move(*created);
    inputs = OpenOrDie(dir + "/inputs.safetensors");
    expected = OpenOrDie(dir + "/expected.safetensors");
    features = ReadFloats(*inputs, "context_features");
    width = drafter->feature_width();
    cases = ReadJson(dir + "/cases.json");
  }

  int64_t num_positions() const { return static_cast<int64_t>(features.size()) / width; }
  const float* feature_row(int64_t position) const { return features.data() + position * width; }

  // Projects every fixture position into `context` and runs one block of the full block size
  // from `anchor` after them; the drafter's rows are then ready for its MarkovStage.
  void ForwardBlockAfterAllPositions(int32_t anchor, DSparkContext& context) const {
    const int64_t s = num_positions();
    drafter->AppendContext(feature_row(0), s, context);
    std::vector<DSparkDrafter::Block> blocks = {{&context, anchor, s, drafter->config().block_size}};
    drafter->ForwardBlocks(blocks);
  }
};

}  // namespace ember::spec::dspark::test
