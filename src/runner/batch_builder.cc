#include "runner/batch_builder.h"

#include <algorithm>

#include "core/check.h"

namespace ember {

BuiltBatch BuildForwardBatch(const std::vector<const RunnerRequest*>& requests,
                             const std::vector<int32_t>& num_scheduled_tokens,
                             const std::vector<std::vector<int32_t>>& spec_tokens, int64_t block_size) {
  EMBER_CHECK(requests.size() == num_scheduled_tokens.size());
  EMBER_CHECK(spec_tokens.empty() || spec_tokens.size() == requests.size());
  BuiltBatch built;
  ForwardBatch& b = built.batch;
  const size_t num_groups = requests.empty() ? 0 : requests.front()->block_ids.size();
  b.groups.resize(num_groups);
  b.query_start_loc.push_back(0);
  for (size_t g = 0; g < num_groups; ++g) {
    int32_t widest = 0;
    for (const RunnerRequest* r : requests) widest = std::max<int32_t>(widest, r->block_ids[g].size());
    b.groups[g].max_blocks_per_req = widest;
    b.groups[g].block_table.assign(requests.size() * widest, kv::kNullBlock);
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    const RunnerRequest& r = *requests[i];
    const int64_t first = r.num_computed_tokens;
    const int64_t count = num_scheduled_tokens[i];
    static const std::vector<int32_t> kNoDraft;
    const std::vector<int32_t>& draft = spec_tokens.empty() ? kNoDraft : spec_tokens[i];
    const int64_t known = r.num_tokens();
    const int64_t num_draft = static_cast<int64_t>(draft.size());
    EMBER_CHECK(count > 0 && first + count <= known + num_draft);
    // A draft is verified from the last known token on, so that token's row is computed too.
    EMBER_CHECK(num_draft == 0 || (first < known && first + count == known + num_draft),
                "request {}: draft of {} after {} of {} tokens, {} scheduled", r.req, num_draft, first, known, count);
    for (int64_t p = first; p < first + count; ++p) {
      b.token_ids.push_back(p < known ? r.TokenAt(p) : draft[p - known]);
      b.positions.push_back(static_cast<int32_t>(p));
    }
    b.query_start_loc.push_back(static_cast<int32_t>(b.token_ids.size()));
    b.seq_lens.push_back(static_cast<int32_t>(first + count));
    for (size_t g = 0; g < num_groups; ++g) {
      KvGroupTable& table = b.groups[g];
      const std::vector<kv::BlockId>& blocks = r.block_ids[g];
      EMBER_CHECK(static_cast<int64_t>(blocks.size()) * block_size >= first + count);
      std::copy(blocks.begin(), blocks.end(), table.block_table.begin() + i * table.max_blocks_per_req);
      for (int64_t p = first; p < first + count; ++p) {
        table.slot_mapping.push_back(static_cast<int64_t>(blocks[p / block_size]) * block_size + p % block_size);
      }
    }
    // Sample only once the request's every known token has been computed.
    if (first + count == known + num_draft) {
      built.logits_row_of_request.push_back(static_cast<int32_t>(b.logits_indices.size()));
      for (int64_t j = num_draft; j >= 0; --j) b.logits_indices.push_back(static_cast<int32_t>(b.token_ids.size() - 1 - j));
    } else {
      built.logits_row_of_request.push_back(-1);
    }
  }
  // After every sampled row, so the sampler reads its rows as one block in request order.
  built.prompt_rows_of_request.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const RunnerRequest& r = *requests[i];
    if (!r.sampling.prompt_logprobs) continue;
    const int64_t first = r.num_computed_tokens;
    const int64_t last_scored = r.num_prompt_tokens - 1;  // has no next prompt token
    const int64_t count = std::min<int64_t>(first + num_scheduled_tokens[i], last_scored) - first;
    if (count <= 0) continue;
    built.prompt_rows_of_request[i] = {static_cast<int32_t>(b.logits_indices.size()), static_cast<int32_t>(count)};
    for (int64_t j = 0; j < count; ++j) b.logits_indices.push_back(static_cast<int32_t>(b.query_start_loc[i] + j));
  }
  return built;
}

}  // namespace ember
