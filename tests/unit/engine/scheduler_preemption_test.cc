// Recompute preemption under a KV pool far too small for the load: every request still gets
// exactly the tokens it would get alone, in a bounded number of steps; a request that cannot fit
// even alone fails with an error instead of preempting forever.
#include <gtest/gtest.h>

#include "engine_harness.h"

namespace ember::test {
namespace {

struct PoolCase {
  const char* name;
  bool hybrid;
  bool chunked;
  SchedulingPolicy policy;
};

class TinyPool : public ::testing::TestWithParam<PoolCase> {};

TEST_P(TinyPool, AllRequestsFinishWithTheirOwnTokens) {
  const PoolCase& p = GetParam();
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = 6;
  c.max_num_batched_tokens = 64;
  c.max_model_len = 64;
  c.enable_chunked_prefill = p.chunked;
  c.policy = p.policy;
  // Six requests of up to 47 tokens. Full: 16 usable blocks of 4 slots (one request needs up to
  // 12). Hybrid: 24 (up to 12 full + about 4 per sliding group). Together they want far more.
  const kv::KvCacheConfig kv = p.hybrid ? HybridKv(4, 25, 8) : FullOnlyKv(4, 17);
  EngineHarness h(c, kv);
  std::vector<RequestIndex> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(h.Add(Prompt(8 + 3 * i, i), 24, /*priority=*/i % 3));
  h.RunToCompletion(/*max_steps=*/400);
  EXPECT_GT(h.core().Stats().num_preemptions, 0) << "the pool should force preemptions";
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(h.result(reqs[i]).tokens, ExpectedOutput(Prompt(8 + 3 * i, i), 24, 64)) << "request " << i;
    EXPECT_EQ(h.result(reqs[i]).reason, FinishReason::kLength);
  }
  h.ExpectAllReleased();
}

INSTANTIATE_TEST_SUITE_P(Scheduler, TinyPool,
                         ::testing::Values(PoolCase{"full_fcfs", false, true, SchedulingPolicy::kFcfs},
                                           PoolCase{"full_priority", false, true, SchedulingPolicy::kPriority},
                                           PoolCase{"full_whole_prompts", false, false, SchedulingPolicy::kFcfs},
                                           PoolCase{"hybrid_fcfs", true, true, SchedulingPolicy::kFcfs},
                                           PoolCase{"hybrid_priority", true, true, SchedulingPolicy::kPriority}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(SchedulerPreemption, VictimIsTheLowestRankedRunningRequest) {
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 32;
  c.max_model_len = 64;
  c.policy = SchedulingPolicy::kPriority;
  EngineHarness h(c, FullOnlyKv(4, 13));
  std::vector<RequestIndex> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(h.Add(Prompt(6, i), 20, /*priority=*/(i * 5) % 4));
  int64_t preemptions_seen = 0;
  while (h.core().HasUnfinished()) {
    h.Step();
    for (RequestIndex victim : h.executor().last_output().preempted_reqs) {
      ++preemptions_seen;
      const Request* v = h.core().scheduler().Find(victim);
      ASSERT_NE(v, nullptr);
      for (RequestIndex r : reqs) {
        const Request* other = h.core().scheduler().Find(r);
        if (other && other->status() == RequestStatus::kRunning) {
          EXPECT_TRUE(RanksBefore(c.policy, *other, *v)) << "preempted " << victim << " but kept " << r;
        }
      }
    }
    ASSERT_LT(h.executor().num_steps(), 300);
  }
  EXPECT_GT(preemptions_seen, 0);
  h.ExpectAllReleased();
}

TEST(SchedulerPreemption, PromptLargerThanThePoolFailsCleanly) {
  for (bool chunked : {true, false}) {
    SchedulerConfig c;
    c.vocab_size = kFakeVocabSize;
    c.max_num_seqs = 4;
    c.max_num_batched_tokens = 128;
    c.max_model_len = 128;
    c.enable_chunked_prefill = chunked;
    EngineHarness h(c, FullOnlyKv(4, 8));  // 7 usable blocks: 28 token slots
    const RequestIndex big = h.Add(Prompt(40, 1), 4);
    const RequestIndex small = h.Add(Prompt(6, 2), 4);
    h.RunToCompletion(100);
    EXPECT_EQ(h.result(big).reason, FinishReason::kError) << "chunked=" << chunked;
    EXPECT_NE(h.result(big).error.find("more KV cache than the whole pool"), std::string::npos) << h.result(big).error;
    EXPECT_TRUE(h.result(big).tokens.empty());
    EXPECT_EQ(h.result(small).tokens, ExpectedOutput(Prompt(6, 2), 4, 128));
    h.ExpectAllReleased();
  }
}

TEST(SchedulerPreemption, GenerationOutgrowingThePoolFailsAfterStreaming) {
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 32;
  c.max_model_len = 128;
  EngineHarness h(c, FullOnlyKv(4, 8));  // 28 token slots
  const RequestIndex grower = h.Add(Prompt(10, 1), 100);
  const RequestIndex other = h.Add(Prompt(5, 2), 10);
  h.RunToCompletion(300);
  const RequestResult& g = h.result(grower);
  EXPECT_EQ(g.reason, FinishReason::kError);
  // Everything streamed before the failure is the request's true output.
  const std::vector<int32_t> expected = ExpectedOutput(Prompt(10, 1), 100, 128);
  ASSERT_GE(g.tokens.size(), 17u);  // the pool holds 28 tokens: 10 prompt + 18 output
  EXPECT_TRUE(std::equal(g.tokens.begin(), g.tokens.end(), expected.begin()));
  EXPECT_EQ(h.result(other).tokens, ExpectedOutput(Prompt(5, 2), 10, 128));
  h.ExpectAllReleased();
}

}  // namespace
}  // namespace ember::test
