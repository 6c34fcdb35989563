// ember generate --jsonl: many prompts through the engine (see generate_jsonl.cc).
#pragma once

#include <string>

#include "tools/ember/engine_options.h"

namespace ember::tools {

int RunGenerateJsonl(const std::string& model_path, const std::string& jsonl_path, EngineFlags& flags);

}  // namespace ember::tools
