// Loading a DSpark drafter for `{"method":"dspark","model":DIR}`: what LocalEngine calls. The
// drafter borrows the loaded target's embedding table, lm_head and final norm (CausalLM's
// accessors), so the target must outlive the proposer.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "model/causal_lm.h"
#include "spec/dspark/dspark_proposer.h"

namespace ember::spec::dspark {

// Reads `<dir>/config.json` (and calibration.json), checks the drafter fits `target` (hidden
// size, vocabulary, taps within its layers, num_speculative_tokens within the block), binds the
// checkpoint strictly and creates the proposer. Errors name the field or tensor.
Expected<std::unique_ptr<DSparkProposer>> LoadDSparkProposer(const std::string& dir, const CausalLM& target,
                                                             const DSparkProposerOptions& options);

}  // namespace ember::spec::dspark
