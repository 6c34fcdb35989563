#include "engine/request.h"

#include <utility>

#include "core/check.h"

namespace ember {

std::string_view RequestStatusName(RequestStatus status) {
  switch (status) {
    case RequestStatus::kWaiting: return "waiting";
    case RequestStatus::kRunning: return "running";
    case RequestStatus::kPreempted: return "preempted";
    case RequestStatus::kWaitingForRemoteKv: return "waiting_for_remote_kv";
    case RequestStatus::kFinished: return "finished";
  }
  return "?";
}

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
  }
  return "?";
}

Request::Request(RequestIndex index, RequestInput input, uint64_t arrival_seq, uint64_t default_seed)
    : index_(index),
      input_(std::move(input)),
      block_content_(BlockContentOf(input_.mm_features)),
      seed_(input_.sampling.seed.value_or(default_seed)),
      arrival_seq_(arrival_seq),
      tokens_(std::move(input_.prompt_token_ids)),  // the prompt lives only in tokens_
      num_prompt_tokens_(static_cast<int64_t>(tokens_.size())) {
  times_.arrival = input_.arrival_time.value_or(Clock::now());
  if (input_.kv_transfer.remote_prefill) kv_pull_ = KvPull::kWanted;
}

void Request::Finish(FinishReason reason, std::string message, std::optional<int32_t> stop_token) {
  EMBER_CHECK(reason != FinishReason::kNone);
  EMBER_CHECK(!finished(), "request {} finished twice", index_);
  status_ = RequestStatus::kFinished;
  finish_reason_ = reason;
  error_ = std::move(message);
  stop_token_ = stop_token;
  times_.finished = Clock::now();
}

void Request::Preempt() {
  EMBER_CHECK(status_ == RequestStatus::kRunning);
  status_ = RequestStatus::kPreempted;
  num_computed_tokens_ = 0;
  ++num_preemptions_;
  draft_.Clear();
  num_spec_tokens_ = 0;
  drafter_tokens_ = 0;
  kept_blocks_.clear();
}

void Request::AddPromptLogprobs(int64_t first, std::vector<TokenLogprobs> entries) {
  // Such requests never start from a cache hit, so entries come in order from 0: a gap is a bug.
  EMBER_CHECK(first <= num_prompt_logprobs_, "request {}: prompt logprobs from entry {}, {} received", index_, first,
              num_prompt_logprobs_);
  for (size_t j = static_cast<size_t>(num_prompt_logprobs_ - first); j < entries.size(); ++j) {
    prompt_logprobs_.push_back(std::move(entries[j]));
    ++num_prompt_logprobs_;
  }
}

}  // namespace ember
