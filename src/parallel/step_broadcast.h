// The engine step crossing ranks. Rank 0 owns the scheduler and the KV manager; before its runner
// executes a step, StepBroadcaster sends every worker rank that step's SchedulerOutput together
// with the tokens rank 0 sampled in the step before (step_codec.h). Each worker's loop
// (RunWorkerLoop) applies both to its own runner and runs the same forward pass over its shard, so
// the collectives inside the model meet. Only rank 0 samples: the workers' logits are dropped.
//
// Why the tokens travel a step late: a worker needs a sampled token only as the input of the next
// step, so piggybacking it on that step's message costs no extra round trip, and rank 0 never
// waits for the workers outside the model's own collectives.
#pragma once

#include <memory>
#include <vector>

#include "core/status.h"
#include "engine/executor.h"
#include "exec/communicator.h"
#include "runner/model_runner.h"

namespace ember::parallel {

// Rank 0's Executor: broadcast, then run the step on rank 0's own runner. `world` holds every
// rank of the engine (rank 0 the root); both must outlive this. The destructor tells the workers
// to stop (a shutdown step), so their loops return.
class StepBroadcaster final : public Executor {
 public:
  StepBroadcaster(ModelRunner* runner, exec::Communicator* world);
  ~StepBroadcaster() override;
  StepBroadcaster(const StepBroadcaster&) = delete;
  StepBroadcaster& operator=(const StepBroadcaster&) = delete;

  ModelRunnerOutput Execute(const SchedulerOutput& output) override;
  // Rank 0's own counts: every tensor-parallel rank routes every token.
  void ReadExpertLoad(exec::ExpertLoad* out) const override { runner_->ReadExpertLoad(out); }
  // Sends the shutdown step (once; the destructor calls it too).
  void Shutdown();

 private:
  void Send(const std::vector<uint8_t>& bytes);

  ModelRunner* runner_;
  exec::Communicator* world_;
  ModelRunnerOutput last_;  // what rank 0 sampled in the previous step, sent with the next one
  bool shut_down_ = false;
};

// A worker rank's loop: receive steps from rank 0 and run them on `runner` until the shutdown
// step. Returns an error if a message cannot be decoded (a version mismatch between ranks).
Status RunWorkerLoop(ModelRunner& runner, exec::Communicator& world);

}  // namespace ember::parallel
