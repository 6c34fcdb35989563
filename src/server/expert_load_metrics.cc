#include "server/expert_load_metrics.h"

#include <fmt/format.h>

namespace ember::server {

ExpertLoadMetrics::ExpertLoadMetrics()
    : Metric("ember:expert_tokens_total", "Tokens the router sent to each expert of each MoE layer (top_k per token).") {}

void ExpertLoadMetrics::set_placement(std::shared_ptr<const exec::ExpertPlacement> placement) {
  std::lock_guard lock(mutex_);
  placement_ = std::move(placement);
}

void ExpertLoadMetrics::Refresh(const EngineClient& client) {
  std::lock_guard lock(mutex_);
  if (enabled_) client.ReadExpertLoad(&load_);
}

void ExpertLoadMetrics::Render(const std::string& labels, std::string* out) const {
  std::lock_guard lock(mutex_);
  if (!enabled_ || load_.empty()) return;
  Header(name_, help_, "counter", out);
  for (size_t i = 0; i < load_.num_rows(); ++i) {
    const std::span<const int64_t> row = load_.row(i);
    for (size_t e = 0; e < row.size(); ++e) {
      *out += fmt::format("{}{{{},layer=\"{}\",expert=\"{}\"}} {}\n", name_, labels, load_.layers[i], e, row[e]);
    }
  }
  Header("ember:expert_load_imbalance",
         "Per MoE layer, the most-loaded expert's tokens over the mean expert's since start (1 = even, 0 = none yet).",
         "gauge", out);
  for (size_t i = 0; i < load_.num_rows(); ++i) {
    *out += fmt::format("ember:expert_load_imbalance{{{},layer=\"{}\"}} {}\n", labels, load_.layers[i],
                        exec::MaxOverMean(load_.row(i)));
  }
  if (!placement_) return;
  Header("ember:expert_parallel_rank_tokens_total",
         "Per MoE layer, tokens routed to the experts each expert-parallel rank holds under --expert-placement.",
         "counter", out);
  std::vector<double> imbalance(load_.num_rows());
  for (size_t i = 0; i < load_.num_rows(); ++i) {
    const std::vector<int64_t> ranks = exec::RankTokens(load_.row(i), *placement_, load_.layers[i]);
    for (size_t r = 0; r < ranks.size(); ++r) {
      *out += fmt::format("ember:expert_parallel_rank_tokens_total{{{},layer=\"{}\",rank=\"{}\"}} {}\n", labels,
                          load_.layers[i], r, ranks[r]);
    }
    imbalance[i] = exec::MaxOverMean(ranks);
  }
  Header("ember:expert_parallel_imbalance",
         "Per MoE layer, the busiest expert-parallel rank's tokens over the mean rank's since start (1 = even).",
         "gauge", out);
  for (size_t i = 0; i < load_.num_rows(); ++i) {
    *out += fmt::format("ember:expert_parallel_imbalance{{{},layer=\"{}\"}} {}\n", labels, load_.layers[i],
                        imbalance[i]);
  }
}

}  // namespace ember::server
