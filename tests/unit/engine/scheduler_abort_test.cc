// Abort at any point in a request's life frees everything and produces one final event.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine_harness.h"

namespace ember::test {
namespace {

bool Contains(const std::vector<RequestIndex>& v, RequestIndex r) { return std::find(v.begin(), v.end(), r) != v.end(); }

TEST(SchedulerAbort, WaitingMidPrefillAndDecoding) {
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = 2;
  c.max_num_batched_tokens = 8;
  c.max_model_len = 128;
  EngineHarness h(c, FullOnlyKv(4, 64));
  const RequestIndex decoding = h.Add(Prompt(4, 1), 50);
  const RequestIndex prefilling = h.Add(Prompt(60, 2), 5);
  const RequestIndex waiting = h.Add(Prompt(5, 3), 5);  // max_num_seqs keeps it waiting
  const RequestIndex survivor = h.Add(Prompt(5, 4), 5);
  h.Step();
  h.Step();
  h.Step();
  ASSERT_EQ(h.core().scheduler().Find(waiting)->status(), RequestStatus::kWaiting);
  const Request* p = h.core().scheduler().Find(prefilling);
  ASSERT_EQ(p->status(), RequestStatus::kRunning);
  ASSERT_GT(p->num_computed_tokens(), 0);
  ASSERT_LT(p->num_computed_tokens(), 60);
  ASSERT_GT(h.result(decoding).tokens.size(), 0u);

  EXPECT_TRUE(h.core().AbortRequest(waiting));
  EXPECT_TRUE(h.core().AbortRequest(prefilling));
  EXPECT_TRUE(h.core().AbortRequest(decoding));
  EXPECT_FALSE(h.core().AbortRequest(decoding)) << "already finished";
  EXPECT_FALSE(h.core().AbortRequest(999)) << "unknown";
  EXPECT_EQ(h.core().Stats().num_running, 0);
  EXPECT_EQ(h.core().kv_cache().usage(), 0.0);

  h.Step();
  // The runner hears about the two it knew; the waiting one it never saw.
  const SchedulerOutput& out = h.executor().last_output();
  EXPECT_TRUE(Contains(out.finished_reqs, prefilling));
  EXPECT_TRUE(Contains(out.finished_reqs, decoding));
  EXPECT_FALSE(Contains(out.finished_reqs, waiting));
  for (RequestIndex r : {waiting, prefilling, decoding}) {
    EXPECT_EQ(h.result(r).reason, FinishReason::kAbort);
    EXPECT_EQ(h.result(r).num_final_events, 1);
  }
  h.RunToCompletion(100);
  EXPECT_EQ(h.result(survivor).tokens, ExpectedOutput(Prompt(5, 4), 5, 128));
  h.ExpectAllReleased();
}

TEST(SchedulerAbort, AbortBetweenScheduleAndUpdateDropsTheStepsTokens) {
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = 2;
  c.max_num_batched_tokens = 16;
  c.max_model_len = 64;
  kv::KvCacheManager kv(FullOnlyKv(4, 32), {});
  Scheduler s(c, &kv);
  RequestInput in;
  in.prompt_token_ids = Prompt(5, 1);
  ASSERT_TRUE(s.Add(7, std::move(in)).ok());
  const SchedulerOutput out = s.Schedule();
  ASSERT_EQ(out.scheduled_reqs.size(), 1u);
  EXPECT_TRUE(s.Abort(7));
  ModelRunnerOutput result;
  result.step_id = out.step_id;
  result.reqs = {7};
  result.sampled_token_ids = {{123}};
  const std::vector<RequestOutput> events = s.UpdateFromOutput(out, result);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(events[0].new_token_ids.empty());
  EXPECT_EQ(kv.usage(), 0.0);
  EXPECT_EQ(s.Schedule().finished_reqs, std::vector<RequestIndex>{7});
}

}  // namespace
}  // namespace ember::test
