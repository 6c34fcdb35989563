#include "engine/engine_core.h"

#include <chrono>

#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/logging.h"

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

SchedulerOutput EngineCore::ScheduleStep() {
  SchedulerOutput scheduled = scheduler_.Schedule();
  StartKvPulls();
  return scheduled;
}

std::vector<RequestOutput> EngineCore::FinishStep(const SchedulerOutput& scheduled, const ModelRunnerOutput& output) {
  std::vector<RequestOutput> events = scheduler_.UpdateFromOutput(scheduled, output);
  HoldFinishedKv(events);
  return events;
}

std::vector<RequestOutput> EngineCore::Step() {
  ApplyKvConnectorEvents();
  const SchedulerOutput scheduled = ScheduleStep();
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
  return FinishStep(scheduled, output);
}

SchedulerStats EngineCore::Stats() const {
  SchedulerStats stats = scheduler_.Stats();
  if (connector_ != nullptr) stats.kv_transfer = connector_->Stats();
  return stats;
}

void EngineCore::ApplyKvConnectorEvents() {
  if (connector_ == nullptr) return;
  KvConnector::Events events = connector_->TakeEvents();
  for (RequestIndex index : events.released) scheduler_.ReleaseHeld(index);
  for (const KvConnector::PullDone& done : events.pulls) {
    if (!done.status.ok()) {
      const Request* req = scheduler_.Find(done.index);
      EMBER_LOG_WARN("request {}: pulling its prompt KV failed ({}); computing the prompt here",
                     req != nullptr ? req->external_id() : std::to_string(done.index), done.status.message());
    }
    scheduler_.FinishPull(done.index, done.status.ok());
  }
}

void EngineCore::StartKvPulls() {
  for (const KvPullToStart& pull : scheduler_.TakePullsToStart()) {
    Expected<KvImportSpans> into =
        connector_ != nullptr
            ? executor_->ImportKvSpans(kv_.Blocks(pull.index).per_group, pull.from.num_tokens, pull.first_token)
            : Expected<KvImportSpans>(Internal("no KV connector"));
    if (!into.ok()) {
      EMBER_LOG_WARN("request {}: cannot receive its prompt KV ({}); computing the prompt here",
                     scheduler_.Find(pull.index)->external_id(), into.status().message());
      scheduler_.FinishPull(pull.index, false);
      continue;
    }
    connector_->StartPull(pull.index, pull.from, pull.first_token, pull.num_pulls, std::move(*into));
  }
  for (const RemoteKv& from : scheduler_.TakeRemoteReleases()) {
    if (connector_ != nullptr) connector_->ReleaseRemote(from);
  }
  for (RequestIndex index : scheduler_.TakePullsToCancel()) {
    if (connector_ != nullptr) {
      connector_->CancelPull(index);
    } else {
      scheduler_.FinishPull(index, false);
    }
  }
}

void EngineCore::HoldFinishedKv(std::vector<RequestOutput>& events) {
  for (const HeldKvRequest& held : scheduler_.TakeNewlyHeld()) {
    Expected<RemoteKv> where = Internal("no KV connector");
    if (connector_ != nullptr) {
      Expected<KvExportSpans> spans = executor_->ExportKvSpans(kv_.Blocks(held.index).per_group, held.num_tokens);
      where = spans.ok() ? connector_->Hold(held.index, std::move(*spans), held.tokens_hash)
                    : Expected<RemoteKv>(spans.status());
    }
    if (!where.ok()) {
      EMBER_LOG_WARN("request {}: its prompt KV cannot be held for a consumer ({}); the consumer will compute it",
                     held.index, where.status().message());
      scheduler_.ReleaseHeld(held.index);
      continue;
    }
    for (RequestOutput& event : events) {
      if (event.req == held.index) event.kv_transfer_params = std::move(*where);
    }
  }
}

}  // namespace ember
