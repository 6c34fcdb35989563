// What every request of the router shares: its options, the parsed upstream lists with their
// balancers, the metrics, and the I/O context the upstream connections run on (its own threads:
// the HTTP server's I/O threads carry the clients, these carry the instances).
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "http/limits.h"
#include "http/url.h"
#include "router/balancer.h"
#include "router/metrics.h"
#include "router/upstream_call.h"

namespace ember::router {

struct RouterOptions {
  std::vector<std::string> prefill_urls;
  std::vector<std::string> decode_urls;
  std::string host = "127.0.0.1";
  int port = 8000;               // 0 picks a free one
  std::string api_key;           // asked of clients on the /v1 routes ("" = none)
  std::string upstream_api_key;  // sent to the instances ("" = none)
  UpstreamTimeouts timeouts;
  std::chrono::milliseconds backoff{std::chrono::seconds(2)};         // skip an instance after a failed connect
  std::chrono::milliseconds health_timeout{std::chrono::seconds(1)};  // one instance's GET /health
  std::chrono::milliseconds health_cache{std::chrono::seconds(1)};    // how long /health's answer is reused
  size_t max_concurrency = 1024;          // client requests being proxied at once; past it a 503
  size_t max_response_bytes = 64u << 20;  // a non-streamed upstream answer kept whole
  int upstream_threads = 1;
  http::HttpLimits limits;
  size_t max_connections = 8192;
  int io_threads = 1;
  std::chrono::milliseconds shutdown_timeout{std::chrono::seconds(30)};
};

struct Upstreams {
  Upstreams(std::vector<http::HttpUrl> parsed, std::vector<std::string> names, std::chrono::milliseconds backoff)
      : urls(std::move(parsed)), balancer(std::move(names), backoff) {}
  std::vector<http::HttpUrl> urls;  // index = the balancer's
  Balancer balancer;
};

struct RouterContext {
  RouterContext(RouterOptions o, Upstreams p, Upstreams d)
      : options(std::move(o)), prefill(std::move(p)), decode(std::move(d)) {}
  RouterOptions options;
  Upstreams prefill;
  Upstreams decode;
  RouterMetrics metrics;
  std::atomic<size_t> active{0};  // client requests being proxied (--max-concurrency)
  // Last: the calls its pending handlers still hold give back their leases and slots above.
  boost::asio::io_context ioc;
};

// Holds one of --max-concurrency's places; given back when destroyed.
class ConcurrencySlot {
 public:
  static std::unique_ptr<ConcurrencySlot> TryTake(RouterContext* context) {
    if (context->active.fetch_add(1) >= context->options.max_concurrency) {
      context->active.fetch_sub(1);
      return nullptr;
    }
    return std::unique_ptr<ConcurrencySlot>(new ConcurrencySlot(context));
  }
  ~ConcurrencySlot() { context_->active.fetch_sub(1); }
  ConcurrencySlot(const ConcurrencySlot&) = delete;
  ConcurrencySlot& operator=(const ConcurrencySlot&) = delete;

 private:
  explicit ConcurrencySlot(RouterContext* context) : context_(context) {}
  RouterContext* context_;
};

}  // namespace ember::router
