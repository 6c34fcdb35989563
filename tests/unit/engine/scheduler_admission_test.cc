// Admission: bad requests and configurations are rejected up front with messages that say what
// to change; nothing about them reaches the scheduler's queues.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "engine_harness.h"

namespace ember::test {
namespace {

SchedulerConfig Small() {
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 64;
  c.max_model_len = 32;
  return c;
}

TEST(SchedulerAdmission, RejectsEmptyPrompt) {
  EngineHarness h(Small(), FullOnlyKv(4, 64));
  RequestInput input;
  const Status s = h.core().AddRequest(100, std::move(input));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prompt is empty"), std::string::npos) << s.message();
  EXPECT_FALSE(h.core().HasUnfinished());
}

TEST(SchedulerAdmission, PromptMustLeaveRoomForOneToken) {
  EngineHarness h(Small(), FullOnlyKv(4, 64));
  RequestInput too_long;
  too_long.prompt_token_ids = Prompt(32, 1);  // = max_model_len
  const Status s = h.core().AddRequest(100, std::move(too_long));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("32 tokens"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("max_model_len"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("at most 31"), std::string::npos) << s.message();

  // One token shorter fits, and generation stops at max_model_len.
  const RequestIndex ok = h.Add(Prompt(31, 1), /*max_tokens=*/10);
  h.RunToCompletion(100);
  EXPECT_EQ(h.result(ok).reason, FinishReason::kLength);
  EXPECT_EQ(h.result(ok).tokens, ExpectedOutput(Prompt(31, 1), 10, 32));
  EXPECT_EQ(h.result(ok).tokens.size(), 1u);
  h.ExpectAllReleased();
}

// An id the model cannot embed is refused here, for every front end, instead of reaching the
// runner (whose forward pass would fail mid-step and abort the engine).
TEST(SchedulerAdmission, RejectsTokenIdsOutsideTheVocabulary) {
  EngineHarness h(Small(), FullOnlyKv(4, 64));
  for (int32_t bad : {static_cast<int32_t>(kFakeVocabSize), 999999, -1}) {
    RequestInput input;
    input.prompt_token_ids = {1, 2, bad, 3};
    const Status s = h.core().AddRequest(100, std::move(input));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(fmt::format("token id {}", bad)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("index 2"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(std::to_string(kFakeVocabSize)), std::string::npos) << s.message();
  }
  EXPECT_FALSE(h.core().HasUnfinished());

  // The largest id is fine, and the engine goes on serving.
  const RequestIndex ok = h.Add({1, static_cast<int32_t>(kFakeVocabSize - 1)}, /*max_tokens=*/3);
  h.RunToCompletion(100);
  EXPECT_EQ(h.result(ok).reason, FinishReason::kLength);
  h.ExpectAllReleased();
}

TEST(SchedulerAdmission, ConfigNeedsTheVocabularySize) {
  SchedulerConfig c = Small();
  c.vocab_size = 0;
  const Status s = c.Validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("vocab_size"), std::string::npos) << s.message();
}

TEST(SchedulerAdmission, RejectsDuplicateIndexAndZeroMaxTokens) {
  EngineHarness h(Small(), FullOnlyKv(4, 64));
  const RequestIndex first = h.Add(Prompt(5, 1), 3);
  RequestInput dup;
  dup.prompt_token_ids = Prompt(5, 2);
  EXPECT_EQ(h.core().AddRequest(first, std::move(dup)).code(), StatusCode::kInvalidArgument);
  RequestInput zero;
  zero.prompt_token_ids = Prompt(5, 3);
  zero.sampling.max_tokens = 0;
  const Status s = h.core().AddRequest(77, std::move(zero));
  EXPECT_NE(s.message().find("max_tokens"), std::string::npos) << s.message();
  h.RunToCompletion(100);
  h.ExpectAllReleased();
}

TEST(SchedulerAdmission, ConfigValidationNamesTheField) {
  SchedulerConfig c = Small();
  c.enable_chunked_prefill = false;
  c.max_num_batched_tokens = 16;  // < max_model_len
  Status s = c.Validate();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("chunked prefill"), std::string::npos) << s.message();

  c = Small();
  c.max_num_batched_tokens = 2;  // < max_num_seqs
  EXPECT_NE(c.Validate().message().find("max_num_seqs"), std::string::npos);

  c = Small();
  c.shared_step_prefill_tokens = -1;
  EXPECT_NE(c.Validate().message().find("shared_step_prefill_tokens"), std::string::npos);
  for (const double share : {0.0, -0.5, 1.5, std::nan("")}) {
    c = Small();
    c.long_prefill_share = share;
    EXPECT_NE(c.Validate().message().find("long_prefill_share"), std::string::npos) << share;
  }

  FakeExecutor executor(Small(), 1, 4);
  EngineCoreConfig bad{Small(), FullOnlyKv(4, 1), {}};
  auto core = EngineCore::Create(bad, &executor);
  ASSERT_FALSE(core.ok());
  EXPECT_NE(core.status().message().find("at least 2"), std::string::npos);
}

TEST(SchedulerAdmission, RunnerGetsTheClientsSeedOrADerivedOne) {
  EngineHarness h(Small(), FullOnlyKv(4, 64));
  RequestInput seeded;
  seeded.prompt_token_ids = Prompt(5, 1);
  seeded.sampling.seed = 1234;
  h.Add(seeded);
  h.Add(Prompt(5, 2), 3);
  h.Add(Prompt(5, 3), 3);
  h.Step();
  const auto& news = h.executor().last_output().new_reqs;
  ASSERT_EQ(news.size(), 3u);
  EXPECT_EQ(news[0].sampling.seed, 1234u);
  ASSERT_TRUE(news[1].sampling.seed && news[2].sampling.seed);
  EXPECT_NE(*news[1].sampling.seed, *news[2].sampling.seed);
  // Derived seeds depend only on SchedulerConfig::seed and the index: a rerun gets the same ones.
  EngineHarness again(Small(), FullOnlyKv(4, 64));
  again.Add(seeded);
  again.Add(Prompt(5, 2), 3);
  again.Step();
  EXPECT_EQ(again.executor().last_output().new_reqs[1].sampling.seed, news[1].sampling.seed);
  h.RunToCompletion(100);
  h.ExpectAllReleased();
}

}  // namespace
}  // namespace ember::test
