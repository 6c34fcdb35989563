#include "engine/engine_core.h"

#include <chrono>

#include <memory>
#include <utility>

#include <fmt/format.h>

namespace ember {

Expected<std::unique_ptr<EngineCore>> EngineCore::Create(EngineCoreConfig config, Executor* executor) {
  EMBER_RETURN_IF_ERROR(config.scheduler.Validate());
  if (executor == nullptr) return InvalidArgument("EngineCore needs an executor");
  if (config.kv.groups.empty() || config.kv.block_size < 1) {
    return InvalidArgument("the KV cache config has no groups or no block size: plan it with kv::PlanKvGroups");
  }
  if (config.kv.num_blocks < 2) {
    return InvalidArgument(fmt::format("the KV cache has {} blocks; it needs at least 2 (the null block and one "
                                       "usable): give it more memory",
                                       config.kv.num_blocks));
  }
  return std::unique_ptr<EngineCore>(new EngineCore(std::move(config), executor));
}

EngineCore::EngineCore(EngineCoreConfig config, Executor* executor)
    : kv_(std::move(config.kv), config.kv_options), scheduler_(std::move(config.scheduler), &kv_), executor_(executor) {}

Status EngineCore::AddRequest(RequestIndex index, RequestInput input) { return scheduler_.Add(index, std::move(input)); }

bool EngineCore::AbortRequest(RequestIndex index) { return scheduler_.Abort(index); }

bool EngineCore::NeedsExecute(const SchedulerOutput& scheduled) {
  // The runner must hear about finished and preempted requests even in a step with no tokens.
  return !scheduled.empty() || !scheduled.finished_reqs.empty() || !scheduled.preempted_reqs.empty();
}

std::vector<RequestOutput> EngineCore::FinishStep(const SchedulerOutput& scheduled, const ModelRunnerOutput& output) {
  return scheduler_.UpdateFromOutput(scheduled, output);
}

std::vector<RequestOutput> EngineCore::Step() {
  const SchedulerOutput scheduled = scheduler_.Schedule();
  ModelRunnerOutput output;
  if (NeedsExecute(scheduled)) {
    if (observer_ != nullptr) {
      step_request_ids_.clear();
      for (RequestIndex req : scheduled.scheduled_reqs) {
        step_request_ids_.push_back(&scheduler_.Find(req)->external_id());
      }
      observer_->OnStepBegin(scheduled, step_request_ids_);
    }
    const auto start = Clock::now();
    output = executor_->Execute(scheduled);
    output.execute_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (observer_ != nullptr) observer_->OnStepEnd();
  }
  return scheduler_.UpdateFromOutput(scheduled, output);
}

}  // namespace ember
