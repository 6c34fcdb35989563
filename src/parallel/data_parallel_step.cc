#include "parallel/data_parallel_step.h"

#include <cstdint>

#include "core/check.h"
#include "parallel/step_codec.h"

namespace ember::parallel {
namespace {

constexpr int kRoot = 0;
// Point-to-point tags (below Communicator::kMaxUserTag): a message is its length, then its bytes.
constexpr int kStepSizeTag = 101, kStepTag = 102, kOutputSizeTag = 103, kOutputTag = 104;

void SendMessage(exec::Communicator& world, const std::vector<uint8_t>& bytes, int dest, int size_tag, int tag) {
  int64_t size = static_cast<int64_t>(bytes.size());
  world.Send(&size, sizeof(size), dest, size_tag);
  if (size > 0) world.Send(bytes.data(), size, dest, tag);
}

std::vector<uint8_t> ReceiveMessage(exec::Communicator& world, int source, int size_tag, int tag) {
  int64_t size = 0;
  world.Recv(&size, sizeof(size), source, size_tag);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (size > 0) world.Recv(bytes.data(), size, source, tag);
  return bytes;
}

bool AnyTokens(std::span<const SchedulerOutput> steps) {
  for (const SchedulerOutput& s : steps) {
    if (!s.empty()) return true;
  }
  return false;
}

}  // namespace

DataParallelStepper::DataParallelStepper(ModelRunner* runner, exec::Communicator* world)
    : runner_(runner), world_(world) {}

DataParallelStepper::~DataParallelStepper() { Shutdown(); }

std::vector<ModelRunnerOutput> DataParallelStepper::ExecuteAll(std::span<const SchedulerOutput> steps) {
  const int ranks = world_->world_size();
  EMBER_CHECK(static_cast<int>(steps.size()) == ranks, "{} data-parallel steps for {} ranks", steps.size(), ranks);
  const bool any_tokens = AnyTokens(steps);
  for (int d = 1; d < ranks; ++d) {
    WorkerStep step;
    step.output = steps[d];
    step.forward_without_tokens = any_tokens && steps[d].empty();
    SendMessage(*world_, EncodeWorkerStep(step), d, kStepSizeTag, kStepTag);
  }
  std::vector<ModelRunnerOutput> outputs(ranks);
  outputs[0] = runner_->Execute(steps[0]);
  if (any_tokens && steps[0].empty()) runner_->ExecuteWithoutTokens();
  for (int d = 1; d < ranks; ++d) {
    const std::vector<uint8_t> bytes = ReceiveMessage(*world_, d, kOutputSizeTag, kOutputTag);
    Expected<ModelRunnerOutput> output = DecodeRunnerOutput(bytes);
    // Ranks of one build exchanging garbage is ember's bug.
    EMBER_CHECK(output.ok(), "data-parallel rank {}: {}", d, output.status().message());
    outputs[d] = std::move(*output);
  }
  return outputs;
}

void DataParallelStepper::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  WorkerStep step;
  step.shutdown = true;
  const std::vector<uint8_t> bytes = EncodeWorkerStep(step);
  for (int d = 1; d < world_->world_size(); ++d) SendMessage(*world_, bytes, d, kStepSizeTag, kStepTag);
}

Status RunDataParallelWorkerLoop(ModelRunner& runner, exec::Communicator& world) {
  for (;;) {
    const std::vector<uint8_t> bytes = ReceiveMessage(world, kRoot, kStepSizeTag, kStepTag);
    EMBER_ASSIGN_OR_RETURN(WorkerStep step, DecodeWorkerStep(bytes));
    if (step.shutdown) return Status::Ok();
    const ModelRunnerOutput output = runner.Execute(step.output);
    if (step.forward_without_tokens) runner.ExecuteWithoutTokens();
    SendMessage(world, EncodeRunnerOutput(output), kRoot, kOutputSizeTag, kOutputTag);
  }
}

}  // namespace ember::parallel
