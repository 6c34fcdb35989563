// Loading a draft model for `{"method":"draft_model","model":PATH}`: what LocalEngine calls when
// the speculative config names a drafter.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "model/causal_lm.h"
#include "spec/draft_model_proposer.h"

namespace ember::spec {

// Loads the drafter at `drafter_path` (a .gguf file or a model directory, as LoadModel), checks
// that its tokenizer matches the one at `target_path` (spec/vocabulary_check.h) and creates the
// proposer for the target `target` (vocab_size must match too). Errors name the mismatch.
Expected<std::unique_ptr<DraftModelProposer>> LoadDraftModelProposer(const std::string& drafter_path,
                                                                     const std::string& target_path,
                                                                     const ModelInfo& target,
                                                                     const DraftModelProposerOptions& options,
                                                                     const LoadOptions& load_options = {});

}  // namespace ember::spec
