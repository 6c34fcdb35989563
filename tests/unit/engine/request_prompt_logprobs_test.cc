// Request::AddPromptLogprobs: entries arrive chunk by chunk, a recompute after preemption sends
// the early ones again, and each entry is handed out exactly once.
#include <gtest/gtest.h>

#include "engine/request.h"

namespace ember {
namespace {

std::vector<TokenLogprobs> Entries(int first, int count) {
  std::vector<TokenLogprobs> out(count);
  for (int j = 0; j < count; ++j) out[j].logprob = -static_cast<float>(first + j);
  return out;
}

TEST(RequestPromptLogprobs, ChunksAccumulateAndARecomputeIsDropped) {
  RequestInput input;
  input.prompt_token_ids = {1, 2, 3, 4, 5, 6, 7};
  input.sampling.prompt_logprobs = 0;
  Request req(0, std::move(input), 0, 0);
  req.set_status(RequestStatus::kRunning);
  req.AddPromptLogprobs(0, Entries(0, 3));
  req.AddPromptLogprobs(3, Entries(3, 2));
  req.Preempt();
  req.AddPromptLogprobs(0, Entries(0, 6));  // the recompute: entries 0..4 again, then 5
  const std::vector<TokenLogprobs> taken = req.TakePromptLogprobs();
  ASSERT_EQ(taken.size(), 6u);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(taken[k].logprob, -static_cast<float>(k)) << k;
  EXPECT_TRUE(req.TakePromptLogprobs().empty());
  req.AddPromptLogprobs(0, Entries(0, 6));  // a recompute after the first token: nothing new
  EXPECT_TRUE(req.TakePromptLogprobs().empty());
}

}  // namespace
}  // namespace ember
