// One process's place in a multi-process engine: the MPI runtime, the rank layout and the groups
// the model's collectives run over, and the hooks that make LocalEngine a rank of the engine
// (runner/local_engine.h: rank 0 drives, the others run RunWorkerLoop).
//
// Rank layout: world = tensor_parallel_size x pipeline_parallel_size x data_parallel_size ranks;
// rank r is tensor rank r % tp of pipeline stage (r / tp) % pp of data-parallel rank r / (tp x pp)
// (vLLM's order), so a stage's ranks are neighbours (mpirun's default fills one host before the
// next: a tensor-parallel group stays on one host when it fits). Data parallelism (DEP) runs
// with tp = pp = 1 for now: rank r is data-parallel rank r.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "core/status.h"
#include "exec/communicator.h"
#include "parallel/mpi_communicator.h"
#include "parallel/mpi_runtime.h"
#include "model/causal_lm.h"
#include "runner/local_engine.h"

namespace ember::parallel {

struct ParallelConfig {
  int tensor_parallel_size = 1;
  int pipeline_parallel_size = 1;
  // Seconds a rank waits for a peer inside a collective before naming it and ending the job
  // (MpiCommunicator::set_timeout); 0 waits forever.
  double rank_timeout_seconds = 120.0;
  // --enable-expert-parallel: the tensor group's ranks hold whole routed experts (E / tp each)
  // instead of a block of every expert's features (LoadOptions::expert_parallel).
  bool enable_expert_parallel = false;
  // --data-parallel-size (DEP, with --enable-expert-parallel): ranks with a scheduler, requests
  // and KV cache each and whole attention, the routed experts spread over all of them.
  int data_parallel_size = 1;

  int world_size() const { return tensor_parallel_size * pipeline_parallel_size * data_parallel_size; }
  bool parallel() const { return world_size() > 1; }
  // InvalidArgument for sizes below 1, and for data parallelism without expert parallelism or
  // with tensor or pipeline parallelism (not built yet).
  Status Validate() const;
};

class ParallelContext {
 public:
  // Under mpirun (LaunchedByMpi): initialises MPI and checks that the job has exactly
  // config.world_size() ranks. `argc`/`argv` may be null.
  static Expected<std::unique_ptr<ParallelContext>> Start(const ParallelConfig& config, int* argc, char*** argv);
  ~ParallelContext();

  int rank() const { return runtime_->world_rank(); }
  int world_size() const { return runtime_->world_size(); }
  bool driver() const { return rank() == 0; }
  // Ranks of this job on this host (Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE; 1 when unknown): they
  // share its cores and free memory.
  int ranks_on_host() const { return ranks_on_host_; }
  const ParallelConfig& config() const { return config_; }
  // The group the model's collectives run over (LoadOptions::communicator).
  exec::Communicator* tensor_group() { return tensor_.get(); }
  // DEP: the group the routed experts are spread over, every data-parallel rank
  // (LoadOptions::expert_communicator); null without data parallelism.
  exec::Communicator* expert_group() { return expert_.get(); }
  int data_parallel_rank() const {
    return rank() / (config_.tensor_parallel_size * config_.pipeline_parallel_size);
  }
  // This rank's pipeline stage (LoadOptions::pipeline): its neighbours in the layout above, and
  // where the last stage's logits go (world rank 0, which samples).
  PipelineStage pipeline_stage();
  // Every rank of the engine: steps travel over it.
  exec::Communicator& world() { return *world_; }
  // What LocalEngine::Create needs: the KV block count agreed over the world, and on rank 0 the
  // StepBroadcaster around the runner.
  ParallelHooks Hooks();
  // "rank 1 of 2 (tensor rank 1 of 2, ...)", with "data-parallel rank d of D" under DEP, for log lines.
  std::string Describe() const;
  // Ends every rank of the job with `code` (MPI_Abort): after an error on this rank, while the
  // others may wait for it in a collective.
  [[noreturn]] void Abort(int code);
  // Bounds every wait of a step by --rank-timeout from now on. Called once the engine is built:
  // loading may take the ranks different times, and that is not a fault.
  void EnableRankTimeouts();
  // What a collective that timed out (--rank-timeout) does on this rank: log the message naming
  // the silent ranks, call `before_abort` (a server fails its requests in flight), then Abort(1).
  void OnRankFault(std::function<void(const std::string& message)> before_abort);

 private:
  ParallelContext() = default;
  ParallelConfig config_;
  int ranks_on_host_ = 1;
  std::unique_ptr<MpiRuntime> runtime_;
  std::unique_ptr<MpiCommunicator> world_;
  std::unique_ptr<MpiCommunicator> tensor_;
  std::unique_ptr<MpiCommunicator> expert_;  // DEP only
};

// Replaces this process with `mpirun -np <world size> <argv...>`: the same command, started as
// the ranks of a local MPI job (oversubscribed when there are more ranks than cores, unbound, with
// the transport flags this kind of machine needs). Returns only on failure.
Status RelaunchUnderMpirun(const ParallelConfig& config, std::span<char* const> argv);

}  // namespace ember::parallel
