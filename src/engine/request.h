// One generation request as the engine core sees it: the frontend's inputs (already tokenized and
// validated) plus the scheduling state the scheduler advances step by step. Owned by the
// Scheduler; nothing here knows about HTTP, JSON or the model.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/kv_transfer_params.h"
#include "engine/multimodal_feature.h"
#include "engine/sampling_params.h"
#include "engine/scheduler_output.h"
#include "engine/spec_decode.h"

namespace ember {

using Clock = std::chrono::steady_clock;

enum class RequestStatus : uint8_t {
  kWaiting,    // admitted, never scheduled
  kRunning,    // holds KV blocks; scheduled this step or a recent one
  kPreempted,  // lost its blocks to a higher-ranked request; waits to recompute its tokens
  kWaitingForRemoteKv,  // holds blocks that a KV producer's prompt KV is being pulled into
  kFinished,
};

enum class FinishReason : uint8_t {
  kNone,    // not finished
  kStop,    // EOS or one of stop_token_ids
  kLength,  // max_tokens generated or max_model_len reached
  kAbort,   // the client went away or cancelled
  kError,   // the engine could not serve it (e.g. needs more KV cache than the whole pool)
};

std::string_view RequestStatusName(RequestStatus status);
// OpenAI's finish_reason vocabulary: "stop", "length", "abort", "error" ("" while running).
std::string_view FinishReasonName(FinishReason reason);

// What the frontend submits: immutable for the request's lifetime.
struct RequestInput {
  std::string external_id;               // the API's id, for logs and the frontend's routing
  std::vector<int32_t> prompt_token_ids;
  SamplingParams sampling;
  int32_t priority = 0;                  // priority policy: lower value is served first
  uint64_t cache_salt_key = 0;           // hash of the cache salt: requests with different keys never share KV
  // Images, video and audio whose encoder features replace the prompt's placeholder embeddings
  // (engine/multimodal_feature.h), in prompt order, ranges disjoint and inside the prompt.
  std::vector<MultiModalFeature> mm_features;
  KvTransferRequest kv_transfer;         // prefill/decode disaggregation (engine/kv_transfer_params.h)
  int32_t eos_token_id = -1;             // the tokenizer's EOS; -1 when there is none
  std::optional<Clock::time_point> arrival_time;  // when the HTTP request arrived; Add() stamps it if unset
};

// Times for latency metrics (TTFT = first_token - arrival, e2e = finished - arrival).
struct RequestTimes {
  Clock::time_point arrival;
  std::optional<Clock::time_point> first_scheduled;
  std::optional<Clock::time_point> first_token;
  std::optional<Clock::time_point> finished;
};

class Request {
 public:
  // `arrival_seq` orders requests that arrive at the same priority; `default_seed` is used when
  // the client gave no seed, so every request samples from its own stream, whatever the batch.
  Request(RequestIndex index, RequestInput input, uint64_t arrival_seq, uint64_t default_seed);

  RequestIndex index() const { return index_; }
  const std::string& external_id() const { return input_.external_id; }
  const SamplingParams& sampling() const { return input_.sampling; }
  int32_t priority() const { return input_.priority; }
  uint64_t arrival_seq() const { return arrival_seq_; }
  uint64_t cache_salt_key() const { return input_.cache_salt_key; }
  const std::vector<MultiModalFeature>& mm_features() const { return input_.mm_features; }
  // What the request's prefix-cache block hashes cover besides its tokens: its salt and its
  // multimodal content (so one image's placeholders never match another image's blocks).
  kv::BlockKeys block_keys() const { return kv::BlockKeys(input_.cache_salt_key, block_content_); }
  int32_t eos_token_id() const { return input_.eos_token_id; }
  uint64_t seed() const { return seed_; }  // sampling().seed, or the engine's default_seed

  // Prompt and output tokens live in one array so prefix caching can hash them as one sequence.
  std::span<const int32_t> all_token_ids() const { return tokens_; }
  std::span<const int32_t> prompt_token_ids() const { return std::span(tokens_).first(num_prompt_tokens_); }
  std::span<const int32_t> output_token_ids() const { return std::span(tokens_).subspan(num_prompt_tokens_); }
  int64_t num_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t num_prompt_tokens() const { return num_prompt_tokens_; }
  int64_t num_output_tokens() const { return num_tokens() - num_prompt_tokens_; }
  void AppendOutputToken(int32_t token) { tokens_.push_back(token); }

  // Tokens whose K/V the runner has computed (or will have, once the scheduled step runs).
  int64_t num_computed_tokens() const { return num_computed_tokens_; }
  void set_num_computed_tokens(int64_t n) { num_computed_tokens_ = n; }
  // Tokens still to compute before the next token can be sampled (1 while decoding).
  int64_t num_tokens_to_compute() const { return num_tokens() - num_computed_tokens_; }
  // Prompt tokens that came from the prefix cache on the first schedule (OpenAI's cached_tokens).
  int64_t num_cached_tokens() const { return num_cached_tokens_; }
  void set_num_cached_tokens(int64_t n) { num_cached_tokens_ = n; }

