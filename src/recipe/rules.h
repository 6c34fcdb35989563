// The recipe's tables as data: deployment rules (rules.json) and hardware presets
// (hardware.json), parsed and validated against the planner's vocabulary of facts and settings.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "recipe/expr.h"

namespace ember::recipe {

// The vocabulary rules may use. Inputs describe the model, hardware and workload; settings are
// what the recipe decides (choose rules assign them); derived facts exist only after the memory
// arithmetic, so only check rules may read them.
const std::vector<std::string>& InputFactNames();
const std::vector<std::string>& SettingNames();
const std::vector<std::string>& DerivedFactNames();

struct RuleSource {
  std::string doc;    // "seeds/003_e552a28f647367a8.txt", "muse_spark.md §5 [S46]", ...
  std::string quote;  // the sentence the rule encodes
};

struct Rule {
  enum class Stage { kChoose, kCheck };
  std::string id;
  Stage stage = Stage::kChoose;
  // A default only fills in a value; when the user fixed that setting, disagreeing is not news.
  bool is_default = false;
  Expr when;
  std::vector<std::pair<std::string, Expr>> set;  // setting name -> value expression
  std::string warn;    // message template: {fact} is replaced by the fact's value
  std::string refuse;  // message template
  RuleSource source;
};

Expected<std::vector<Rule>> ParseRules(std::string_view json_text);
const std::vector<Rule>& BuiltinRules();
const Rule* FindRule(std::string_view id);

// Replaces each {name} in `message` with that fact's value (strings without quotes).
std::string FillMessage(const std::string& message, const Facts& facts);

struct HardwareProfile {
  std::string name;    // b200, mi355x, cpu, ...
  std::string vendor;  // nvidia, amd, google, cpu
  std::string description;
  double memory_gb = 0;  // per device, decimal GB; 0 = this machine's available memory
  int64_t devices_per_node = 1;
  std::string interconnect;
  double memory_utilization = 0.9;
  bool kv_as_needed = false;  // size the KV cache for the workload (CPU) instead of all free memory
  double kv_max_fraction = 1.0;
  std::string source;
};

Expected<std::vector<HardwareProfile>> ParseHardware(std::string_view json_text);
const std::vector<HardwareProfile>& BuiltinHardware();
Expected<const HardwareProfile*> FindHardware(std::string_view name);

}  // namespace ember::recipe
