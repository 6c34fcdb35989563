#include "tools/ember/bench/expert_load_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "exec/expert_json.h"

namespace ember::tools {
namespace {

using Json = nlohmann::ordered_json;

Json MeanAndMax(const std::vector<double>& values) {
  if (values.empty()) return {{"mean", 0.0}, {"max", 0.0}};
  const double sum = std::accumulate(values.begin(), values.end(), 0.0);
  return {{"mean", sum / static_cast<double>(values.size())}, {"max", *std::max_element(values.begin(), values.end())}};
}

// The `top` experts with the most tokens, most first (ties: lower index).
Json Hottest(std::span<const int64_t> tokens, int top) {
  std::vector<int32_t> order(tokens.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t n = std::min(order.size(), static_cast<size_t>(std::max(top, 0)));
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                    [&](int32_t a, int32_t b) { return tokens[a] > tokens[b] || (tokens[a] == tokens[b] && a < b); });
  Json hottest = Json::array();
  for (size_t i = 0; i < n; ++i) hottest.push_back({{"expert", order[i]}, {"tokens", tokens[order[i]]}});
  return hottest;
}

}  // namespace

void AddExpertLoadOptions(CLI::App* cmd, ExpertLoadFlags* flags) {
  cmd->add_option("--expert-parallel-size", flags->expert_parallel_size,
                  "MoE models: report each expert-parallel rank's share of the measured load for this many ranks "
                  "(contiguous experts per rank, or --expert-placement's map); nothing runs expert-parallel")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--expert-load-out", flags->out,
                  "MoE models: write the measured tokens per layer and expert as JSON (input of `ember placement`)");
  cmd->add_option("--expert-load-top", flags->top, "MoE models: hottest experts listed per layer")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
}

Expected<std::shared_ptr<const exec::ExpertPlacement>> ReportLayout(
    const ExpertLoadFlags& flags, std::shared_ptr<const exec::ExpertPlacement> given, int64_t num_experts) {
  if (num_experts == 0 && (!flags.out.empty() || flags.expert_parallel_size > 0)) {
    return InvalidArgument("--expert-load-out and --expert-parallel-size need a mixture-of-experts model");
  }
  if (given) {
    if (flags.expert_parallel_size > 0 && flags.expert_parallel_size != given->ep_size()) {
      return InvalidArgument(fmt::format("--expert-parallel-size {} differs from the --expert-placement map's ep_size {}",
                                         flags.expert_parallel_size, given->ep_size()));
    }
    return given;
  }
  if (flags.expert_parallel_size == 0) return std::shared_ptr<const exec::ExpertPlacement>();
  auto contiguous = exec::ExpertPlacement::Contiguous(num_experts, flags.expert_parallel_size);
  if (!contiguous.ok()) return InvalidArgument("--expert-parallel-size: " + contiguous.status().message());
  return std::make_shared<const exec::ExpertPlacement>(std::move(*contiguous));
}

Json ExpertLoadReport(const exec::ExpertLoad& load, const exec::ExpertPlacement* layout, int top) {
  Json layers = Json::array();
  std::vector<double> expert_ratios, rank_ratios;
  int64_t tokens = 0;
  for (size_t i = 0; i < load.num_rows(); ++i) {
    const std::span<const int64_t> row = load.row(i);
    const int64_t routed = std::accumulate(row.begin(), row.end(), int64_t{0});
    tokens = std::max(tokens, load.top_k > 0 ? routed / load.top_k : routed);
    Json layer = {{"layer", load.layers[i]},
                  {"routed", routed},
                  {"max_over_mean", exec::MaxOverMean(row)},
                  {"hottest", Hottest(row, top)}};
    expert_ratios.push_back(layer["max_over_mean"].get<double>());
    if (layout != nullptr) {
      const std::vector<int64_t> ranks = exec::RankTokens(row, *layout, load.layers[i]);
      layer["rank_tokens"] = ranks;
      layer["rank_max_over_mean"] = exec::MaxOverMean(ranks);
      rank_ratios.push_back(exec::MaxOverMean(ranks));
    }
    layers.push_back(std::move(layer));
  }
  Json report = {{"num_experts", load.num_experts}, {"top_k", load.top_k}, {"tokens", tokens},
                 {"max_over_mean", MeanAndMax(expert_ratios)}};
  if (layout != nullptr) {
    report["expert_parallel_size"] = layout->ep_size();
    report["placement"] = layout->is_contiguous() ? "contiguous" : "map";
    report["rank_max_over_mean"] = MeanAndMax(rank_ratios);
  }
  report["layers"] = std::move(layers);
  return report;
}

void PrintExpertLoadSection(const Json& out) {
  if (!out.contains("expert_load")) return;
  const Json& r = out["expert_load"];
  const bool ranks = r.contains("expert_parallel_size");
  std::printf("expert load: %lld tokens, %lld experts, top-%lld; max/mean over experts %.2f mean, %.2f worst layer\n",
              static_cast<long long>(r["tokens"].get<int64_t>()), static_cast<long long>(r["num_experts"].get<int64_t>()),
              static_cast<long long>(r["top_k"].get<int64_t>()), r["max_over_mean"]["mean"].get<double>(),
              r["max_over_mean"]["max"].get<double>());
  if (ranks) {
    std::printf("  expert parallel %d (%s): max/mean over ranks %.2f mean, %.2f worst layer\n",
                r["expert_parallel_size"].get<int>(), r["placement"].get<std::string>().c_str(),
                r["rank_max_over_mean"]["mean"].get<double>(), r["rank_max_over_mean"]["max"].get<double>());
  }
  std::printf("  %5s %9s %s%s\n", "layer", "max/mean", ranks ? "rank max/mean " : "", "hottest experts (tokens)");
  for (const Json& layer : r["layers"]) {
    std::string hottest;
    for (const Json& h : layer["hottest"]) {
      hottest += fmt::format("{}{} ({})", hottest.empty() ? "" : ", ", h["expert"].get<int>(), h["tokens"].get<int64_t>());
    }
    const std::string rank = ranks ? fmt::format("{:13.2f} ", layer["rank_max_over_mean"].get<double>()) : "";
    std::printf("  %5d %9.2f %s%s\n", layer["layer"].get<int>(), layer["max_over_mean"].get<double>(), rank.c_str(),
                hottest.c_str());
  }
}

Status AddExpertLoadSection(const ExpertLoadFlags& flags, const exec::ExpertLoad& load, int64_t num_layers,
                            const exec::ExpertPlacement* layout, Json* out) {
  if (load.empty()) return Status::Ok();
  (*out)["expert_load"] = ExpertLoadReport(load, layout, flags.top);
  if (!flags.out.empty()) EMBER_RETURN_IF_ERROR(exec::WriteExpertLoadFile(flags.out, load, num_layers));
  return Status::Ok();
}

}  // namespace ember::tools
