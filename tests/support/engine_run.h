// Runs requests through an EngineCore to the end and collects each one's streamed tokens,
// logprobs and finish reason: what the engine-level tests compare across configurations.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "engine/engine_core.h"

namespace ember::test {

struct RunResult {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
  FinishReason reason = FinishReason::kNone;
};

// Adds inputs[i] as request i (indices are per engine: use a fresh engine per call, or inputs
// that start where the last call's ended) and steps until nothing is unfinished.
inline std::map<RequestIndex, RunResult> RunToCompletion(EngineCore& core, const std::vector<RequestInput>& inputs,
                                                          RequestIndex first_index = 0) {
  std::map<RequestIndex, RunResult> results;
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_TRUE(core.AddRequest(first_index + i, inputs[i]).ok());
  constexpr int kMaxSteps = 100000;
  int steps = 0;
  for (; core.HasUnfinished() && steps < kMaxSteps; ++steps) {
    for (const RequestOutput& out : core.Step()) {
      RunResult& r = results[out.req - first_index];
      r.tokens.insert(r.tokens.end(), out.new_token_ids.begin(), out.new_token_ids.end());
      r.logprobs.insert(r.logprobs.end(), out.new_logprobs.begin(), out.new_logprobs.end());
      if (out.finished) r.reason = out.finish_reason;
    }
  }
  EXPECT_LT(steps, kMaxSteps) << "the engine does not make progress";
  return results;
}

// Tokens, finish reason and logprobs (the sampled token's and the top alternatives') equal bit for
// bit: what speculative decoding, parallelism and disaggregation promise against a plain run.
inline void ExpectBitwiseEqual(const RunResult& want, const RunResult& got, const std::string& what) {
  ASSERT_EQ(want.tokens, got.tokens) << what;
  EXPECT_EQ(want.reason, got.reason) << what;
  ASSERT_EQ(want.logprobs.size(), got.logprobs.size()) << what;
  for (size_t i = 0; i < want.logprobs.size(); ++i) {
    EXPECT_EQ(want.logprobs[i].logprob, got.logprobs[i].logprob) << what << " token " << i;
    EXPECT_EQ(want.logprobs[i].top_ids, got.logprobs[i].top_ids) << what << " token " << i;
    EXPECT_EQ(want.logprobs[i].top_logprobs, got.logprobs[i].top_logprobs) << what << " token " << i;
  }
}

}  // namespace ember::test
