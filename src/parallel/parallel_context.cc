#include "parallel/parallel_context.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/logging.h"
#include "parallel/data_parallel_step.h"
#include "parallel/step_broadcast.h"

namespace ember::parallel {

Status ParallelConfig::Validate() const {
  if (tensor_parallel_size < 1 || pipeline_parallel_size < 1) {
    return InvalidArgument(fmt::format("--tensor-parallel-size and --pipeline-parallel-size must be at least 1, got "
                                       "{} and {}", tensor_parallel_size, pipeline_parallel_size));
  }
  if (rank_timeout_seconds < 0) return InvalidArgument("--rank-timeout must be >= 0 (0 waits forever)");
  if (data_parallel_size < 1) {
    return InvalidArgument(fmt::format("--data-parallel-size must be at least 1, got {}", data_parallel_size));
  }
  if (data_parallel_size > 1 && !enable_expert_parallel) {
    return InvalidArgument("--data-parallel-size runs data-parallel attention with expert parallelism (DEP): add "
                           "--enable-expert-parallel (plain replicas of a model are separate servers behind "
                           "ember router)");
  }
  if (data_parallel_size > 1 && pipeline_parallel_size > 1) {
    return InvalidArgument("--data-parallel-size with --pipeline-parallel-size is not supported yet");
  }
  if (data_parallel_size > 1 && tensor_parallel_size > 1) {
    return InvalidArgument("--data-parallel-size with --tensor-parallel-size is not supported yet: DEP runs whole "
                           "attention on every rank (one rank per data-parallel rank)");
  }
  return Status::Ok();
}

Expected<std::unique_ptr<ParallelContext>> ParallelContext::Start(const ParallelConfig& config, int* argc,
                                                                  char*** argv) {
  EMBER_RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<ParallelContext> context(new ParallelContext());
  context->config_ = config;
  EMBER_ASSIGN_OR_RETURN(context->runtime_, MpiRuntime::Init(argc, argv));
  if (context->runtime_->world_size() != config.world_size()) {
    return InvalidArgument(fmt::format(
        "this MPI job has {} ranks but --tensor-parallel-size {} x --pipeline-parallel-size {} x "
        "--data-parallel-size {} needs {}: start it with mpirun -np {}, or run ember without mpirun and it starts "
        "its own ranks",
        context->runtime_->world_size(), config.tensor_parallel_size, config.pipeline_parallel_size,
        config.data_parallel_size, config.world_size(), config.world_size()));
  }
  SetLogTag(fmt::format("r{}", context->rank()));
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  context->ranks_on_host_ = local != nullptr && std::atoi(local) > 0 ? std::atoi(local) : 1;
  context->world_ = MpiCommunicator::World();
  // One pipeline stage of tensor_parallel_size neighbours per color (the layout above).
  const int stage = context->rank() / config.tensor_parallel_size;
  context->tensor_ = context->world_->Split(stage, context->rank());
  // DEP: the experts' group is every rank, in a message space of its own (its waits are bounded on
  // every rank, while a worker waits for rank 0's next step on the world without a limit).
  if (config.data_parallel_size > 1) context->expert_ = context->world_->Split(0, context->rank());
  return context;
}

ParallelContext::~ParallelContext() {
  for (const auto& [group, name] : {std::pair{tensor_.get(), "tensor"}, std::pair{expert_.get(), "expert"}}) {
    if (group == nullptr) continue;
    const MpiCommunicator::CollectiveStats t = group->stats();
    EMBER_LOG_INFO("communication: {} collectives in the {} group, {:.3f} s in them (waits for other ranks included)",
                   t.calls, name, t.seconds);
  }
  // Communicators before MPI_Finalize (the runtime's destructor).
  expert_.reset();
  tensor_.reset();
  world_.reset();
}

std::string ParallelContext::Describe() const {
  if (config_.data_parallel_size > 1) {
    return fmt::format("rank {} of {} (data-parallel rank {} of {}, expert rank {} of {})", rank(), world_size(),
                       data_parallel_rank(), config_.data_parallel_size, expert_->rank(), expert_->world_size());
  }
  return fmt::format("rank {} of {} (tensor rank {} of {}{}, pipeline stage {} of {})", rank(), world_size(),
                     tensor_->rank(), tensor_->world_size(),
                     config_.enable_expert_parallel ? ", expert rank too" : "", rank() / config_.tensor_parallel_size,
                     config_.pipeline_parallel_size);
}

PipelineStage ParallelContext::pipeline_stage() {
  PipelineStage stage;
  const int tp = config_.tensor_parallel_size, pp = config_.pipeline_parallel_size;
  if (pp == 1) return stage;
  const int r = rank();
  stage.comm = world_.get();
  stage.index = r / tp;
  stage.num_stages = pp;
  // A stage's tensor rank t talks to tensor rank t of the stages around it: the residual stream
  // is the same on every tensor rank of a stage.
  stage.previous = stage.index > 0 ? r - tp : -1;
  stage.next = stage.index < pp - 1 ? r + tp : -1;
  const int last_stage_first_rank = (pp - 1) * tp;
  if (r == last_stage_first_rank) stage.logits_to = 0;
  if (r == 0) stage.logits_from = last_stage_first_rank;
  return stage;
}

void ParallelContext::Abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this is for the compiler
}

