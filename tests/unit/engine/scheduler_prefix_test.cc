// Prefix caching through the scheduler: a repeated prompt computes only its tail.
#include <gtest/gtest.h>

#include "engine_harness.h"

namespace ember::test {
namespace {

struct KvCase {
  const char* name;
  bool hybrid;
};

class PrefixReuse : public ::testing::TestWithParam<KvCase> {
 protected:
  kv::KvCacheConfig Kv() const { return GetParam().hybrid ? HybridKv(4, 128, 8) : FullOnlyKv(4, 128); }
  static SchedulerConfig Config() { return FakeModelConfig(4, 64, 128); }
};

TEST_P(PrefixReuse, SecondIdenticalPromptComputesOnlyTheLastPartialBlock) {
  EngineHarness h(Config(), Kv());
  const std::vector<int32_t> prompt = Prompt(42, 9);  // 10 full blocks of 4 + 2 tokens
  const RequestIndex first = h.Add(prompt, 3);
  h.RunToCompletion(50);
  const int64_t tokens_first = h.executor().total_tokens();
  EXPECT_EQ(tokens_first, 42 + 2);  // prompt, then two decodes

  const RequestIndex second = h.Add(prompt, 3);
  h.Step();
  const SchedulerOutput& out = h.executor().last_output();
  ASSERT_EQ(out.new_reqs.size(), 1u);
  EXPECT_EQ(out.new_reqs[0].num_computed_tokens, 40);
  EXPECT_EQ(out.num_scheduled_tokens[0], 2);
  h.RunToCompletion(50);
  EXPECT_EQ(h.executor().total_tokens() - tokens_first, 2 + 2);
  EXPECT_EQ(h.result(second).tokens, h.result(first).tokens);
  EXPECT_EQ(h.result(second).final_event.num_cached_tokens, 40);
  EXPECT_EQ(h.result(first).final_event.num_cached_tokens, 0);
  EXPECT_EQ(h.core().Stats().prefix_cache.hits, 40);
  h.ExpectAllReleased();
}

TEST_P(PrefixReuse, BlockAlignedPromptRecomputesItsLastBlock) {
  EngineHarness h(Config(), Kv());
  const std::vector<int32_t> prompt = Prompt(40, 3);
  h.Add(prompt, 1);
  h.RunToCompletion(50);
  h.Add(prompt, 1);
  h.Step();
  // A hit must leave at least one token to compute, so the last full block is recomputed.
  EXPECT_EQ(h.executor().last_output().new_reqs[0].num_computed_tokens, 36);
  EXPECT_EQ(h.executor().last_output().total_num_scheduled_tokens, 4);
  h.RunToCompletion(50);
  h.ExpectAllReleased();
}

TEST_P(PrefixReuse, ConcurrentRequestReusesBlocksOfARunningOne) {
  EngineHarness h(Config(), Kv());
  const std::vector<int32_t> prompt = Prompt(42, 5);
  const RequestIndex first = h.Add(prompt, 10);
  h.Step();  // the whole prompt fits one step; its full blocks are registered after it
  const RequestIndex second = h.Add(prompt, 10);
  h.Step();
  const SchedulerOutput& out = h.executor().last_output();
  ASSERT_EQ(out.new_reqs.size(), 1u);
  EXPECT_EQ(out.new_reqs[0].num_computed_tokens, 40);
  h.RunToCompletion(50);
  EXPECT_EQ(h.result(second).tokens, h.result(first).tokens);
  h.ExpectAllReleased();
}

TEST_P(PrefixReuse, DifferentCacheSaltSharesNothing) {
  EngineHarness h(Config(), Kv());
  RequestInput a;
  a.prompt_token_ids = Prompt(42, 9);
  a.cache_salt_key = 1;
  h.Add(a);
  h.RunToCompletion(50);
  RequestInput b = a;
  b.cache_salt_key = 2;
  h.Add(b);
  h.Step();
  EXPECT_EQ(h.executor().last_output().new_reqs[0].num_computed_tokens, 0);
  h.RunToCompletion(50);
  h.ExpectAllReleased();
}

INSTANTIATE_TEST_SUITE_P(Scheduler, PrefixReuse, ::testing::Values(KvCase{"full", false}, KvCase{"hybrid", true}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ember::test
