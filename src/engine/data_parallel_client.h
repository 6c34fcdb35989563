// Data-parallel attention with expert parallelism (DEP) as the front end sees it: one engine core
// (scheduler + KV manager) per data-parallel rank, all on the driving rank, stepped in lockstep.
// Each submitted request goes to one rank's core (PickDataParallelRank); each step schedules every
// core, hands all the outputs to a DataParallelExecutor at once (src/parallel runs rank d's output
// on rank d, and a rank with nothing scheduled joins the MoE exchanges with 0 tokens), and gives
// each core its rank's result. Like InProcessEngineClient, Submit/Abort queue under a mutex and
// the loop thread alone touches the cores.
#pragma once

#include <chrono>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/engine_client.h"
#include "engine/engine_core.h"

namespace ember {

class DataParallelExecutor {
 public:
  virtual ~DataParallelExecutor() = default;
  // One lockstep step: steps[d] is data-parallel rank d's SchedulerOutput (any may schedule
  // nothing); returns rank d's ModelRunnerOutput at index d.
  virtual std::vector<ModelRunnerOutput> ExecuteAll(std::span<const SchedulerOutput> steps) = 0;
  virtual void ReadExpertLoad(exec::ExpertLoad* out) const { *out = {}; }
};

// What routing knows of a rank when a request arrives.
struct DataParallelLoad {
  int64_t num_unfinished = 0;        // running + waiting
  int64_t cached_prefix_tokens = 0;  // of the request's prompt, in the rank's prefix cache
};
// A rank whose load exceeds the least by at most this still wins with a longer cached prefix.
inline constexpr int64_t kPrefixRoutingSlack = 2;
// The rank for a new request: the longest cached prefix among the ranks within
// kPrefixRoutingSlack of the least loaded, then the least loaded, then the lowest rank.
int PickDataParallelRank(std::span<const DataParallelLoad> loads);

class DataParallelEngineClient final : public EngineClient {
 public:
  // `cores[d]` is rank d's core; every core and `executor` outlive the client, and only the
  // client's Step() may use them from now on.
  DataParallelEngineClient(std::vector<EngineCore*> cores, DataParallelExecutor* executor);

  RequestIndex Submit(RequestInput input) override { return queue_.Submit(std::move(input)); }
  void Abort(RequestIndex index) override { queue_.Abort(index); }
  std::vector<RequestOutput> Step() override;
  void WaitForWork(std::chrono::milliseconds timeout) override;
  bool HasUnfinished() override;
  SchedulerStats Stats() const override;
  void ReadExpertLoad(exec::ExpertLoad* out) const override { executor_->ReadExpertLoad(out); }
  void SetStepObserver(StepObserver* observer) override { observer_ = observer; }

  // The rank a request was routed to, -1 once it finished or before it was admitted (tests).
  int RankOf(RequestIndex index) const;

 private:
  void Drain(std::vector<RequestOutput>& events);
  bool CoresHaveWork() const;

  std::vector<EngineCore*> cores_;
  DataParallelExecutor* executor_;
  StepObserver* observer_ = nullptr;
  std::unordered_map<RequestIndex, int> rank_of_;  // unfinished requests' ranks (loop thread)
  std::vector<SchedulerOutput> steps_;            // reused across steps
  std::vector<const std::string*> step_request_ids_;
  SubmissionQueue queue_;
};

}  // namespace ember
