// GET /health of the router: healthy (200) when at least one prefill and one decode instance
// answer their own GET /health with 200. The instances are asked all at once, each within
// --health-timeout, and the answer is reused for --health-cache so that a busy load balancer
// probing the router does not multiply into probes of every instance. Nothing blocks: the
// response is a deferred body completed when the probes end.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "http/message.h"
#include "router/router_context.h"

namespace ember::router {

struct HealthSnapshot {
  std::vector<bool> prefill;  // per instance: answered 200
  std::vector<bool> decode;
};

// The /health answer for a snapshot: 200 {"status": "ok", ...} or 503 naming what is down.
void RenderHealth(const HealthSnapshot& snapshot, const Balancer& prefill, const Balancer& decode,
                  http::HttpResponse* response);

class HealthChecker {
 public:
  explicit HealthChecker(RouterContext* context) : context_(context) {}
  // `done` runs on a router I/O thread (or here, with a fresh cached answer).
  void Check(std::function<void(const HealthSnapshot&)> done);

 private:
  void Probe();
  RouterContext* const context_;
  std::mutex mu_;
  std::optional<HealthSnapshot> last_;                               // guarded by mu_
  std::chrono::steady_clock::time_point last_at_{};                  // guarded by mu_
  std::vector<std::function<void(const HealthSnapshot&)>> waiting_;  // guarded by mu_; non-empty: probing
};

// The deferred body of one GET /health.
std::shared_ptr<http::DeferredBody> StartHealthResponse(RouterContext* context, HealthChecker* checker);

}  // namespace ember::router
