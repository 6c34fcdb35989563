// The `ember serve` command line of a recipe, and the reverse: the settings an `ember serve`
// command line implies, for `ember recipe --check -- serve ...`.
//
// Flags split in two: those `ember serve` accepts today (tools/ember/serve_command.cc and
// engine_options.cc; tests/e2e/test_recipe.py runs the emitted command to prove it) and future
// flags of the target deployment (vLLM's names: --tensor-parallel-size, --enable-expert-parallel,
// --speculative-config, ...), which the command lists separately so nobody mistakes them for
// working options.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "recipe/expr.h"

namespace ember::recipe {

struct ServeCommand {
  std::vector<std::string> argv;          // "ember", "serve", MODEL, accepted flags
  std::vector<std::string> future_flags;  // not accepted by ember serve yet
  std::vector<std::string> notes;         // how to run it (instances, environment)
  // argv shell-quoted; future flags follow a "# future:" comment when there are any.
  std::string Line() const;
};

struct ServeInputs {
  std::string model;            // the MODEL argument
  Facts settings;               // the recipe's settings (SettingNames)
  int64_t kv_cache_memory = 0;  // > 0: pass --kv-cache-memory (CPU sizing); else per-device utilization
  double memory_utilization = 0.9;
  bool accelerator = false;     // GPU/TPU: --gpu-memory-utilization is part of the future flags
};

ServeCommand BuildServeCommand(const ServeInputs& in);

struct ParsedServe {
  std::string model;
  Facts settings;  // every setting the command determines, with ember serve's defaults filled in
  int64_t kv_cache_memory = 0;
};

// `args` begins with "serve" (an optional leading "ember" is skipped). Unknown flags are errors
// that name the flag.
Expected<ParsedServe> ParseServeCommand(const std::vector<std::string>& args);

}  // namespace ember::recipe
