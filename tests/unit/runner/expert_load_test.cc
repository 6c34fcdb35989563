// The engine's expert load on the tiny Muse Spark model: each MoE layer's counts sum to the
// tokens computed times top_k, requests' counts add up whatever they share a step with (routing
// is batch invariant), startup measurements are not counted, and dense models count nothing.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "local_engine_support.h"
#include "support/source_dir.h"

namespace ember {
namespace {

using test::kTinyMuseA;

struct Prompt {
  std::vector<int32_t> ids;
  int32_t max_tokens = 0;
};

std::vector<int32_t> Ids(int64_t n, int32_t first) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((first + 37 * i) % 512);
  return ids;
}

// Runs `prompts` to the end (greedy, ignoring EOS) on a new engine and returns its expert load.
exec::ExpertLoad RunToEnd(const std::vector<Prompt>& prompts, EngineOptions options) {
  auto engine = test::MakeEngine(kTinyMuseA, options);
  if (!engine) return {};
  EngineClient& client = engine->client();
  for (const Prompt& p : prompts) {
    RequestInput input;
    input.prompt_token_ids = p.ids;
    input.sampling.temperature = 0.0f;
    input.sampling.max_tokens = p.max_tokens;
    input.sampling.ignore_eos = true;
    client.Submit(std::move(input));
  }
  while (client.HasUnfinished()) client.Step();
  exec::ExpertLoad load;
  client.ReadExpertLoad(&load);
  return load;
}

EngineOptions NoPrefixCache() {
  EngineOptions o = test::SmallChunkedEngine();
  o.enable_prefix_caching = false;  // every prompt token is computed
  return o;
}

TEST(EngineExpertLoadTest, EachLayerSumsToComputedTokensTimesTopK) {
  // A request computes its prompt and every output token but the last: 5 + 3 and 40 + 6.
  const exec::ExpertLoad load = RunToEnd({{Ids(5, 1), 4}, {Ids(40, 2), 7}}, NoPrefixCache());
  ASSERT_EQ(load.layers, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(load.num_experts, 8);
  EXPECT_EQ(load.top_k, 2);
  for (size_t i = 0; i < load.num_rows(); ++i) {
    const std::span<const int64_t> row = load.row(i);
    EXPECT_EQ(std::accumulate(row.begin(), row.end(), int64_t{0}), (8 + 46) * 2) << "layer " << load.layers[i];
  }
}

TEST(EngineExpertLoadTest, RequestsAddUpWhateverTheySharedAStepWith) {
  const Prompt a{Ids(23, 3), 5}, b{Ids(9, 4), 9}, c{Ids(50, 5), 2};
  const exec::ExpertLoad together = RunToEnd({a, b, c}, NoPrefixCache());
  exec::ExpertLoad apart;
  for (const Prompt& p : {a, b, c}) apart.Add(RunToEnd({p}, NoPrefixCache()));
  ASSERT_FALSE(together.empty());
  EXPECT_EQ(together.tokens, apart.tokens);
  EXPECT_EQ(together.layers, apart.layers);
  // Not a trivially even load: the tiny model's router prefers some experts.
  EXPECT_GT(exec::MaxOverMean(together.row(0)), 1.0);
}

TEST(EngineExpertLoadTest, StartupStepCostMeasurementIsNotCounted) {
  EngineOptions o = NoPrefixCache();
  o.speculative_config = R"({"method": "ngram", "num_speculative_tokens": 2})";  // adaptive: measures steps
  auto engine = test::MakeEngine(kTinyMuseA, o);
  ASSERT_NE(engine, nullptr);
  exec::ExpertLoad load;
  engine->client().ReadExpertLoad(&load);
  EXPECT_TRUE(load.empty());
}

TEST(EngineExpertLoadTest, DenseModelsCountNothing) {
  const exec::ExpertLoad load = [] {
    auto engine = test::MakeEngine(std::string(EMBER_SOURCE_DIR) + "/tests/golden/hf_dense/llama", EngineOptions{});
    if (!engine) return exec::ExpertLoad{};
    RequestInput input;
    input.prompt_token_ids = {1, 2, 3};
    input.sampling.max_tokens = 2;
    input.sampling.ignore_eos = true;
    engine->client().Submit(std::move(input));
    while (engine->client().HasUnfinished()) engine->client().Step();
    exec::ExpertLoad read;
    read.num_experts = 99;  // overwritten
    engine->client().ReadExpertLoad(&read);
    return read;
  }();
  EXPECT_TRUE(load.empty());
  EXPECT_EQ(load.num_experts, 0);
}

}  // namespace
}  // namespace ember
