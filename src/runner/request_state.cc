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
    r.prompt_token_ids = n.prompt_token_ids;
    r.output_token_ids = n.output_token_ids;
    r.sampling = n.sampling;
    r.seed = n.sampling.seed.value_or(0);
    r.block_ids = n.block_ids.per_group;
    r.num_computed_tokens = n.num_computed_tokens;
    requests_[n.req] = std::move(r);
  }
  for (const CachedRequestData& c : output.cached_reqs) {
    RunnerRequest* r = Find(c.req);
    if (r == nullptr) return Internal(fmt::format("scheduler output updates unknown request {}", c.req));
    EMBER_RETURN_IF_ERROR(CheckGroups(c.new_block_ids, c.req));
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
