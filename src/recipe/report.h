// A Recipe as JSON (`ember recipe --json`, the stable shape tests and scripts read) and as the
// human-readable tables `ember recipe` prints.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "recipe/planner.h"

namespace ember::recipe {

// Keys: ok, model, hardware, workload, checkpoint, parallelism, speculative, kv_cache,
// scheduler, weights, kv, command, decisions, warnings, refusals, rules_fired.
nlohmann::json RecipeToJson(const Recipe& recipe);
std::string RecipeToText(const Recipe& recipe);

// `ember recipe --list-hardware` and `--explain RULE`.
std::string HardwareTable();
nlohmann::json HardwareJson();
std::string ExplainRule(const Rule& rule);

}  // namespace ember::recipe
