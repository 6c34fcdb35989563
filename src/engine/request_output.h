// Scheduler -> frontend: what one step produced for one request. The frontend detokenizes
// new_token_ids incrementally, applies stop strings, and streams; a finished event is the last
// one a request ever gets (it is sent exactly once, whatever ended the request).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/scheduler_output.h"

namespace ember {

struct RequestOutput {
  RequestIndex req = 0;
  std::string external_id;
  std::vector<int32_t> new_token_ids;       // in order; a stop token that ended the request is included
  std::vector<TokenLogprobs> new_logprobs;  // parallel to new_token_ids when logprobs were requested
  // With prompt_logprobs, in the event of the first generated token: entry k for prompt token
  // k + 1 (the first prompt token has none, as in vLLM).
  std::vector<TokenLogprobs> prompt_logprobs;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::optional<int32_t> stop_token;        // which stop token ended it (vLLM's stop_reason)
  std::string error;                        // for kError: what went wrong and what to do
  // Usage counters (OpenAI usage; cached = prompt tokens served from the prefix cache).
  int64_t num_prompt_tokens = 0;
  int64_t num_output_tokens = 0;
  int64_t num_cached_tokens = 0;
  RequestTimes times;
  // Disaggregation, a producer's final event: where this request's prompt KV waits for a consumer
  // (the response's kv_transfer_params).
  std::optional<RemoteKv> kv_transfer_params;
};

}  // namespace ember
