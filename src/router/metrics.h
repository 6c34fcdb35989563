// The router's Prometheus metrics (text format 0.0.4), named like ember serve's with an
// "ember_router:" prefix: requests by phase and outcome, the phases' latencies, fallbacks, the
// KV bytes prefill instances reported, and each upstream's requests in flight (read from the
// balancers when scraped). Counters are atomics or under one mutex: cheap next to an HTTP call.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "http/prometheus.h"

namespace ember::router {

class Balancer;

enum class Phase { kPrefill, kDecode };
const char* PhaseName(Phase phase);

// How a phase of a request ended.
enum class Outcome {
  kOk,             // a 2xx answer, complete
  kUpstreamError,  // the instance answered non-2xx (passed through to the client in decode)
  kFailed,         // connect, read or timeout failure (prefill: fallback; decode: 502 or an error event)
  kClientGone,     // the client disconnected first
};
const char* OutcomeName(Outcome outcome);

class RouterMetrics {
 public:
  RouterMetrics();

  void CountPhase(Phase phase, Outcome outcome);
  void CountFallback() { fallbacks_.fetch_add(1, std::memory_order_relaxed); }
  void CountRejected() { rejected_.fetch_add(1, std::memory_order_relaxed); }
  void AddKvBytes(uint64_t bytes) { kv_bytes_.fetch_add(bytes, std::memory_order_relaxed); }
  void ObservePrefill(double seconds) { prefill_seconds_.Observe(seconds); }
  void ObserveDecodeFirstByte(double seconds) { decode_first_byte_seconds_.Observe(seconds); }
  void ObserveDecode(double seconds) { decode_seconds_.Observe(seconds); }

  uint64_t phase_count(Phase phase, Outcome outcome) const;
  uint64_t fallbacks() const { return fallbacks_.load(); }

  // The whole exposition; in-flight gauges from the balancers (either may be null).
  std::string Render(const Balancer* prefill, const Balancer* decode) const;

 private:
  static constexpr size_t kOutcomes = 4;
  std::array<std::array<std::atomic<uint64_t>, kOutcomes>, 2> requests_{};
  std::atomic<uint64_t> fallbacks_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> kv_bytes_{0};
  prometheus::Histogram prefill_seconds_;
  prometheus::Histogram decode_first_byte_seconds_;
  prometheus::Histogram decode_seconds_;
};

}  // namespace ember::router
