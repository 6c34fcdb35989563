#include "server/metrics.h"

#include <gtest/gtest.h>

namespace ember::server {
namespace {

bool Contains(const std::string& text, const std::string& line) { return text.find(line) != std::string::npos; }

TEST(MetricsTest, PrometheusTextFormat) {
  ServerMetrics m("my \"model\"");
  m.num_requests_running.Set(3);
  m.generation_tokens.Add(10);
  m.generation_tokens.Add(5);
  m.kv_group_usage.Resize(2);
  m.kv_group_usage.Set(1, 0.5);
  m.dp_num_requests_waiting.Resize(2);
  m.dp_num_requests_waiting.Set(1, 4);
  m.time_to_first_token.Observe(0.003);
  m.time_to_first_token.Observe(0.05);
  m.time_to_first_token.Observe(1000);
  m.spec_decode_num_drafts.Add(4);
  m.spec_decode_accepted_per_pos.Resize(2);
  m.spec_decode_accepted_per_pos.Set(1, 7);
  m.spec_decode_drafts_per_len.Resize(3);
  m.spec_decode_drafts_per_len.Set(0, 2);
  m.spec_decode_drafts_per_len.Resize(1);  // never shrinks: a counter must not go back
  m.spec_decode_hidden_states_seconds.Add(0.25);
  const std::string text = m.Render();
  const std::string labels = "model_name=\"my \\\"model\\\"\"";
  EXPECT_TRUE(Contains(text, "# TYPE ember:num_requests_running gauge\n"));
  EXPECT_TRUE(Contains(text, "ember:num_requests_running{" + labels + "} 3\n"));
  EXPECT_TRUE(Contains(text, "ember:generation_tokens_total{" + labels + "} 15\n"));
  EXPECT_TRUE(Contains(text, "ember:kv_cache_group_usage_perc{" + labels + ",kv_group=\"1\"} 0.5\n"));
  // Buckets are cumulative and end with +Inf = count.
  EXPECT_TRUE(Contains(text, "ember:time_to_first_token_seconds_bucket{" + labels + ",le=\"0.001\"} 0\n"));
  EXPECT_TRUE(Contains(text, "ember:time_to_first_token_seconds_bucket{" + labels + ",le=\"0.005\"} 1\n"));
  EXPECT_TRUE(Contains(text, "ember:time_to_first_token_seconds_bucket{" + labels + ",le=\"0.06\"} 2\n"));
  EXPECT_TRUE(Contains(text, "ember:time_to_first_token_seconds_bucket{" + labels + ",le=\"+Inf\"} 3\n"));
  EXPECT_TRUE(Contains(text, "ember:time_to_first_token_seconds_count{" + labels + "} 3\n"));
  // Speculative decoding's counters, the per-position one as a counter with a position label.
  EXPECT_TRUE(Contains(text, "ember:spec_decode_num_drafts_total{" + labels + "} 4\n"));
  EXPECT_TRUE(Contains(text, "# TYPE ember:spec_decode_num_accepted_tokens_per_pos_total counter\n"));
  EXPECT_TRUE(Contains(text, "ember:spec_decode_num_accepted_tokens_per_pos_total{" + labels + ",position=\"1\"} 7\n"));
  // Verification lengths are labelled from 1.
  EXPECT_TRUE(Contains(text, "ember:spec_decode_num_drafts_per_len_total{" + labels + ",length=\"1\"} 2\n"));
  EXPECT_TRUE(Contains(text, "ember:spec_decode_num_drafts_per_len_total{" + labels + ",length=\"3\"} 0\n"));
  EXPECT_TRUE(Contains(text, "ember:spec_decode_hidden_states_seconds_total{" + labels + "} 0.25\n"));
  EXPECT_TRUE(Contains(text, "# TYPE ember:spec_decode_propose_seconds_total counter\n"));
  // Data parallelism: one series per data-parallel rank.
  EXPECT_TRUE(Contains(text, "ember:dp_rank_num_requests_waiting{" + labels + ",dp_rank=\"1\"} 4\n"));
  // Disaggregation's counters.
  EXPECT_TRUE(Contains(text, "# TYPE ember:kv_transfer_received_bytes_total counter\n"));
  EXPECT_TRUE(Contains(text, "# TYPE ember:num_requests_waiting_for_remote_kv gauge\n"));
  // Multimodal inputs' counters.
  EXPECT_TRUE(Contains(text, "# TYPE ember:mm_encoder_cache_hits_total counter\n"));
  // Every metric has exactly one TYPE line.
  size_t types = 0;
  for (size_t at = text.find("# TYPE"); at != std::string::npos; at = text.find("# TYPE", at + 1)) ++types;
  EXPECT_EQ(types, 37u);
}

}  // namespace
}  // namespace ember::server
