#include "tools/ember/parallel_ranks.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/host_memory.h"
#include "core/logging.h"
#include "parallel/mpi_runtime.h"
#include "parallel/data_parallel_step.h"
#include "parallel/step_broadcast.h"

namespace ember::tools {
namespace {

std::vector<char*>& CommandLine() {
  static std::vector<char*> argv;
  return argv;
}

std::unique_ptr<parallel::ParallelContext>& Context() {
  static std::unique_ptr<parallel::ParallelContext> context;
  return context;
}

}  // namespace

void SetCommandLine(int argc, char** argv) { CommandLine().assign(argv, argv + argc); }

void AddParallelOptions(CLI::App* cmd, parallel::ParallelConfig* config) {
  cmd->add_option("--tensor-parallel-size", config->tensor_parallel_size,
                  "Ranks that split every layer (attention heads, MLP and expert features, vocabulary); run alone, "
                  "ember starts them with mpirun, under mpirun -np N it is one of them")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--pipeline-parallel-size", config->pipeline_parallel_size,
                  "Pipeline stages: the layers split into consecutive blocks, one per stage of "
                  "--tensor-parallel-size ranks (ranks = tp x pp)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--data-parallel-size", config->data_parallel_size,
                  "Data-parallel attention with expert parallelism (DEP, needs --enable-expert-parallel): ranks "
                  "with a scheduler, requests and KV cache each and whole attention, the routed experts spread over "
                  "all of them (E / dp per rank); requests go to the least loaded rank")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--enable-expert-parallel", config->enable_expert_parallel,
                "Routed experts spread whole over the --tensor-parallel-size ranks (E / tp per rank, tokens sent to "
                "their experts' ranks) instead of every rank holding a block of every expert; attention stays "
                "tensor-parallel (TEP); with --data-parallel-size, over the data-parallel ranks (DEP)");
  cmd->add_option("--rank-timeout", config->rank_timeout_seconds,
                  "Seconds rank 0 waits for another rank inside a step before naming it and ending the job (0: "
                  "forever)");
}

Status StartParallel(const parallel::ParallelConfig& config, int* threads) {
  EMBER_RETURN_IF_ERROR(config.Validate());
  if (!config.parallel()) return Status::Ok();
  if (!parallel::LaunchedByMpi()) return parallel::RelaunchUnderMpirun(config, CommandLine());
  EMBER_ASSIGN_OR_RETURN(Context(), parallel::ParallelContext::Start(config, nullptr, nullptr));
  if (*threads <= 0) {
    // The host's cores shared by its ranks: oversubscribing threads across ranks that spin in
    // collectives costs more than it gains.
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    *threads = std::max(1, cores / Context()->ranks_on_host());
  }
  EMBER_LOG_INFO("{}; {} threads", Context()->Describe(), *threads);
  return Status::Ok();
}

parallel::ParallelContext* Parallel() { return Context().get(); }

exec::Communicator* ModelCommunicator() { return Context() ? Context()->tensor_group() : nullptr; }

bool ModelExpertParallel() { return Context() && Context()->config().enable_expert_parallel; }

exec::Communicator* ModelExpertCommunicator() { return Context() ? Context()->expert_group() : nullptr; }

PipelineStage ModelPipelineStage() { return Context() ? Context()->pipeline_stage() : PipelineStage{}; }

Expected<std::unique_ptr<LocalEngine>> CreateEngine(std::unique_ptr<CausalLM> model, const EngineOptions& options) {
  parallel::ParallelContext* context = Parallel();
  if (context == nullptr) return LocalEngine::Create(std::move(model), options);
  auto engine = LocalEngine::Create(std::move(model), options, context->Hooks());
  if (engine.ok()) {
    const ResidentMemory m = ResidentMemoryBytes();
    EMBER_LOG_INFO("resident memory: {:.1f} MiB ({:.1f} MiB heap and copies, {:.1f} MiB mapped file pages)",
                   m.total / 1048576.0, m.anon / 1048576.0, m.file / 1048576.0);
  }
  if (engine.ok()) context->EnableRankTimeouts();
  if (context->driver()) return engine;
  if (!engine.ok()) {
    EMBER_LOG_ERROR("{}", engine.status().message());
    context->Abort(1);
  }
  for (const std::string& line : (*engine)->DescribePlan()) EMBER_LOG_INFO("{}", line);
  const Status looped = context->config().data_parallel_size > 1
                            ? parallel::RunDataParallelWorkerLoop((*engine)->runner(), context->world())
                            : parallel::RunWorkerLoop((*engine)->runner(), context->world());
  if (!looped.ok()) {
    EMBER_LOG_ERROR("worker loop: {}", looped.message());
    context->Abort(1);
  }
  engine->reset();
  Context().reset();  // MPI_Finalize, with rank 0 (which finalizes after its engine)
  std::fflush(stdout);
  std::exit(0);
}

void AbortParallelJob(int code) {
  if (Parallel() != nullptr) Parallel()->Abort(code);
}

}  // namespace ember::tools
