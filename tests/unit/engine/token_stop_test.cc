#include "engine/token_stop.h"

#include <gtest/gtest.h>

namespace ember {
namespace {

constexpr int32_t kEos = 2;

Request Make(SamplingParams sampling, int64_t prompt_len = 3) {
  RequestInput input;
  input.prompt_token_ids.assign(prompt_len, 7);
  input.sampling = sampling;
  input.eos_token_id = kEos;
  return Request(0, std::move(input), 0, 0);
}

TEST(TokenStop, EosStopsUnlessIgnored) {
  SamplingParams s;
  s.max_tokens = 10;
  Request r = Make(s);
  r.AppendOutputToken(5);
  EXPECT_FALSE(CheckTokenStop(r, 100));
  r.AppendOutputToken(kEos);
  auto stop = CheckTokenStop(r, 100);
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->reason, FinishReason::kStop);
  EXPECT_EQ(stop->stop_token, kEos);

  s.ignore_eos = true;
  Request ignoring = Make(s);
  ignoring.AppendOutputToken(kEos);
  EXPECT_FALSE(CheckTokenStop(ignoring, 100));
}

TEST(TokenStop, StopTokenIdsReportWhichToken) {
  SamplingParams s;
  s.stop_token_ids = {40, 41};
  Request r = Make(s);
  r.AppendOutputToken(41);
  auto stop = CheckTokenStop(r, 100);
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->reason, FinishReason::kStop);
  EXPECT_EQ(stop->stop_token, 41);
}

TEST(TokenStop, MinTokensDelaysEosAndStopTokens) {
  SamplingParams s;
  s.min_tokens = 3;
  s.stop_token_ids = {40};
  Request r = Make(s);
  r.AppendOutputToken(kEos);
  EXPECT_FALSE(CheckTokenStop(r, 100));
  r.AppendOutputToken(40);
  EXPECT_FALSE(CheckTokenStop(r, 100));
  r.AppendOutputToken(40);  // the third token: min_tokens reached
  ASSERT_TRUE(CheckTokenStop(r, 100));
}

TEST(TokenStop, MaxTokensAndMaxModelLenGiveLength) {
  SamplingParams s;
  s.max_tokens = 2;
  Request r = Make(s);
  r.AppendOutputToken(5);
  EXPECT_FALSE(CheckTokenStop(r, 100));
  r.AppendOutputToken(6);
  EXPECT_EQ(CheckTokenStop(r, 100)->reason, FinishReason::kLength);

  s.max_tokens = 100;
  Request capped = Make(s, 8);
  capped.AppendOutputToken(5);
  EXPECT_FALSE(CheckTokenStop(capped, 10));
  capped.AppendOutputToken(5);  // 10 tokens = max_model_len
  EXPECT_EQ(CheckTokenStop(capped, 10)->reason, FinishReason::kLength);
}

TEST(TokenStop, StopTokenWinsOverLengthOnTheSameToken) {
  SamplingParams s;
  s.max_tokens = 1;
  Request r = Make(s);
  r.AppendOutputToken(kEos);
  EXPECT_EQ(CheckTokenStop(r, 100)->reason, FinishReason::kStop);
}

}  // namespace
}  // namespace ember
