#include "parallel/step_broadcast.h"

#include <cstdint>
#include <span>

#include "core/logging.h"
#include "parallel/step_codec.h"

namespace ember::parallel {
namespace {

constexpr int kRoot = 0;

// Every message is its length, then its bytes: two broadcasts, since the workers cannot know the
// length of a step before it arrives.
std::vector<uint8_t> ReceiveFromRoot(exec::Communicator& world) {
  int64_t size = 0;
  world.Broadcast(&size, sizeof(size), kRoot);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (size > 0) world.Broadcast(bytes.data(), size, kRoot);
  return bytes;
}

}  // namespace

StepBroadcaster::StepBroadcaster(ModelRunner* runner, exec::Communicator* world) : runner_(runner), world_(world) {}

StepBroadcaster::~StepBroadcaster() { Shutdown(); }

void StepBroadcaster::Send(const std::vector<uint8_t>& bytes) {
  int64_t size = static_cast<int64_t>(bytes.size());
  world_->Broadcast(&size, sizeof(size), kRoot);
  if (size > 0) world_->Broadcast(const_cast<uint8_t*>(bytes.data()), size, kRoot);
}

ModelRunnerOutput StepBroadcaster::Execute(const SchedulerOutput& output) {
  WorkerStep step;
  step.output = output;
  step.sampled_reqs = std::move(last_.reqs);
  step.sampled_token_ids = std::move(last_.sampled_token_ids);
  Send(EncodeWorkerStep(step));
  ModelRunnerOutput result = runner_->Execute(output);
  last_.reqs = result.reqs;
  last_.sampled_token_ids = result.sampled_token_ids;
  return result;
}

void StepBroadcaster::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  WorkerStep step;
  step.shutdown = true;
  Send(EncodeWorkerStep(step));
}

Status RunWorkerLoop(ModelRunner& runner, exec::Communicator& world) {
  for (;;) {
    const std::vector<uint8_t> bytes = ReceiveFromRoot(world);
    EMBER_ASSIGN_OR_RETURN(WorkerStep step, DecodeWorkerStep(bytes));
    if (step.shutdown) return Status::Ok();
    runner.ExecuteWorkerStep(step.output, step.sampled_reqs, step.sampled_token_ids);
  }
}

}  // namespace ember::parallel
