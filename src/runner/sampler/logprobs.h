// Logprobs returned to the client. Like vLLM v1's default (logprobs_mode = "raw_logprobs") they
// describe the model's own distribution: the log-softmax of the raw logits, before penalties,
// masks, temperature and top-k/top-p/min-p. So a token the filters made impossible still has its
// model logprob, and the numbers do not change with sampling settings.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "engine/scheduler_output.h"

namespace ember {

// log-softmax of `logits` at `token`, plus the `num_top` most likely tokens, best first, ties to
// the lower id. Sums in double, so each value is within a few float ulps of the exact one.
TokenLogprobs ComputeTokenLogprobs(std::span<const float> logits, int32_t token, int32_t num_top);

// ComputeTokenLogprobs of each row of `logits` ([tokens.size(), vocab], row-major) at tokens[i]:
// prompt logprobs, where row i scores the prompt token that follows it. Rows run in parallel on
// `pool` when given; each row's values do not depend on the split.
std::vector<TokenLogprobs> ComputeRowLogprobs(std::span<const float> logits, std::span<const int32_t> tokens,
                                              int32_t num_top, ThreadPool* pool);

}  // namespace ember
