// /metrics for a mixture-of-experts model's expert load (exec/expert_load.h), in the exposition
// format of metrics.h:
//
//   ember:expert_tokens_total{layer, expert}              counter: tokens routed to the expert
//   ember:expert_load_imbalance{layer}                    gauge: max / mean tokens over the layer's
//                                                         experts since the server started
//   ember:expert_parallel_rank_tokens_total{layer, rank}  counter: tokens the experts a rank holds
//   ember:expert_parallel_imbalance{layer}                gauge: max / mean tokens over the ranks
//
// The last two come with an expert placement (--expert-placement). Each token adds top_k to its
// layer's sum. The gauges are 1 when perfectly even and 0 before anything was counted; for a recent
// window, divide rate()s of the counters in PromQL. A dense model shows none of these.
//
// Size: Muse Spark's 62 layers x 256 experts are 15,872 series (~1.5 MB per scrape), which
// Prometheus takes in its stride but a fleet may not want per replica, so --expert-load-metrics
// off drops them all (and the engine thread's per-step copy of the counts).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "engine/engine_client.h"
#include "exec/expert_load.h"
#include "exec/expert_placement.h"
#include "server/metrics.h"

namespace ember::server {

class ExpertLoadMetrics : public Metric {
 public:
  ExpertLoadMetrics();

  void set_enabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }
  // The placement the per-rank series follow; null: no per-rank series.
  void set_placement(std::shared_ptr<const exec::ExpertPlacement> placement);
  // Loop thread, after each step: copies the engine's counts (no allocation once sized).
  void Refresh(const EngineClient& client);
  void Render(const std::string& labels, std::string* out) const override;

 private:
  std::atomic<bool> enabled_{true};
  mutable std::mutex mutex_;  // guards the two below
  std::shared_ptr<const exec::ExpertPlacement> placement_;
  exec::ExpertLoad load_;
};

}  // namespace ember::server
