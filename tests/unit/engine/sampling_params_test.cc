#include "engine/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace ember {
namespace {

constexpr int64_t kVocab = 1000;
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Case {
  std::string field;
  std::function<void(SamplingParams&)> set;
};

TEST(SamplingParamsTest, DefaultsAndEdgeValuesPass) {
  EXPECT_TRUE(SamplingParams().Validate(kVocab).ok());
  const std::vector<std::function<void(SamplingParams&)>> good = {
      [](SamplingParams& p) { p.n = 1; },
      [](SamplingParams& p) { p.n = SamplingParams::kMaxN; },
      [](SamplingParams& p) { p.temperature = 0.0f; },
      [](SamplingParams& p) { p.temperature = SamplingParams::kMaxTemperature; },
      [](SamplingParams& p) { p.top_p = 1.0f; },
      [](SamplingParams& p) { p.top_p = 1e-6f; },
      [](SamplingParams& p) { p.top_k = -1; },
      [](SamplingParams& p) { p.top_k = 1; },
      [](SamplingParams& p) { p.top_k = 1 << 30; },  // more than the vocabulary: off
      [](SamplingParams& p) { p.min_p = 0.0f; },
      [](SamplingParams& p) { p.min_p = 1.0f; },
      [](SamplingParams& p) { p.presence_penalty = -2.0f; p.frequency_penalty = 2.0f; },
      [](SamplingParams& p) { p.presence_penalty = 2.0f; p.frequency_penalty = -2.0f; },
      [](SamplingParams& p) { p.repetition_penalty = 0.01f; },
      [](SamplingParams& p) { p.repetition_penalty = 10.0f; },
      [](SamplingParams& p) { p.max_tokens = 1; p.min_tokens = 1; },
      [](SamplingParams& p) { p.stop_token_ids = {0, kVocab - 1}; },
      [](SamplingParams& p) { p.logprobs = 0; },
      [](SamplingParams& p) { p.logprobs = SamplingParams::kMaxLogprobs; },
      [](SamplingParams& p) { p.stop = std::vector<std::string>(SamplingParams::kMaxStopStrings, "x"); },
      [](SamplingParams& p) { p.stop = {std::string(SamplingParams::kMaxStopStringBytes, 'x')}; },
  };
  for (size_t i = 0; i < good.size(); ++i) {
    SamplingParams p;
    good[i](p);
    const Status s = p.Validate(kVocab);
    EXPECT_TRUE(s.ok()) << "case " << i << ": " << s.ToString();
  }
}

TEST(SamplingParamsTest, EveryBadValueNamesItsField) {
  const std::vector<Case> bad = {
      {"n", [](SamplingParams& p) { p.n = 0; }},
      {"n", [](SamplingParams& p) { p.n = SamplingParams::kMaxN + 1; }},
      {"temperature", [](SamplingParams& p) { p.temperature = -0.01f; }},
      {"temperature", [](SamplingParams& p) { p.temperature = SamplingParams::kMaxTemperature * 1.01f; }},
      {"temperature", [](SamplingParams& p) { p.temperature = kNan; }},
      {"temperature", [](SamplingParams& p) { p.temperature = kInf; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 0.0f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = -0.5f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 1.001f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = kNan; }},
      {"top_k", [](SamplingParams& p) { p.top_k = -2; }},
      {"min_p", [](SamplingParams& p) { p.min_p = -0.1f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = 1.1f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = kNan; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = -2.01f; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = 2.01f; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = kNan; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = -2.01f; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = 2.01f; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = kNan; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0.0f; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = -1.0f; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = kInf; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = kNan; }},
      {"max_tokens", [](SamplingParams& p) { p.max_tokens = 0; }},
      {"min_tokens", [](SamplingParams& p) { p.min_tokens = -1; }},
      {"min_tokens", [](SamplingParams& p) { p.max_tokens = 5; p.min_tokens = 6; }},
      {"stop_token_ids", [](SamplingParams& p) { p.stop_token_ids = {1, -1}; }},
      {"stop_token_ids", [](SamplingParams& p) { p.stop_token_ids = {kVocab}; }},
      {"stop", [](SamplingParams& p) { p.stop = {"ok", ""}; }},
      {"stop", [](SamplingParams& p) { p.stop = std::vector<std::string>(SamplingParams::kMaxStopStrings + 1, "x"); }},
      {"stop", [](SamplingParams& p) { p.stop = {std::string(SamplingParams::kMaxStopStringBytes + 1, 'x')}; }},
      {"logprobs", [](SamplingParams& p) { p.logprobs = -1; }},
      {"logprobs", [](SamplingParams& p) { p.logprobs = SamplingParams::kMaxLogprobs + 1; }},
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    SamplingParams p;
    bad[i].set(p);
    const Status s = p.Validate(kVocab);
    ASSERT_FALSE(s.ok()) << "case " << i << " (" << bad[i].field << ") passed";
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    // The message starts with the field's name and says what is allowed.
    EXPECT_EQ(s.message().rfind(bad[i].field + " must be", 0), 0u) << s.message();
    EXPECT_NE(s.message().find("got"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace ember
