// The runner's persistent view of the requests it is computing (vLLM's InputBatch / CachedRequestState):
// created from NewRequestData, updated from each step's diff, dropped when the scheduler says the
// request finished or was preempted. The runner appends the tokens it samples itself, so the
// scheduler never resends token ids.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "engine/scheduler_output.h"

namespace ember {

struct RunnerRequest {
  RequestIndex req = 0;
  std::vector<int32_t> tokens;  // prompt then output, as one sequence (what proposers read)
  int64_t num_prompt_tokens = 0;
  SamplingParams sampling;
  uint64_t seed = 0;
  int32_t eos_token_id = -1;  // what ends the request besides sampling.stop_token_ids (unless ignore_eos)
  std::vector<std::vector<kv::BlockId>> block_ids;  // per KV group
  int64_t num_computed_tokens = 0;
  uint64_t cache_salt_key = 0;
  std::vector<MultiModalFeature> mm_features;  // in prompt order (NewRequestData::mm_features)
  std::vector<kv::ExtraContent> block_content;  // BlockContentOf(mm_features): the prefix-cache keys

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  std::span<const int32_t> prompt_token_ids() const { return std::span(tokens).first(num_prompt_tokens); }
  std::span<const int32_t> output_token_ids() const { return std::span(tokens).subspan(num_prompt_tokens); }
  int32_t TokenAt(int64_t position) const { return tokens[position]; }
};

class RequestStates {
 public:
  explicit RequestStates(int num_kv_groups) : num_kv_groups_(num_kv_groups) {}

  // Applies the step's diff: drops finished and preempted requests, adds new ones, appends new
  // blocks and takes the scheduler's num_computed_tokens for known ones. A diff naming an unknown
  // request or the wrong number of KV groups is a contract violation (a bug), reported as Status.
  Status Apply(const SchedulerOutput& output);

  RunnerRequest* Find(RequestIndex req);
  // Calls `f(request, finished)` for each request the diff drops (finished, or preempted), before
  // Apply forgets it: proposers drop their state then.
  template <typename F>
  void ForEachDropped(const SchedulerOutput& output, F&& f) {
    for (RequestIndex req : output.finished_reqs) {
      if (RunnerRequest* r = Find(req)) f(*r, true);
    }
    for (RequestIndex req : output.preempted_reqs) {
      if (RunnerRequest* r = Find(req)) f(*r, false);
    }
  }
  size_t size() const { return requests_.size(); }

 private:
  Status CheckGroups(const kv::KvBlocks& blocks, RequestIndex req) const;

  int num_kv_groups_;
  std::unordered_map<RequestIndex, RunnerRequest> requests_;
};

}  // namespace ember
