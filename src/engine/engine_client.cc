#include "engine/engine_client.h"

namespace ember {

RequestIndex InProcessEngineClient::Submit(RequestInput input) {
  const RequestIndex index = next_index_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    submitted_.emplace_back(index, std::move(input));
  }
  cv_.notify_one();
  return index;
}

void InProcessEngineClient::Abort(RequestIndex index) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_.push_back(index);
  }
  cv_.notify_one();
}

void InProcessEngineClient::Drain(std::vector<RequestOutput>& events) {
  std::vector<std::pair<RequestIndex, RequestInput>> submitted;
  std::vector<RequestIndex> aborted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    submitted.swap(submitted_);
    aborted.swap(aborted_);
  }
  for (auto& [index, input] : submitted) {
    RequestOutput rejected;
    rejected.req = index;
    rejected.external_id = input.external_id;
    rejected.num_prompt_tokens = static_cast<int64_t>(input.prompt_token_ids.size());
    Status status = core_->AddRequest(index, std::move(input));
    if (status.ok()) continue;
    rejected.finished = true;
    rejected.finish_reason = FinishReason::kError;
    rejected.error = status.message();
    events.push_back(std::move(rejected));
  }
  for (RequestIndex index : aborted) core_->AbortRequest(index);
}

std::vector<RequestOutput> InProcessEngineClient::Step() {
  std::vector<RequestOutput> events;
  Drain(events);
  if (core_->HasUnfinished()) {
    std::vector<RequestOutput> stepped = core_->Step();
    events.insert(events.end(), std::make_move_iterator(stepped.begin()), std::make_move_iterator(stepped.end()));
  }
  return events;
}

bool InProcessEngineClient::HasUnfinished() {
  if (core_->HasUnfinished()) return true;
  std::lock_guard<std::mutex> lock(mu_);
  return !submitted_.empty() || !aborted_.empty();
}

void InProcessEngineClient::WaitForWork(std::chrono::milliseconds timeout) {
  if (core_->HasUnfinished()) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [this] { return !submitted_.empty() || !aborted_.empty(); });
}

}  // namespace ember
