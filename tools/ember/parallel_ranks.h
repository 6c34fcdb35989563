// How an ember command becomes the ranks of a multi-process engine (src/parallel): the flags, the
// start (relaunch under mpirun when the user ran ember alone; MPI when mpirun started it), the
// model's communicator and the engine, which on worker ranks runs the worker loop and never
// returns. One process-wide context, since a process is one rank for its whole life.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>

#include "core/status.h"
#include "exec/communicator.h"
#include "model/causal_lm.h"
#include "parallel/parallel_context.h"
#include "runner/local_engine.h"

namespace ember::tools {

// ember's argv, for the relaunch (main stores it).
void SetCommandLine(int argc, char** argv);

// --tensor-parallel-size, --pipeline-parallel-size, --data-parallel-size, --enable-expert-parallel,
// --rank-timeout.
void AddParallelOptions(CLI::App* cmd, parallel::ParallelConfig* config);

// Nothing for one process. Asked for several ranks outside mpirun: replaces this process with
// mpirun starting them (returns only on failure). Under mpirun: starts MPI and this rank's
// context. `*threads` (0: all cores) becomes the cores per rank on this host when unset.
Status StartParallel(const parallel::ParallelConfig& config, int* threads);

// The running context, or null in one process.
parallel::ParallelContext* Parallel();
// The tensor-parallel group for LoadOptions::communicator (null in one process).
exec::Communicator* ModelCommunicator();
// This rank's pipeline stage for LoadOptions::pipeline (one stage in one process).
PipelineStage ModelPipelineStage();
// Whether the model loads with expert parallelism (--enable-expert-parallel).
bool ModelExpertParallel();
// DEP's expert group for LoadOptions::expert_communicator (null without --data-parallel-size).
exec::Communicator* ModelExpertCommunicator();

// LocalEngine::Create as this rank: rank 0 (or a single process) gets the engine; a worker rank
// runs its worker loop (DEP's, which samples its own requests, under --data-parallel-size) until
// rank 0 shuts down, then exits the process (status 0, or 1 with a
// message), so the call does not return there.
Expected<std::unique_ptr<LocalEngine>> CreateEngine(std::unique_ptr<CausalLM> model, const EngineOptions& options);

// Ends a multi-process job after an error on this rank (the others may be waiting for it in a
// collective, where MPI_Finalize would hang): MPI_Abort. Does nothing in one process.
void AbortParallelJob(int code);

}  // namespace ember::tools
