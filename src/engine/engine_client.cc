#include "engine/engine_client.h"

namespace ember {

RequestOutput RejectedRequest(RequestIndex index, const RequestInput& input, std::string error) {
  RequestOutput rejected;
  rejected.req = index;
  rejected.external_id = input.external_id;
  rejected.num_prompt_tokens = static_cast<int64_t>(input.prompt_token_ids.size());
  rejected.finished = true;
  rejected.finish_reason = FinishReason::kError;
  rejected.error = std::move(error);
  return rejected;
}

RequestIndex SubmissionQueue::Submit(RequestInput input) {
  const RequestIndex index = next_index_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_.submitted.emplace_back(index, std::move(input));
  }
  cv_.notify_one();
  return index;
}

void SubmissionQueue::Abort(RequestIndex index) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_.aborted.push_back(index);
  }
  cv_.notify_one();
}

SubmissionQueue::Taken SubmissionQueue::Take() {
  Taken taken;
  std::lock_guard<std::mutex> lock(mu_);
  std::swap(taken, queued_);
  return taken;
}

bool SubmissionQueue::empty() {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_.submitted.empty() && queued_.aborted.empty();
}

void SubmissionQueue::Wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [this] { return woken_ || !queued_.submitted.empty() || !queued_.aborted.empty(); });
  woken_ = false;
}

void SubmissionQueue::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  cv_.notify_one();
}

void InProcessEngineClient::Drain(std::vector<RequestOutput>& events) {
  SubmissionQueue::Taken taken = queue_.Take();
  for (auto& [index, input] : taken.submitted) {
    RequestOutput rejected = RejectedRequest(index, input, "");
    Status status = core_->AddRequest(index, std::move(input));
    if (status.ok()) continue;
    rejected.error = status.message();
    events.push_back(std::move(rejected));
  }
  for (RequestIndex index : taken.aborted) core_->AbortRequest(index);
}

std::vector<RequestOutput> InProcessEngineClient::Step() {
  std::vector<RequestOutput> events;
  Drain(events);
  if (core_->HasUnfinished()) {
    std::vector<RequestOutput> stepped = core_->Step();  // applies the KV connector's events first
    events.insert(events.end(), std::make_move_iterator(stepped.begin()), std::make_move_iterator(stepped.end()));
  } else {
    // KV holds end on the connector's thread: their blocks are freed here even when no request is
    // left to step.
    core_->ApplyKvConnectorEvents();
  }
  return events;
}

bool InProcessEngineClient::HasUnfinished() { return core_->HasUnfinished() || !queue_.empty(); }

void InProcessEngineClient::WaitForWork(std::chrono::milliseconds timeout) {
  // Requests whose prompt KV is on its way give a step nothing to do: sleep until the connector
  // wakes the loop.
  if (!core_->HasSchedulableWork()) queue_.Wait(timeout);
}

}  // namespace ember
