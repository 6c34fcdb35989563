#include "engine/data_parallel_client.h"

#include <algorithm>

#include "core/check.h"

namespace ember {

int PickDataParallelRank(std::span<const DataParallelLoad> loads) {
  EMBER_CHECK(!loads.empty(), "no data-parallel ranks to route to");
  int64_t least = loads[0].num_unfinished;
  for (const DataParallelLoad& l : loads) least = std::min(least, l.num_unfinished);
  int best = -1;
  for (int d = 0; d < static_cast<int>(loads.size()); ++d) {
    const DataParallelLoad& l = loads[d];
    if (l.num_unfinished > least + kPrefixRoutingSlack) continue;
    if (best < 0) {
      best = d;
      continue;
    }
    const DataParallelLoad& b = loads[best];
    // Strictly better only: ties keep the lower rank.
    if (l.cached_prefix_tokens > b.cached_prefix_tokens ||
        (l.cached_prefix_tokens == b.cached_prefix_tokens && l.num_unfinished < b.num_unfinished)) {
      best = d;
    }
  }
  return best;
}

DataParallelEngineClient::DataParallelEngineClient(std::vector<EngineCore*> cores, DataParallelExecutor* executor)
    : cores_(std::move(cores)), executor_(executor) {
  EMBER_CHECK(!cores_.empty() && executor_ != nullptr, "DataParallelEngineClient needs cores and an executor");
}

int DataParallelEngineClient::RankOf(RequestIndex index) const {
  const auto it = rank_of_.find(index);
  return it == rank_of_.end() ? -1 : it->second;
}

void DataParallelEngineClient::Drain(std::vector<RequestOutput>& events) {
  SubmissionQueue::Taken taken = queue_.Take();
  std::vector<DataParallelLoad> loads(cores_.size());
  for (auto& [index, input] : taken.submitted) {
    if (input.sampling.constraint != nullptr) {
      // A worker rank samples its own requests, and grammars do not travel between ranks.
      events.push_back(RejectedRequest(index, input,
                                       "structured outputs are not supported with --data-parallel-size > 1"));
      continue;
    }
    if (!input.mm_features.empty()) {
      events.push_back(RejectedRequest(index, input,
                                       "image, video and audio inputs are not supported with --data-parallel-size > 1"));
      continue;
    }
    for (size_t d = 0; d < cores_.size(); ++d) {
      loads[d].num_unfinished = cores_[d]->scheduler().num_unfinished();
      loads[d].cached_prefix_tokens = cores_[d]->kv_cache().CachedPrefixTokens(input.prompt_token_ids,
                                                                               input.cache_salt_key);
    }
    const int rank = PickDataParallelRank(loads);
    RequestOutput rejected = RejectedRequest(index, input, "");
    Status status = cores_[rank]->AddRequest(index, std::move(input));
    if (status.ok()) {
      rank_of_[index] = rank;
      continue;
    }
    rejected.error = status.message();
    events.push_back(std::move(rejected));
  }
  for (RequestIndex index : taken.aborted) {
    const auto it = rank_of_.find(index);
    if (it != rank_of_.end()) cores_[it->second]->AbortRequest(index);
  }
}

bool DataParallelEngineClient::CoresHaveWork() const {
  return std::any_of(cores_.begin(), cores_.end(), [](const EngineCore* c) { return c->HasUnfinished(); });
}

std::vector<RequestOutput> DataParallelEngineClient::Step() {
  std::vector<RequestOutput> events;
  Drain(events);
  if (!CoresHaveWork()) return events;
  steps_.resize(cores_.size());
  bool execute = false;
  int observed = -1;  // the watchdog sees the first rank with tokens: one step, whichever rank stalls it
  for (size_t d = 0; d < cores_.size(); ++d) {
    steps_[d] = cores_[d]->ScheduleStep();
    execute = execute || EngineCore::NeedsExecute(steps_[d]);
    if (observed < 0 && !steps_[d].empty()) observed = static_cast<int>(d);
  }
  std::vector<ModelRunnerOutput> outputs(cores_.size());
  if (execute) {
    if (observer_ != nullptr && observed >= 0) {
      step_request_ids_.clear();
      for (RequestIndex req : steps_[observed].scheduled_reqs) {
        step_request_ids_.push_back(&cores_[observed]->scheduler().Find(req)->external_id());
      }
      observer_->OnStepBegin(steps_[observed], step_request_ids_);
    }
    const auto start = Clock::now();
    outputs = executor_->ExecuteAll(steps_);
    EMBER_CHECK(outputs.size() == cores_.size(), "{} outputs for {} data-parallel ranks", outputs.size(),
                cores_.size());
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    for (ModelRunnerOutput& o : outputs) o.execute_seconds = seconds;
    if (observer_ != nullptr && observed >= 0) observer_->OnStepEnd();
  }
  for (size_t d = 0; d < cores_.size(); ++d) {
    std::vector<RequestOutput> stepped = cores_[d]->FinishStep(steps_[d], outputs[d]);
    for (RequestOutput& e : stepped) {
      if (e.finished) rank_of_.erase(e.req);
      events.push_back(std::move(e));
    }
  }
  return events;
}

bool DataParallelEngineClient::HasUnfinished() { return CoresHaveWork() || !queue_.empty(); }

void DataParallelEngineClient::WaitForWork(std::chrono::milliseconds timeout) {
  if (!CoresHaveWork()) queue_.Wait(timeout);
}

SchedulerStats DataParallelEngineClient::Stats() const {
  SchedulerStats total;
  total.spec_decode = cores_[0]->Stats().spec_decode;  // speculative decoding is off under data parallelism
  for (const EngineCore* core : cores_) {
    const SchedulerStats s = core->Stats();
    total.num_running += s.num_running;
    total.num_waiting += s.num_waiting;
    total.kv_usage += s.kv_usage / static_cast<double>(cores_.size());
    total.num_preemptions += s.num_preemptions;
    total.prefix_cache.queries += s.prefix_cache.queries;
    total.prefix_cache.hits += s.prefix_cache.hits;
    total.data_parallel_ranks.push_back({.num_running = s.num_running, .num_waiting = s.num_waiting,
                                         .kv_usage = s.kv_usage});
  }
  return total;
}

}  // namespace ember
