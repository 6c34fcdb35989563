// Builds an expert placement from measured expert load: per layer, the experts in order of
// falling load (ties: lower index first), each given to the least-loaded rank that still has one
// of its E / N slots free (ties: lower rank). This is greedy longest-processing-time-first
// scheduling with a slot limit: cheap (E log E per layer), deterministic, and it keeps every
// rank's expert count (and so its expert memory) equal. It cannot split one expert hotter than a
// rank's fair share: that needs replicas of hot experts (EPLB's redundant experts), not built.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "exec/expert_load.h"
#include "exec/expert_placement.h"

namespace ember::exec {

// One layer: expert -> rank for `tokens` (one count per expert) over `ep_size` ranks.
// InvalidArgument unless ep_size divides the expert count.
Expected<std::vector<int32_t>> BalanceLayer(std::span<const int64_t> tokens, int ep_size);

// Every layer of `load` balanced on its own; layers it did not count keep the contiguous default.
// `num_layers` (0: unknown) is recorded in the placement for the model check.
Expected<ExpertPlacement> BalancePlacement(const ExpertLoad& load, int ep_size, int64_t num_layers = 0);

}  // namespace ember::exec
