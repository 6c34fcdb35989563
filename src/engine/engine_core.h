// The engine core: one Scheduler, the KvCacheManager it allocates from, and an Executor that runs
// the scheduled steps. Single-threaded (reference/codebases.md §9.5); server threads talk to it
// through EngineClient (engine/engine_client.h).
#pragma once

#include <vector>

#include "core/status.h"
#include "engine/executor.h"
#include "engine/kv_connector.h"
#include "engine/request.h"
#include "engine/request_output.h"
#include "engine/scheduler.h"
#include "engine/step_observer.h"
#include "kv/kv_cache_manager.h"

namespace ember {

struct EngineCoreConfig {
  SchedulerConfig scheduler;
  kv::KvCacheConfig kv;
  kv::KvCacheManagerOptions kv_options;
};

class EngineCore {
 public:
  // Fails with a message naming the field when the configuration is inconsistent. `executor`
  // must outlive the engine core.
  static Expected<std::unique_ptr<EngineCore>> Create(EngineCoreConfig config, Executor* executor);

  // Admits a request under an index unique for the engine's lifetime; errors say what to fix.
  Status AddRequest(RequestIndex index, RequestInput input);
  // Finishes a request wherever it is; its final event comes out of the next Step(). False if
  // it is unknown or already finished.
  bool AbortRequest(RequestIndex index);
  // Schedules, executes and applies one step. Returns the events of every request that got
  // tokens or finished (aborts and errors included).
  std::vector<RequestOutput> Step();
  // Step in two halves, for a driver that executes several cores' steps together (data
  // parallelism, engine/data_parallel_client.h): ScheduleStep, then, when NeedsExecute says so,
  // the output executed elsewhere, then FinishStep with what that returned (an empty
  // ModelRunnerOutput when nothing was executed). One FinishStep must follow each ScheduleStep.
  SchedulerOutput ScheduleStep();
  static bool NeedsExecute(const SchedulerOutput& scheduled);
  std::vector<RequestOutput> FinishStep(const SchedulerOutput& scheduled, const ModelRunnerOutput& output);
  // True while a request is unfinished, or the executor has yet to hear that one finished (one
  // more Step() tells it), so a `while (HasUnfinished()) Step();` loop leaves nothing behind.
  bool HasUnfinished() const { return scheduler_.HasUnfinished() || scheduler_.HasPendingRunnerUpdates(); }
  // True when Step() can make progress now, not only wait for pulled KV (Scheduler::HasSchedulableWork).
  bool HasSchedulableWork() const { return scheduler_.HasSchedulableWork(); }

  // Prefill/decode disaggregation: the connector that holds finished prefills' KV for consumers
  // and pulls consumers' prompt KV (engine/kv_connector.h); null: none. Step() applies its events
  // first. It must outlive the engine core or be reset first.
  void set_kv_connector(KvConnector* connector) { connector_ = connector; }
  // Applies what the connector reported (Step() does it first; a client that does not step while
  // only KV holds are left calls it to free their blocks in time).
  void ApplyKvConnectorEvents();

  // Told when each step's execution starts and ends (the step watchdog); null: nobody. The
  // observer must outlive the engine core or be reset first.
  void set_step_observer(StepObserver* observer) { observer_ = observer; }

  SchedulerStats Stats() const;
  // The executor's expert load (Executor::ReadExpertLoad): kept apart from Stats(), which is
  // copied every step, since a large MoE's counts are 62 layers x 256 experts.
  void ReadExpertLoad(exec::ExpertLoad* out) const { executor_->ReadExpertLoad(out); }
  const Scheduler& scheduler() const { return scheduler_; }
  const kv::KvCacheManager& kv_cache() const { return kv_; }

 private:
  EngineCore(EngineCoreConfig config, Executor* executor);
  // Disaggregation: starts the pulls the scheduler allocated blocks for, cancels aborted ones.
  void StartKvPulls();
  // Disaggregation: hands the prompt KV of finished producer requests to the connector and puts
  // where it waits into their final events.
  void HoldFinishedKv(std::vector<RequestOutput>& events);

  kv::KvCacheManager kv_;
  Scheduler scheduler_;
  Executor* executor_;
  StepObserver* observer_ = nullptr;
  KvConnector* connector_ = nullptr;
  std::vector<const std::string*> step_request_ids_;  // for observer_, reused across steps
};

}  // namespace ember
