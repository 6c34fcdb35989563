// ember placement --counts FILE --expert-parallel-size N --out FILE: an expert placement built
// from measured expert load (`ember bench ... --expert-load-out FILE`) by the greedy balancer of
// exec/expert_balancer.h, written for `--expert-placement`. It prints, per counted layer, the
// busiest rank over the mean rank under the contiguous layout and under the new map.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "exec/expert_balancer.h"
#include "exec/expert_json.h"
#include "tools/ember/commands.h"
#include "tools/ember/common.h"

namespace ember::tools {
namespace {

struct PlacementOptions {
  std::string counts;
  std::string out;
  int expert_parallel_size = 0;
  bool json = false;
};

int RunPlacement(const PlacementOptions& o) {
  auto file = exec::ReadExpertLoadFile(o.counts);
  if (!file.ok()) return Fail(file.status());
  const exec::ExpertLoad& load = file->load;
  auto contiguous = exec::ExpertPlacement::Contiguous(load.num_experts, o.expert_parallel_size);
  if (!contiguous.ok()) return Fail(contiguous.status());
  auto balanced = exec::BalancePlacement(load, o.expert_parallel_size, file->num_layers);
  if (!balanced.ok()) return Fail(balanced.status());
  if (Status s = exec::WriteExpertPlacementFile(o.out, *balanced); !s.ok()) return Fail(s);
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  double worst_before = 0, worst_after = 0;
  for (size_t i = 0; i < load.num_rows(); ++i) {
    const double before = exec::MaxOverMean(exec::RankTokens(load.row(i), *contiguous, load.layers[i]));
    const double after = exec::MaxOverMean(exec::RankTokens(load.row(i), *balanced, load.layers[i]));
    worst_before = std::max(worst_before, before);
    worst_after = std::max(worst_after, after);
    layers.push_back({{"layer", load.layers[i]}, {"contiguous", before}, {"balanced", after}});
  }
  if (o.json) {
    const nlohmann::ordered_json out = {{"out", o.out},
                                        {"expert_parallel_size", o.expert_parallel_size},
                                        {"rank_max_over_mean", {{"contiguous", worst_before}, {"balanced", worst_after}}},
                                        {"layers", layers}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("wrote %s: %lld experts over %d ranks, %zu layers balanced\n", o.out.c_str(),
              static_cast<long long>(load.num_experts), o.expert_parallel_size, load.num_rows());
  std::printf("  %5s %22s %22s\n", "layer", "contiguous rank max/mean", "balanced rank max/mean");
  for (const auto& layer : layers) {
    std::printf("  %5d %22.3f %22.3f\n", layer["layer"].get<int>(), layer["contiguous"].get<double>(),
                layer["balanced"].get<double>());
  }
  std::printf("  worst layer: %.3f contiguous, %.3f balanced\n", worst_before, worst_after);
  return 0;
}

}  // namespace

void RegisterPlacementCommand(CLI::App& app) {
  auto o = std::make_shared<PlacementOptions>();
  CLI::App* cmd = app.add_subcommand(
      "placement", "Expert placement for --expert-placement from measured expert load (greedy, E/N experts per rank)");
  cmd->add_option("--counts", o->counts, "Expert load JSON (`ember bench ... --expert-load-out FILE`)")->required();
  cmd->add_option("--expert-parallel-size", o->expert_parallel_size, "Expert-parallel ranks (must divide the experts)")
      ->required()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--out", o->out, "Where to write the placement JSON")->required();
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([o] { SetExitCode(RunPlacement(*o)); });
}

}  // namespace ember::tools
