// Helpers shared by the ember subcommands.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/causal_lm.h"

namespace ember::tools {

// Prints "ember: error: <message>" to stderr and returns the exit status 1.
int Fail(const Status& status);
// "1,2, 3" -> {1, 2, 3}; rejects anything that is not a comma-separated list of non-negative ints.
Expected<std::vector<int32_t>> ParseTokenIds(const std::string& text);
// LoadModel with a startup log line (architecture, weight bytes, ISA, threads, load time).
Expected<std::unique_ptr<CausalLM>> LoadModelWithLog(const std::string& model_dir);

}  // namespace ember::tools
