// Token-level stop checks, run by the scheduler after each appended token: EOS (unless
// ignore_eos), stop_token_ids, max_tokens and max_model_len. EOS and stop tokens count only once
// min_tokens tokens exist (the sampler masks them before that; this is the scheduler's guard).
// Stop strings need detokenized text and live with the frontend (engine/stop_strings.h).
#pragma once

#include <cstdint>
#include <optional>

#include "engine/request.h"

namespace ember {

struct StopDecision {
  FinishReason reason = FinishReason::kNone;
  std::optional<int32_t> stop_token;  // the EOS or stop token, for kStop
};

// Whether `req` must stop now that its newest output token is appended. A stop token wins over
// the length limit when both apply to the same token.
std::optional<StopDecision> CheckTokenStop(const Request& req, int64_t max_model_len);

}  // namespace ember
