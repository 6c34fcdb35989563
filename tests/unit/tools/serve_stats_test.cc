#include "tools/ember/bench/serve_stats.h"

#include <gtest/gtest.h>

namespace ember::tools::bench {
namespace {

RequestResult Ok(double ttft, double latency, std::vector<double> chunk_times, int64_t usage_tokens) {
  RequestResult r;
  r.ok = true;
  r.ttft = ttft;
  r.latency = latency;
  r.chunk_times = std::move(chunk_times);
  r.chunks = static_cast<int64_t>(r.chunk_times.size());
  r.usage_prompt_tokens = 10;
  r.usage_completion_tokens = usage_tokens;
  return r;
}

TEST(ServeStats, PercentileInterpolatesLikeNumpy) {
  // numpy.percentile([1, 2, 3, 4], q) with the default linear method.
  const std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 3.7);
  EXPECT_DOUBLE_EQ(Percentile(v, 99), 3.97);
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  const Distribution d = Describe({1, 2, 3, 10});
  EXPECT_DOUBLE_EQ(d.mean, 4);
  EXPECT_DOUBLE_EQ(d.median, 2.5);
}

TEST(ServeStats, ParsesGoodputTargets) {
  GoodputTargets t;
  ASSERT_TRUE(ParseGoodputTarget("ttft:500", &t).ok());
  ASSERT_TRUE(ParseGoodputTarget("tpot:12.5", &t).ok());
  EXPECT_EQ(t.at("ttft"), 500);
  EXPECT_EQ(t.at("tpot"), 12.5);
  for (const char* bad : {"ttft", "ttft:", "itl:5", "ttft:fast", "ttft:5ms", "tpot:-1"}) {
    const Status s = ParseGoodputTarget(bad, &t);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("ttft:MS"), std::string::npos) << s.message();
  }
}

TEST(ServeStats, GoodputCountsRequestsWithinEveryTarget) {
  // TPOT = (latency - ttft) / (tokens - 1).
  const RequestResult fast = Ok(0.1, 0.5, {0.1, 0.3, 0.5}, 3);  // ttft 100 ms, tpot 200 ms
  const RequestResult slow_start = Ok(0.9, 1.1, {0.9, 1.0, 1.1}, 3);  // ttft 900 ms, tpot 100 ms
  EXPECT_DOUBLE_EQ(fast.Tpot(), 0.2);
  EXPECT_TRUE(MeetsTargets(fast, {}));
  EXPECT_TRUE(MeetsTargets(fast, {{"ttft", 500}}));
  EXPECT_FALSE(MeetsTargets(fast, {{"ttft", 500}, {"tpot", 150}}));
  EXPECT_FALSE(MeetsTargets(slow_start, {{"ttft", 500}}));
  EXPECT_FALSE(MeetsTargets(fast, {{"e2el", 400}}));
  RequestResult failed;
  EXPECT_FALSE(MeetsTargets(failed, {}));

  const auto s = Summarize({fast, slow_start, failed}, 2.0, {{"ttft", 500}});
  EXPECT_EQ(s["completed"], 2);
  EXPECT_EQ(s["failed"], 1);
  EXPECT_DOUBLE_EQ(s["request_goodput"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(s["request_throughput"].get<double>(), 1.0);
  EXPECT_EQ(s["goodput_targets_ms"]["ttft"], 500);
}

TEST(ServeStats, SummaryUsesUsageTokensAndChunkGaps) {
  // A server that packs two tokens into each of its 3 chunks: usage says 6.
  const RequestResult packed = Ok(0.2, 0.6, {0.2, 0.4, 0.6}, 6);
  const RequestResult plain = Ok(0.1, 0.3, {0.1, 0.2, 0.3}, 3);
  const auto s = Summarize({packed, plain}, 1.0, {});
  EXPECT_EQ(s["total_output_tokens"], 9);
  EXPECT_EQ(s["total_chunks"], 6);
  EXPECT_EQ(s["total_input_tokens"], 20);
  EXPECT_FALSE(s["chunks_equal_usage_tokens"].get<bool>());
  EXPECT_DOUBLE_EQ(s["output_throughput"].get<double>(), 9);
  EXPECT_DOUBLE_EQ(s["total_token_throughput"].get<double>(), 29);
  // ITL: chunk gaps 200, 200, 100, 100 ms.
  EXPECT_NEAR(s["itl_ms"]["mean"].get<double>(), 150, 1e-9);
  EXPECT_NEAR(s["itl_ms"]["median"].get<double>(), 150, 1e-9);
  // TPOT: 400 / 5 = 80 ms and 200 / 2 = 100 ms.
  EXPECT_NEAR(s["tpot_ms"]["mean"].get<double>(), 90, 1e-9);
  EXPECT_NEAR(s["ttft_ms"]["p99"].get<double>(), 199, 1e-9);
  EXPECT_NEAR(s["e2el_ms"]["median"].get<double>(), 450, 1e-9);
  for (const char* key : {"request_throughput", "input_throughput", "output_throughput", "request_goodput",
                          "duration_s", "errors"}) {
    EXPECT_TRUE(s.contains(key)) << key;
  }
}

TEST(ServeStats, NoSuccessfulRequestGivesNullLatencies) {
  RequestResult a, b;
  a.error = "HTTP 500: boom";
  b.error = "HTTP 500: boom";
  const auto s = Summarize({a, b}, 1.0, {});
  EXPECT_EQ(s["completed"], 0);
  EXPECT_EQ(s["failed"], 2);
  EXPECT_TRUE(s["ttft_ms"]["median"].is_null());
  EXPECT_EQ(s["errors"], nlohmann::ordered_json::array({"HTTP 500: boom"}));
}

}  // namespace
}  // namespace ember::tools::bench
