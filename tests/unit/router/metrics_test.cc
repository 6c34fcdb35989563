#include "router/metrics.h"

#include <gtest/gtest.h>

#include "router/balancer.h"

namespace ember::router {
namespace {

using namespace std::chrono_literals;

bool Has(const std::string& text, const std::string& line) { return text.find(line + "\n") != std::string::npos; }

TEST(RouterMetricsTest, CountsByPhaseAndOutcome) {
  RouterMetrics m;
  m.CountPhase(Phase::kPrefill, Outcome::kOk);
  m.CountPhase(Phase::kPrefill, Outcome::kOk);
  m.CountPhase(Phase::kPrefill, Outcome::kFailed);
  m.CountPhase(Phase::kDecode, Outcome::kUpstreamError);
  m.CountPhase(Phase::kDecode, Outcome::kClientGone);
  m.CountFallback();
  m.CountRejected();
  m.AddKvBytes(1000);
  m.AddKvBytes(24);
  const std::string text = m.Render(nullptr, nullptr);
  EXPECT_TRUE(Has(text, R"(ember_router:requests_total{phase="prefill",outcome="ok"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(ember_router:requests_total{phase="prefill",outcome="failed"} 1)"));
  EXPECT_TRUE(Has(text, R"(ember_router:requests_total{phase="prefill",outcome="upstream_error"} 0)"));
  EXPECT_TRUE(Has(text, R"(ember_router:requests_total{phase="decode",outcome="upstream_error"} 1)"));
  EXPECT_TRUE(Has(text, R"(ember_router:requests_total{phase="decode",outcome="client_gone"} 1)"));
  EXPECT_TRUE(Has(text, R"(ember_router:requests_total{phase="decode",outcome="ok"} 0)"));
  EXPECT_TRUE(Has(text, "ember_router:fallbacks_total 1"));
  EXPECT_TRUE(Has(text, "ember_router:rejected_requests_total 1"));
  EXPECT_TRUE(Has(text, "ember_router:kv_transfer_bytes_total 1024"));
  EXPECT_TRUE(Has(text, "# TYPE ember_router:prefill_seconds histogram"));
}

TEST(RouterMetricsTest, HistogramsAreCumulative) {
  RouterMetrics m;
  m.ObservePrefill(0.003);
  m.ObservePrefill(0.2);
  m.ObservePrefill(5000);  // past the last bound: +Inf only
  m.ObserveDecodeFirstByte(0.01);
  const std::string text = m.Render(nullptr, nullptr);
  EXPECT_TRUE(Has(text, R"(ember_router:prefill_seconds_bucket{le="0.005"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(ember_router:prefill_seconds_bucket{le="0.1"} 1)"));
  EXPECT_TRUE(Has(text, R"(ember_router:prefill_seconds_bucket{le="0.25"} 2)"));
  EXPECT_TRUE(Has(text, R"(ember_router:prefill_seconds_bucket{le="1280"} 2)"));
  EXPECT_TRUE(Has(text, R"(ember_router:prefill_seconds_bucket{le="+Inf"} 3)"));
  EXPECT_TRUE(Has(text, "ember_router:prefill_seconds_count 3"));
  EXPECT_TRUE(Has(text, "ember_router:prefill_seconds_sum 5000.203"));
  EXPECT_TRUE(Has(text, R"(ember_router:decode_first_byte_seconds_bucket{le="0.01"} 1)"));
  EXPECT_TRUE(Has(text, R"(ember_router:decode_first_byte_seconds_bucket{le="0.005"} 0)"));
  EXPECT_TRUE(Has(text, "ember_router:decode_seconds_count 0"));
}

TEST(RouterMetricsTest, InFlightPerUpstream) {
  RouterMetrics m;
  Balancer prefill({"http://p:1"}, 1s);
  Balancer decode({"http://d:1", "http://d\"2"}, 1s);
  auto a = decode.Acquire(Balancer::Clock::now(), false);
  auto b = decode.Acquire(Balancer::Clock::now(), false);
  auto c = decode.Acquire(Balancer::Clock::now(), false);
  const std::string text = m.Render(&prefill, &decode);
  EXPECT_TRUE(Has(text, R"(ember_router:upstream_in_flight{phase="prefill",url="http://p:1"} 0)")) << text;
  EXPECT_TRUE(Has(text, R"(ember_router:upstream_in_flight{phase="decode",url="http://d:1"} 2)"));
  EXPECT_TRUE(Has(text, R"(ember_router:upstream_in_flight{phase="decode",url="http://d\"2"} 1)"));
}

}  // namespace
}  // namespace ember::router
