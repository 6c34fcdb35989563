// The engine step of data-parallel attention with expert parallelism (DEP) crossing the ranks.
// Rank 0 holds every data-parallel rank's scheduler and KV manager (engine/data_parallel_client.h);
// each step DataParallelStepper sends rank d its SchedulerOutput, runs rank 0's own on its runner,
// and collects the other ranks' ModelRunnerOutputs. Each worker (RunDataParallelWorkerLoop) runs
// its output on its own runner, sampling its own requests, and sends the result back. Every rank
// runs its model's forward in the same steps, since each MoE layer exchanges tokens across all of
// them: a rank with no tokens while another has some joins with 0 tokens
// (ModelRunner::ExecuteWithoutTokens).
#pragma once

#include <span>
#include <vector>

#include "core/status.h"
#include "engine/data_parallel_client.h"
#include "exec/communicator.h"
#include "runner/model_runner.h"

namespace ember::parallel {

// Rank 0's DataParallelExecutor: rank d of `world` is data-parallel rank d (pure DEP: one rank per
// data-parallel rank). `runner` and `world` outlive it; the destructor stops the workers' loops.
class DataParallelStepper final : public DataParallelExecutor {
 public:
  DataParallelStepper(ModelRunner* runner, exec::Communicator* world);
  ~DataParallelStepper() override;
  DataParallelStepper(const DataParallelStepper&) = delete;
  DataParallelStepper& operator=(const DataParallelStepper&) = delete;

  std::vector<ModelRunnerOutput> ExecuteAll(std::span<const SchedulerOutput> steps) override;
  // Rank 0's counts are every rank's: the MoE exchanges share each expert's token count.
  void ReadExpertLoad(exec::ExpertLoad* out) const override { runner_->ReadExpertLoad(out); }
  // Sends the shutdown step to every worker (once; the destructor calls it too).
  void Shutdown();

 private:
  ModelRunner* runner_;
  exec::Communicator* world_;
  bool shut_down_ = false;
};

// A worker rank's loop under DEP: receive its step from rank 0, run it (sampling included), send
// the output back, until the shutdown step. An error if a message cannot be decoded.
Status RunDataParallelWorkerLoop(ModelRunner& runner, exec::Communicator& world);

}  // namespace ember::parallel
