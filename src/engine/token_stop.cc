#include "engine/token_stop.h"

#include <algorithm>

#include "core/check.h"

namespace ember {

std::optional<StopDecision> CheckTokenStop(const Request& req, int64_t max_model_len) {
  EMBER_CHECK(req.num_output_tokens() > 0);
  const SamplingParams& sampling = req.sampling();
  const int32_t last = req.output_token_ids().back();
  if (req.num_output_tokens() >= sampling.min_tokens) {
    if (!sampling.ignore_eos && req.eos_token_id() >= 0 && last == req.eos_token_id()) {
      return StopDecision{FinishReason::kStop, last};
    }
    if (std::find(sampling.stop_token_ids.begin(), sampling.stop_token_ids.end(), last) !=
        sampling.stop_token_ids.end()) {
      return StopDecision{FinishReason::kStop, last};
    }
  }
  if (req.num_output_tokens() >= sampling.max_tokens || req.num_tokens() >= max_model_len) {
    return StopDecision{FinishReason::kLength, std::nullopt};
  }
  return std::nullopt;
}

}  // namespace ember
