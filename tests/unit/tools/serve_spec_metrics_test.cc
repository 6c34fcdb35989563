#include "tools/ember/bench/serve_spec_metrics.h"

#include <gtest/gtest.h>

namespace ember::tools::bench {
namespace {

constexpr const char* kEmber =
    "# HELP ember:spec_decode_num_drafts_total Verification passes with draft tokens.\n"
    "# TYPE ember:spec_decode_num_drafts_total counter\n"
    "ember:spec_decode_num_drafts_total{model_name=\"m\"} 10\n"
    "ember:spec_decode_num_draft_tokens_total{model_name=\"m\"} 40\n"
    "ember:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 25\n"
    "ember:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"0\"} 9\n"
    "ember:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"1\"} 7\n"
    "ember:spec_decode_num_drafts_per_len_total{model_name=\"m\",length=\"1\"} 2\n"
    "ember:spec_decode_num_drafts_per_len_total{model_name=\"m\",length=\"5\"} 8\n"
    "ember:spec_decode_propose_seconds_total{model_name=\"m\"} 1.5\n"
    "ember:spec_decode_hidden_states_seconds_total{model_name=\"m\"} 0.25\n"
    "ember:generation_tokens_total{model_name=\"m\"} 1000\n";

TEST(ServeSpecMetrics, ParsesEmbersCounters) {
  const auto c = ParseSpecDecodeMetrics(kEmber);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->num_drafts, 10);
  EXPECT_EQ(c->num_draft_tokens, 40);
  EXPECT_EQ(c->num_accepted_tokens, 25);
  EXPECT_EQ(c->accepted_per_position, (std::vector<double>{9, 7}));
  EXPECT_EQ(c->drafts_per_length, (std::vector<double>{2, 0, 0, 0, 8}));
  EXPECT_EQ(c->propose_seconds, 1.5);
  EXPECT_EQ(c->hidden_states_seconds, 0.25);
}

TEST(ServeSpecMetrics, ParsesVllmsCounters) {
  const auto c = ParseSpecDecodeMetrics(
      "vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 4.0\n"
      "vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"m\"} 12.0\n"
      "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 6.0\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"2\"} 1.0\n");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->num_drafts, 4);
  EXPECT_EQ(c->accepted_per_position, (std::vector<double>{0, 0, 1}));
  EXPECT_TRUE(c->drafts_per_length.empty());
}

TEST(ServeSpecMetrics, NoCountersOrHostileTextGiveNothingOrBoundedVectors) {
  EXPECT_FALSE(ParseSpecDecodeMetrics("").has_value());
  EXPECT_FALSE(ParseSpecDecodeMetrics("llamacpp:prompt_tokens_total 5\n").has_value());
  const auto c = ParseSpecDecodeMetrics(
      "ember:spec_decode_num_drafts_total 1\n"
      "ember:spec_decode_num_accepted_tokens_per_pos_total{position=\"99999999999\"} 1\n"
      "ember:spec_decode_num_accepted_tokens_per_pos_total{position=\"-3\"} 1\n"
      "ember:spec_decode_num_accepted_tokens_per_pos_total{position=\"x\"} 1\n"
      "ember:spec_decode_num_drafts_per_len_total{length=\"0\"} 1\n"
      "ember:spec_decode_propose_seconds_total 2.5\n"
      "ember:spec_decode_propose_seconds_total NaN\n"
      "ember:spec_decode_hidden_states_seconds_total +Inf\n"
      "ember:spec_decode_num_draft_tokens_total -Inf\n"
      "ember:\n"
      "not a metric line at all\n");
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->accepted_per_position.empty());
  EXPECT_TRUE(c->drafts_per_length.empty());
  EXPECT_EQ(c->propose_seconds, 2.5) << "non-finite samples are skipped";
  EXPECT_EQ(c->hidden_states_seconds, 0.0);
  EXPECT_EQ(c->num_draft_tokens, 0.0);
}

TEST(ServeSpecMetrics, SummaryIsTheDifferenceOfTwoScrapes) {
  const SpecDecodeCounts before = *ParseSpecDecodeMetrics(kEmber);
  SpecDecodeCounts after = before;
  after.num_drafts += 4;
  after.num_draft_tokens += 10;
  after.num_accepted_tokens += 6;
  after.accepted_per_position = {13, 9, 1};
  after.drafts_per_length = {3, 0, 1, 0, 10};
  const auto s = SummarizeSpecDecode(before, after);
  EXPECT_EQ(s["num_drafts"].get<double>(), 4);
  EXPECT_DOUBLE_EQ(s["acceptance_rate"].get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(s["mean_acceptance_length"].get<double>(), 2.5);  // 1 + 6 / 4
  EXPECT_DOUBLE_EQ(s["mean_verified_length"].get<double>(), 2.5);
  EXPECT_EQ(s["acceptance_per_position"].get<std::vector<double>>(), (std::vector<double>{1.0, 0.5, 0.25}));
  EXPECT_EQ(s["drafts_per_length"].get<std::vector<double>>(), (std::vector<double>{0.25, 0.0, 0.25, 0.0, 0.5}));
  EXPECT_TRUE(SummarizeSpecDecode(before, before).is_null());  // nothing verified in the level
}

// A level where the plans verified nothing still shows what keeping the drafter current cost.
TEST(ServeSpecMetrics, SummaryWithoutDraftsReportsTheProposersTime) {
  const SpecDecodeCounts before = *ParseSpecDecodeMetrics(kEmber);
  SpecDecodeCounts after = before;
  after.hidden_states_seconds += 0.5;
  const auto s = SummarizeSpecDecode(before, after);
  ASSERT_FALSE(s.is_null());
  EXPECT_EQ(s["num_drafts"].get<double>(), 0);
  EXPECT_EQ(s["mean_acceptance_length"].get<double>(), 1.0);
  EXPECT_EQ(s["acceptance_per_position"].get<std::vector<double>>(), (std::vector<double>{0.0, 0.0}));
  EXPECT_DOUBLE_EQ(s["hidden_states_seconds"].get<double>(), 0.5);
  EXPECT_EQ(s["propose_seconds"].get<double>(), 0.0);
}

}  // namespace
}  // namespace ember::tools::bench