void ParallelContext::EnableRankTimeouts() {
  // Rank 0 waits for the workers only inside steps; a worker waits for rank 0's next step as long
  // as the server is idle, so only rank 0 bounds its waits on the world group.
  if (driver()) world_->set_timeout(config_.rank_timeout_seconds);
  tensor_->set_timeout(config_.rank_timeout_seconds);
  if (expert_ != nullptr) expert_->set_timeout(config_.rank_timeout_seconds);
}

void ParallelContext::OnRankFault(std::function<void(const std::string& message)> before_abort) {
  auto handler = [this, before_abort = std::move(before_abort)](const std::string& message) {
    EMBER_LOG_ERROR("{}", message);
    if (before_abort) before_abort(message);
    Abort(1);
  };
  world_->set_fault_handler(handler);
  tensor_->set_fault_handler(handler);
  if (expert_ != nullptr) expert_->set_fault_handler(handler);
}

ParallelHooks ParallelContext::Hooks() {
  ParallelHooks hooks;
  exec::Communicator* world = world_.get();
  hooks.ranks_on_host = ranks_on_host_;
  hooks.agree_num_blocks = [world](int64_t num_blocks) -> Expected<int64_t> {
    const int64_t agreed = world->AllReduceMin(num_blocks);
    if (agreed < num_blocks) {
      EMBER_LOG_INFO("KV cache: {} blocks (another rank holds fewer than the {} planned here)", agreed, num_blocks);
    }
    return agreed;
  };
  if (config_.data_parallel_size > 1) {
    hooks.data_parallel_size = config_.data_parallel_size;
    if (driver()) {
      hooks.make_data_parallel_executor = [world](ModelRunner& runner) -> std::unique_ptr<DataParallelExecutor> {
        return std::make_unique<DataParallelStepper>(&runner, world);
      };
    }
    return hooks;
  }
  if (driver()) {
    hooks.wrap_executor = [world](ModelRunner& runner) -> std::unique_ptr<Executor> {
      return std::make_unique<StepBroadcaster>(&runner, world);
    };
  }
  return hooks;
}

Status RelaunchUnderMpirun(const ParallelConfig& config, std::span<char* const> argv) {
  if (argv.empty() || argv[0] == nullptr) return InvalidArgument("no command line to relaunch");
  // The same binary (argv[0] may be a relative path or a name found on PATH).
  char self[4096];
  const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length <= 0) return Internal("cannot find this program's path (/proc/self/exe) to start its ranks");
  self[length] = '\0';
  std::vector<std::string> args = {"mpirun", "-np", std::to_string(config.world_size()),
                                   // More ranks than cores is fine for tests and small models;
                                   // each rank sizes its own thread pool (--threads).
                                   "--oversubscribe", "--bind-to", "none",
                                   // Shared memory without the single-copy mechanism (CMA), which
                                   // containers often forbid (ptrace scope), and TCP between hosts.
                                   "--mca", "btl", "self,vader,tcp", "--mca", "btl_vader_single_copy_mechanism", "none"};
  if (geteuid() == 0) args.push_back("--allow-run-as-root");
  args.push_back(self);
  for (size_t i = 1; i < argv.size() && argv[i] != nullptr; ++i) args.emplace_back(argv[i]);
  std::vector<char*> exec_args;
  for (std::string& a : args) exec_args.push_back(a.data());
  exec_args.push_back(nullptr);
  EMBER_LOG_INFO("starting {} ranks: {}", config.world_size(), fmt::join(args, " "));
  std::fflush(stderr);
  // The signal mask survives exec: a caller that blocked SIGTERM for its own watcher thread (ember
  // serve) would leave mpirun deaf to it. mpirun must see SIGINT/SIGTERM to end the job.
  sigset_t none;
  sigemptyset(&none);
  pthread_sigmask(SIG_SETMASK, &none, nullptr);
  execvp("mpirun", exec_args.data());
  return IoError(fmt::format("cannot start mpirun ({}): install Open MPI (scripts/setup does) or start the ranks "
                                 "yourself with mpirun -np {}", std::strerror(errno), config.world_size()));
}

}  // namespace ember::parallel
