// The expert-load section of `ember bench` (throughput and --model) for mixture-of-experts models:
// per MoE layer the hottest experts and max / mean tokens over the experts, and, for an
// expert-parallel layout (--expert-parallel-size N: rank r holds experts [r E / N, (r + 1) E / N),
// or the map of --expert-placement), each rank's tokens and max / mean over the ranks. The layout
// is hypothetical: nothing runs expert-parallel here, the counts say what it would face.
// --expert-load-out FILE writes the counts (exec/expert_json.h) for `ember placement`.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "exec/expert_load.h"
#include "exec/expert_placement.h"

namespace ember::tools {

struct ExpertLoadFlags {
  int expert_parallel_size = 0;  // 0: --expert-placement's ep_size, or no per-rank figures
  std::string out;               // --expert-load-out
  int top = 4;                   // hottest experts listed per layer
};

void AddExpertLoadOptions(CLI::App* cmd, ExpertLoadFlags* flags);

// Checked before the benchmark runs, for a model with `num_experts` routed experts (0: dense, where
// any of these flags is an error): the layout the per-rank figures follow. That is `given`
// (--expert-placement), whose ep_size must then equal a given --expert-parallel-size; else the
// contiguous layout over --expert-parallel-size ranks; else null (no per-rank figures).
Expected<std::shared_ptr<const exec::ExpertPlacement>> ReportLayout(
    const ExpertLoadFlags& flags, std::shared_ptr<const exec::ExpertPlacement> given, int64_t num_experts);

// {"num_experts", "top_k", "tokens" (tokens through a layer: its routed pairs / top_k),
//  "max_over_mean": {"mean", "max"} over layers, ["expert_parallel_size", "placement"
//  ("contiguous" or "map"), "rank_max_over_mean": {"mean", "max"}],
//  "layers": [{"layer", "routed" (token-expert pairs), "max_over_mean",
//              "hottest": [{"expert", "tokens"}], ["rank_tokens", "rank_max_over_mean"]}]}
nlohmann::ordered_json ExpertLoadReport(const exec::ExpertLoad& load, const exec::ExpertPlacement* layout, int top);

// For a bench command: nothing for a dense model (empty `load`); otherwise the report under
// out["expert_load"] and the counts written to --expert-load-out. `num_layers`: the model's.
Status AddExpertLoadSection(const ExpertLoadFlags& flags, const exec::ExpertLoad& load, int64_t num_layers,
                            const exec::ExpertPlacement* layout, nlohmann::ordered_json* out);
// The text form of out["expert_load"], if there is one.
void PrintExpertLoadSection(const nlohmann::ordered_json& out);

}  // namespace ember::tools
