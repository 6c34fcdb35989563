#include "router/metrics.h"

#include <fmt/format.h>

#include "router/balancer.h"

namespace ember::router {
namespace {

// From a fast prefill of a short prompt to a long generation.
const std::vector<double> kLatencyBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,   2.5,
                                            5,     10,   20,    40,   80,  160,  320, 640, 1280};

}  // namespace

const char* PhaseName(Phase phase) { return phase == Phase::kPrefill ? "prefill" : "decode"; }

const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kUpstreamError:
      return "upstream_error";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kClientGone:
      return "client_gone";
  }
  return "unknown";
}

RouterMetrics::RouterMetrics()
    : prefill_seconds_("ember_router:prefill_seconds",
                       "Phase 1: from sending to a prefill instance to its whole response.", kLatencyBounds),
      decode_first_byte_seconds_("ember_router:decode_first_byte_seconds",
                                 "Phase 2: from sending to a decode instance to its first response bytes.",
                                 kLatencyBounds),
      decode_seconds_("ember_router:decode_seconds",
                      "Phase 2: from sending to a decode instance to the end of its response.", kLatencyBounds) {}

void RouterMetrics::CountPhase(Phase phase, Outcome outcome) {
  requests_[static_cast<size_t>(phase)][static_cast<size_t>(outcome)].fetch_add(1, std::memory_order_relaxed);
}

uint64_t RouterMetrics::phase_count(Phase phase, Outcome outcome) const {
  return requests_[static_cast<size_t>(phase)][static_cast<size_t>(outcome)].load();
}

std::string RouterMetrics::Render(const Balancer* prefill, const Balancer* decode) const {
  std::string out;
  out += "# HELP ember_router:requests_total Upstream requests by phase and how they ended.\n";
  out += "# TYPE ember_router:requests_total counter\n";
  for (Phase phase : {Phase::kPrefill, Phase::kDecode}) {
    for (Outcome outcome : {Outcome::kOk, Outcome::kUpstreamError, Outcome::kFailed, Outcome::kClientGone}) {
      out += fmt::format("ember_router:requests_total{{phase=\"{}\",outcome=\"{}\"}} {}\n", PhaseName(phase),
                         OutcomeName(outcome), phase_count(phase, outcome));
    }
  }
  out += "# HELP ember_router:fallbacks_total Requests decoded without a prefill instance's KV (phase 1 failed).\n";
  out += "# TYPE ember_router:fallbacks_total counter\n";
  out += fmt::format("ember_router:fallbacks_total {}\n", fallbacks_.load());
  out += "# HELP ember_router:rejected_requests_total Requests refused with 503 past --max-concurrency.\n";
  out += "# TYPE ember_router:rejected_requests_total counter\n";
  out += fmt::format("ember_router:rejected_requests_total {}\n", rejected_.load());
  out += "# HELP ember_router:kv_transfer_bytes_total Sum of the num_bytes prefill instances reported.\n";
  out += "# TYPE ember_router:kv_transfer_bytes_total counter\n";
  out += fmt::format("ember_router:kv_transfer_bytes_total {}\n", kv_bytes_.load());
  for (const prometheus::Histogram* h : {&prefill_seconds_, &decode_first_byte_seconds_, &decode_seconds_}) {
    h->Render("", &out);
  }
  out += "# HELP ember_router:upstream_in_flight Requests in flight on each upstream instance.\n";
  out += "# TYPE ember_router:upstream_in_flight gauge\n";
  for (auto [phase, balancer] : {std::pair{Phase::kPrefill, prefill}, std::pair{Phase::kDecode, decode}}) {
    if (balancer == nullptr) continue;
    for (size_t i = 0; i < balancer->size(); ++i) {
      out += fmt::format("ember_router:upstream_in_flight{{phase=\"{}\",url=\"{}\"}} {}\n", PhaseName(phase),
                         prometheus::EscapeLabelValue(balancer->url(i)), balancer->in_flight(i));
    }
  }
  return out;
}

}  // namespace ember::router
