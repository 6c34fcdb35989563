#include "runner/request_state.h"

#include <fmt/format.h>

namespace ember {

Status RequestStates::CheckGroups(const kv::KvBlocks& blocks, RequestIndex req) const {
  if (static_cast<int>(blocks.per_group.size()) != num_kv_groups_) {
    return Internal(fmt::format("request {}: {} KV groups in the scheduler output, the runner has {}", req,
                                blocks.per_group.size(), num_kv_groups_));
  }
  return Status::Ok();
}

Status RequestStates::Apply(const SchedulerOutput& output) {
  for (RequestIndex req : output.finished_reqs) requests_.erase(req);
  for (RequestIndex req : output.preempted_reqs) requests_.erase(req);
  for (const NewRequestData& n : output.new_reqs) {
    EMBER_RETURN_IF_ERROR(CheckGroups(n.block_ids, n.req));
    RunnerRequest r;
    r.req = n.req;
    r.tokens = n.prompt_token_ids;
    r.tokens.insert(r.tokens.end(), n.output_token_ids.begin(), n.output_token_ids.end());
    r.num_prompt_tokens = static_cast<int64_t>(n.prompt_token_ids.size());
    r.sampling = n.sampling;
    r.seed = n.sampling.seed.value_or(0);
    r.eos_token_id = n.eos_token_id;
    r.block_ids = n.block_ids.per_group;
    r.num_computed_tokens = n.num_computed_tokens;
    r.cache_salt_key = n.cache_salt_key;
    r.mm_features = n.mm_features;
    r.block_content = BlockContentOf(n.mm_features);
    requests_[n.req] = std::move(r);
  }
  for (const CachedRequestData& c : output.cached_reqs) {
    RunnerRequest* r = Find(c.req);
    if (r == nullptr) return Internal(fmt::format("scheduler output updates unknown request {}", c.req));
    EMBER_RETURN_IF_ERROR(CheckGroups(c.new_block_ids, c.req));
    if (!c.num_kept_blocks.empty()) {
      // Rejected draft tokens gave blocks back: cut the lists first.
      if (c.num_kept_blocks.size() != r->block_ids.size()) {
        return Internal(fmt::format("request {}: {} kept-block counts for {} KV groups", c.req,
                                    c.num_kept_blocks.size(), r->block_ids.size()));
      }
      for (size_t g = 0; g < r->block_ids.size(); ++g) {
        if (c.num_kept_blocks[g] < 0 || static_cast<size_t>(c.num_kept_blocks[g]) > r->block_ids[g].size()) {
          return Internal(fmt::format("request {} keeps {} of its {} blocks in group {}", c.req, c.num_kept_blocks[g],
                                      r->block_ids[g].size(), g));
        }
        r->block_ids[g].resize(c.num_kept_blocks[g]);
      }
    }
    for (size_t g = 0; g < r->block_ids.size(); ++g) {
      const std::vector<kv::BlockId>& added = c.new_block_ids.per_group[g];
      r->block_ids[g].insert(r->block_ids[g].end(), added.begin(), added.end());
    }
    r->num_computed_tokens = c.num_computed_tokens;
  }
  for (RequestIndex req : output.scheduled_reqs) {
    if (Find(req) == nullptr) return Internal(fmt::format("scheduler output schedules unknown request {}", req));
  }
  return Status::Ok();
}

RunnerRequest* RequestStates::Find(RequestIndex req) {
  auto it = requests_.find(req);
  return it == requests_.end() ? nullptr : &it->second;
}

}  // namespace ember
