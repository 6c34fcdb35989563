// InProcessEngineClient: server threads submit and abort while the engine thread steps.
#include "engine/engine_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "engine_harness.h"

namespace ember::test {
namespace {

TEST(InProcessEngineClient, ConcurrentSubmitAndAbortEachRequestFinishesOnce) {
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 64;
  c.max_model_len = 64;
  FakeExecutor executor(c, 1, 4);
  auto core = EngineCore::Create({c, FullOnlyKv(4, 64), {}}, &executor);
  ASSERT_TRUE(core.ok()) << core.status().ToString();
  InProcessEngineClient client(core->get());

  constexpr int kPerThread = 40;
  std::atomic<int> submitted{0};
  auto submitter = [&](int thread) {
    for (int i = 0; i < kPerThread; ++i) {
      RequestInput in;
      // Every tenth request is invalid and must come back as an error event.
      if (i % 10 != 9) in.prompt_token_ids = Prompt(5 + i % 20, thread * 1000 + i);
      in.sampling.max_tokens = 1 + i % 7;
      const RequestIndex idx = client.Submit(std::move(in));
      if (i % 6 == 0) client.Abort(idx);
      submitted.fetch_add(1);
    }
  };
  std::thread a(submitter, 0), b(submitter, 1);

  std::map<RequestIndex, int> finals;
  std::map<RequestIndex, FinishReason> reasons;
  int rejected = 0;
  while (static_cast<int>(finals.size()) < 2 * kPerThread) {
    client.WaitForWork(std::chrono::milliseconds(5));
    for (const RequestOutput& e : client.Step()) {
      if (!e.finished) continue;
      ++finals[e.req];
      reasons[e.req] = e.finish_reason;
      if (e.finish_reason == FinishReason::kError) {
        EXPECT_NE(e.error.find("prompt is empty"), std::string::npos) << e.error;
        ++rejected;
      }
    }
  }
  a.join();
  b.join();
  for (const auto& [idx, n] : finals) EXPECT_EQ(n, 1) << "request " << idx;
  EXPECT_EQ(rejected, 2 * 4);
  while ((*core)->HasUnfinished()) client.Step();  // tell the runner about the last finished ones
  EXPECT_EQ((*core)->kv_cache().usage(), 0.0);
  EXPECT_EQ(executor.num_runner_states(), 0u);
}

// Offline tools loop `while (client.HasUnfinished()) client.Step();` right after Submit(): a
// submission not yet drained must count as unfinished, or the loop would end before it starts.
TEST(InProcessEngineClient, ASubmissionIsUnfinishedUntilItsFinalEvent) {
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 64;
  c.max_model_len = 64;
  FakeExecutor executor(c, 1, 4);
  auto core = EngineCore::Create({c, FullOnlyKv(4, 64), {}}, &executor);
  ASSERT_TRUE(core.ok()) << core.status().ToString();
  InProcessEngineClient client(core->get());
  EXPECT_FALSE(client.HasUnfinished());
  RequestInput in;
  in.prompt_token_ids = Prompt(5, 1);
  in.sampling.max_tokens = 3;
  const RequestIndex idx = client.Submit(std::move(in));
  EXPECT_TRUE(client.HasUnfinished());
  int tokens = 0, finals = 0;
  while (client.HasUnfinished()) {
    for (const RequestOutput& e : client.Step()) {
      EXPECT_EQ(e.req, idx);
      tokens += static_cast<int>(e.new_token_ids.size());
      finals += e.finished ? 1 : 0;
    }
  }
  EXPECT_EQ(tokens, 3);
  EXPECT_EQ(finals, 1);
  EXPECT_EQ(executor.num_runner_states(), 0u);
}

}  // namespace
}  // namespace ember::test
