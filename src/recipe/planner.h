// PlanRecipe: model x hardware x workload -> settings, memory figures, an `ember serve` command,
// and the warnings and refusals of the rules that fired. The order is
//   1. facts from the inputs (model, hardware, workload),
//   2. choose rules in file order assign settings (the user's fixed settings are kept),
//   3. memory arithmetic for the chosen checkpoint and parallel shape (memory.h),
//   4. check rules over everything, including the derived memory facts.
// No rule is code: this file only evaluates the rule table (rules.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "recipe/memory.h"
#include "recipe/model_source.h"
#include "recipe/rules.h"
#include "recipe/serve_args.h"

namespace ember::recipe {

struct Workload {
  int64_t concurrency = 1;  // requests in flight the deployment should serve at once
  int64_t context_len = 0;  // longest request (prompt + output); 0: the platform default
  int64_t input_len = 0;    // typical prompt tokens (0: unknown)
  int64_t output_len = 0;   // typical output tokens (0: unknown)
  std::vector<std::string> modalities = {"text"};  // text, image, video, audio
  std::string goal = "latency";                    // latency or throughput
  std::string speculative = "auto";                // on, off or auto
};

struct RecipeRequest {
  std::string model = kMuseSparkOpenPreset;
  std::string hardware = "cpu";
  int64_t devices_per_node = 0;  // 0: the preset's
  int64_t nodes = 1;
  double device_memory_gb = 0;   // > 0 overrides the preset (and the CPU's detected memory)
  Workload workload;
  Facts fixed;                   // settings the user fixed (flags, or a serve command under --check)
};

struct Finding {
  std::string rule_id;
  std::string message;
  RuleSource source;
};

struct Decision {
  std::string setting;
  Value value;
  std::string rule_id;  // the last rule that set it, or "user"
};

struct Recipe {
  RecipeRequest request;
  ModelDescription model;
  HardwareProfile hardware;
  int64_t device_memory_bytes = 0;
  Facts facts;  // inputs, settings and derived facts, as the rules saw them at the end
  std::vector<Decision> decisions;
  std::vector<std::string> fired;  // rule ids in firing order
  std::vector<Finding> warnings;
  std::vector<Finding> refusals;
  std::vector<TensorEntry> tensors;
  MemoryPlan memory;
  double hybrid_kv_ratio = 0;  // KV of one max_model_len sequence over an all-full-attention design
  kv::KvDtype kv_dtype = kv::KvDtype::kBF16;
  ServeCommand command;

  bool ok() const { return refusals.empty(); }
};

Expected<Recipe> PlanRecipe(const RecipeRequest& request);

// Settings an `ember serve` command line fixes, applied to `request` (model included) for --check.
Status ApplyServeCommand(const std::vector<std::string>& serve_args, RecipeRequest* request);

}  // namespace ember::recipe
