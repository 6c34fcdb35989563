// Builds the model's ForwardBatch for one step from the scheduled requests: their new tokens and
// positions, per KV group the block-table rows and the slot each new token's K/V goes to, and the
// rows whose logits are wanted: first the sampled ones (a request's last row when this step
// reaches its last known token, and every draft token's row when it verifies a draft), then, for requests with prompt_logprobs, every scheduled prompt
// position that has a next prompt token to score.
#pragma once

#include <vector>

#include "model/forward_batch.h"
#include "runner/request_state.h"

namespace ember {

struct BuiltBatch {
  ForwardBatch batch;
  // Per scheduled request (batch order): the index into batch.logits_indices of its first sampled
  // row, or -1 when this step only advances its prefill. A request verifying k draft tokens has
  // k + 1 consecutive sampled rows (its last known token and each draft token), others one.
  std::vector<int32_t> logits_row_of_request;
  // Per scheduled request: its prompt-logprob rows are logits rows [first_row, first_row + count),
  // for positions num_computed_tokens .. + count - 1 (count 0: none this step).
  struct PromptRows {
    int32_t first_row = 0;
    int32_t count = 0;
  };
  std::vector<PromptRows> prompt_rows_of_request;
};

// `requests[i]` is scheduled for `num_scheduled_tokens[i]` tokens from its num_computed_tokens;
// the last spec_tokens[i].size() of them are draft tokens past its known tokens (`spec_tokens`
// empty: no request speculates).
BuiltBatch BuildForwardBatch(const std::vector<const RunnerRequest*>& requests,
                             const std::vector<int32_t>& num_scheduled_tokens,
                             const std::vector<std::vector<int32_t>>& spec_tokens, int64_t block_size);

}  // namespace ember