  RequestStatus status() const { return status_; }
  void set_status(RequestStatus status) { status_ = status; }
  bool finished() const { return status_ == RequestStatus::kFinished; }
  FinishReason finish_reason() const { return finish_reason_; }
  std::optional<int32_t> stop_token() const { return stop_token_; }  // which stop token ended it
  const std::string& error() const { return error_; }
  // Marks the request finished; `message` says why for kError, `stop_token` names the token for kStop.
  void Finish(FinishReason reason, std::string message = {}, std::optional<int32_t> stop_token = {});

  int32_t num_preemptions() const { return num_preemptions_; }
  // Back to the queue with nothing computed: recompute-only preemption.
  void Preempt();

  // Prefill/decode disaggregation (engine/kv_connector.h).
  const KvTransferRequest& kv_transfer() const { return input_.kv_transfer; }
  // A consumer's pull of the prompt KV that is still to be scheduled: wanted at admission (the
  // request names a producer), arrived once its blocks hold the KV; none otherwise (no pull, one in
  // flight: status kWaitingForRemoteKv, or one that failed and left it to compute its prompt).
  enum class KvPull : uint8_t { kNone, kWanted, kArrived };
  KvPull kv_pull() const { return kv_pull_; }
  void set_kv_pull(KvPull pull) { kv_pull_ = pull; }

  RequestTimes& times() { return times_; }
  const RequestTimes& times() const { return times_; }

  // Speculative decoding: the proposer's latest draft, followed against the tokens that come.
  DraftTracker& draft() { return draft_; }
  AcceptanceStats& acceptance() { return acceptance_; }
  const AcceptanceStats& acceptance() const { return acceptance_; }
  // Draft tokens verified by the step being planned or run (0: a plain step).
  int32_t num_spec_tokens() const { return num_spec_tokens_; }
  void set_num_spec_tokens(int32_t n) { num_spec_tokens_ = n; }
  // Draft tokens the last plan let this request verify (adaptive speculation's memory).
  int32_t last_spec_plan() const { return last_spec_plan_; }
  void set_last_spec_plan(int32_t n) { last_spec_plan_ = n; }
  // The request's token count when the runner last drafted for it; 0 before, and again after a
  // preemption (the runner's proposer drops the request then). A drafter model
  // (SchedulerConfig::proposer_catches_up) has computed that many; DSpark has projected them.
  int64_t drafter_tokens() const { return drafter_tokens_; }
  void set_drafter_tokens(int64_t n) { drafter_tokens_ = n; }
  // Per KV group, the block-list lengths the runner must cut its copy to before the next diff's
  // new blocks (set when rejected draft tokens gave blocks back; empty otherwise).
  std::vector<int32_t>& kept_blocks() { return kept_blocks_; }

  // Prompt logprobs (sampling().prompt_logprobs) arrive over the prefill's steps, entry k for
  // prompt token k + 1, starting at entry `first`. A recompute after preemption sends entries
  // already received again; they are dropped, so each is handed out once.
  void AddPromptLogprobs(int64_t first, std::vector<TokenLogprobs> entries);
  // The entries received and not yet taken (the frontend gets them with the first token).
  std::vector<TokenLogprobs> TakePromptLogprobs() { return std::exchange(prompt_logprobs_, {}); }

 private:
  RequestIndex index_;
  RequestInput input_;
  std::vector<kv::ExtraContent> block_content_;  // BlockContentOf(input_.mm_features)
  uint64_t seed_;
  uint64_t arrival_seq_;
  std::vector<int32_t> tokens_;  // prompt then output
  int64_t num_prompt_tokens_;
  int64_t num_computed_tokens_ = 0;
  int64_t num_cached_tokens_ = 0;
  RequestStatus status_ = RequestStatus::kWaiting;
  FinishReason finish_reason_ = FinishReason::kNone;
  std::optional<int32_t> stop_token_;
  std::string error_;
  int32_t num_preemptions_ = 0;
  RequestTimes times_;
  std::vector<TokenLogprobs> prompt_logprobs_;
  int64_t num_prompt_logprobs_ = 0;  // entries received so far, taken or not
  DraftTracker draft_;
  AcceptanceStats acceptance_;
  int32_t num_spec_tokens_ = 0;
  int32_t last_spec_plan_ = 0;
  int64_t drafter_tokens_ = 0;
  std::vector<int32_t> kept_blocks_;
  KvPull kv_pull_ = KvPull::kNone;
};

}  // namespace ember
