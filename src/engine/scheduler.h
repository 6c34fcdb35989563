// The continuous-batching scheduler (vLLM v1's design, reference/codebases.md §2): there are no
// prefill and decode phases. Each step hands out a token budget so that every running request's
// num_computed_tokens catches up with its token count — a decode needs 1 token, a prompt many,
// a request resumed after preemption all of its prompt and output again.
//
// One step: Schedule() -> SchedulerOutput -> (runner) -> UpdateFromOutput() -> RequestOutputs.
//   1. running requests, decodes first, each allocating KV slots for its new tokens; when the
//      pool is short the lowest-ranked running request is preempted (blocks freed, recomputed
//      later from scratch);
//   2. if nothing was preempted, waiting requests in policy order, each starting from its
//      prefix-cache hit, while the budget, max_num_seqs and the pool allow.
// A request that cannot fit even with nothing else running finishes with an error instead of
// preempting forever. Single-threaded: EngineCore drives it from the engine thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/drafter_catch_up.h"
#include "engine/kv_connector.h"
#include "engine/kv_transfer_params.h"
#include "engine/request.h"
#include "engine/request_output.h"
#include "engine/request_queue.h"
#include "engine/scheduler_output.h"
#include "engine/spec_guard.h"
#include "kv/kv_cache_manager.h"

namespace ember {

struct SchedulerConfig {
  int32_t max_num_seqs = 256;              // running requests at most
  int64_t max_num_batched_tokens = 2048;   // tokens computed per step at most
  int64_t max_model_len = 4096;            // prompt + output tokens at most
  // The model's vocabulary: prompt token ids must lie in [0, vocab_size). Required (no default
  // fits every model), so that admission, not the runner, rejects an id the model cannot embed.
  int64_t vocab_size = 0;
  // Split long prompts across steps. Without it a prompt is computed in one step, so
  // max_num_batched_tokens must be at least max_model_len.
  bool enable_chunked_prefill = true;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  // With chunked prefill: tokens of one request per step at most, so one long prompt leaves room
  // for others' prefills (vLLM's long_prefill_token_threshold). 0 = no cap.
  int64_t long_prefill_token_threshold = 0;
  // With chunked prefill: prompt tokens (prefill and recompute) of a step that holds more than one
  // request at most, so a burst of prompts reaches its first tokens one chunk after another
  // instead of all at the end of one long step, and decodes are not held up behind it. A request
  // alone may use all of max_num_batched_tokens. 0 = no cap. Measured on SmolLM2 (engine/README).
  int64_t shared_step_prefill_tokens = 0;
  // With shared_step_prefill_tokens: while a short prompt (at most half of that budget left to
  // compute) waits or is being prefilled, long prompts together take at most this share of a
  // shared step's prefill budget, and a waiting long prompt held back by it lets the short ones
  // behind it go first. So a short prompt arriving behind a long one gets its first token within
  // a step or two instead of after the whole long prefill; the long one still advances every
  // step. 1 = off (long prompts take the budget in arrival order). Measured (engine/README.md).
  double long_prefill_share = 0.5;
  uint64_t seed = 0;  // mixed with the request index into the seed of requests that bring none
  // Speculative decoding: the most draft tokens one request verifies per step (0: off). The
  // runner's proposer drafts them; see engine/spec_decode.h.
  int32_t num_speculative_tokens = 0;
  // Choose per step how many to verify from step_cost and the measured acceptance (required
  // then); off: verify as many as the draft holds, up to the ceiling.
  bool adaptive_speculation = true;
  StepCostModel step_cost;
  // The proposer's time grows with the draft length (spec::Proposer::cost_grows_with_draft_length:
  // a draft model): adaptive speculation prices it per draft position, not per step.
  bool propose_cost_per_position = false;
  // The proposer catches a request up before drafting for it (spec::Proposer::catches_up: a draft
  // model): adaptive speculation asks it to only where that is repaid (engine/drafter_catch_up.h).
  bool proposer_catches_up = false;
  // Prefill/decode disaggregation (engine/kv_connector.h): this instance holds its requests' prompt
  // KV for consumers when they ask (a producer), pulls prompt KV from producers (a consumer).
  bool kv_producer = false;
  bool kv_consumer = false;

  Status Validate() const;
};

// One data-parallel rank's share of SchedulerStats (DEP: a scheduler per rank).
struct DataParallelRankStats {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  double kv_usage = 0.0;
};

// Disaggregation: a finished request whose prompt KV the scheduler keeps for a consumer.
struct HeldKvRequest {
  RequestIndex index = 0;
  int64_t num_tokens = 0;    // prompt positions held (all but the last prompt token)
  uint64_t tokens_hash = 0;  // KvTokensHash of those positions' ids
};
// Disaggregation: a consumer request whose blocks are ready for its prompt KV to be pulled into.
struct KvPullToStart {
  RequestIndex index = 0;
  RemoteKv from;
  int64_t first_token = 0;  // prompt positions below it came from the prefix cache
  int32_t num_pulls = 1;
};

struct SchedulerStats {
  int64_t num_running = 0;
  int64_t num_waiting = 0;  // including preempted requests waiting to resume
  int64_t num_waiting_for_remote_kv = 0;  // disaggregation: consumer requests whose KV is on its way
  int64_t num_held_for_remote_decode = 0; // disaggregation: finished producer requests holding KV
  double kv_usage = 0.0;    // fraction of the KV pool held by requests
  int64_t num_preemptions = 0;  // since the scheduler started
  kv::PrefixCacheStats prefix_cache;
  SpecDecodeCounters spec_decode;
  KvTransferStats kv_transfer;  // disaggregation: the connector's counters (EngineCore::Stats)
  MultiModalStepStats multimodal;  // since the scheduler started: encoder work and cache hits
  // Data parallelism: per rank, in rank order (the fields above are their sums, kv_usage their
  // mean); empty with one scheduler.
  std::vector<DataParallelRankStats> data_parallel_ranks;
};

class Scheduler {
 public:
  // `config` must pass Validate(). `kv` outlives the scheduler and is used by it alone.
  Scheduler(SchedulerConfig config, kv::KvCacheManager* kv);

  // Admits a request (index unique for the engine's lifetime) or says why not: empty prompt, a
  // prompt leaving no room for one output token within max_model_len, a prompt token id outside
  // [0, vocab_size), a duplicate index.
  Status Add(RequestIndex index, RequestInput input);
  // Finishes a request wherever it is and frees its blocks; false if it is unknown or finished.
  bool Abort(RequestIndex index);

  SchedulerOutput Schedule();
  // Appends the sampled tokens, registers newly full blocks for prefix caching, applies the
  // token-level stop checks and frees finished requests. Returns one event per request that
  // produced tokens or finished since the previous call (aborts and errors included).
  std::vector<RequestOutput> UpdateFromOutput(const SchedulerOutput& scheduled, const ModelRunnerOutput& output);

  bool HasUnfinished() const { return !requests_.empty(); }
  // True when a step can do something now: a request other than those whose KV is being pulled,
  // or runner updates (so an engine loop can sleep while only pulls are in flight).
  bool HasSchedulableWork() const {
    return static_cast<int64_t>(requests_.size()) > num_pulling_ || HasPendingRunnerUpdates();
  }

  // ---- Prefill/decode disaggregation (engine/kv_connector.h); the engine core drives these ----
  // Producer: requests that finished since the last call whose blocks are held for a consumer.
  std::vector<HeldKvRequest> TakeNewlyHeld() { return std::exchange(newly_held_, {}); }
  // Producer: the consumer pulled it, it expired or could not be held: frees its blocks.
  void ReleaseHeld(RequestIndex index);
  // Consumer: requests whose blocks were allocated this step for a pull to start.
  std::vector<KvPullToStart> TakePullsToStart() { return std::exchange(pulls_to_start_, {}); }
  // Consumer: producers' held KV that requests will not pull after all (their prefix-cache hit
  // covered it, or they finished before their pull started).
  std::vector<RemoteKv> TakeRemoteReleases() { return std::exchange(remote_releases_, {}); }
  // Consumer: pulls of requests that finished (aborted) while their KV was on its way.
  std::vector<RequestIndex> TakePullsToCancel() { return std::exchange(pulls_to_cancel_, {}); }
  // Consumer: a pull ended. Ok: the request's prompt KV is in its blocks and it decodes from there;
  // otherwise it gives its blocks back and computes its prompt from its prefix-cache hit. An aborted request's blocks are
  // freed now, not before: the transport may have written them until this call.
  void FinishPull(RequestIndex index, bool ok);
  int64_t num_unfinished() const { return static_cast<int64_t>(requests_.size()); }
  // True when finished or preempted requests must still be reported to the runner.
  bool HasPendingRunnerUpdates() const { return !finished_for_runner_.empty(); }
  const Request* Find(RequestIndex index) const;  // null once finished
  SchedulerStats Stats() const;
  const SchedulerConfig& config() const { return config_; }

  // Requests a costly proposer drafts for in a probe (SpeculationGuard::Probing), of `running`
  // requests that have sampled: a quarter, 1 to kMaxProbeDrafts. The plan weighs each draft by its
  // confidences against what verifying its tokens costs in a step of that many decodes; drafting
  // for all four requests at 4 made every probe cost half a decode step of the SmolLM2 target
  // (each request's waiting rows projected).
  static constexpr int64_t kMaxProbeDrafts = 4;
  static int64_t ProbeDrafts(int64_t running) { return std::clamp<int64_t>(running / 4, 1, kMaxProbeDrafts); }

 private:
  struct Scheduled {  // one request's share of the step being planned
    Request* req;
    int64_t num_tokens;
    bool is_new;                // first schedule or resumption: the runner gets all of it
    kv::KvBlocks new_blocks;    // for requests the runner already knows
  };
  struct StepPlan {
    int64_t budget = 0;
    int64_t prefill_budget = 0;  // of `budget`, what prompt tokens may still take
    // Prompts with more than this many tokens left are long (no limit: every prompt is short).
    int64_t long_prompt_tokens = std::numeric_limits<int64_t>::max();
    int64_t long_budget = std::numeric_limits<int64_t>::max();  // of `prefill_budget`, what long prompts may still take
    std::vector<Scheduled> entries;
    std::vector<RequestIndex> preempted;

    // The prompt tokens a request with `left` tokens to compute may take now.
    int64_t PrefillLimit(int64_t left) const {
      const int64_t limit = std::min(budget, prefill_budget);
      return left > long_prompt_tokens ? std::min(limit, long_budget) : limit;
    }
    void TakePrefill(int64_t left, int64_t n) {
      prefill_budget -= n;
      if (left > long_prompt_tokens) long_budget -= n;
    }
  };
  // Sets plan.long_prompt_tokens / long_budget for a step whose prefill budget is shared
  // (SchedulerConfig::long_prefill_share).
  void PlanLongPrefillShare(StepPlan& plan) const;

  void ScheduleRunning(StepPlan& plan);
  // Sets num_spec_tokens of the decoding requests in `order` for this step.
  void PlanSpeculativeTokens(const std::vector<Request*>& order, int64_t budget);
  // Tokens the runner should draft after this step for `req` (0: none). Marks the drafter as
  // current with `req` (Request::drafter_tokens) when it asks for a draft.
  int32_t TokensToPropose(Request& req);
  // Tokens of `req` its proposer has not drafted since (its prompt not counted).
  static int64_t DrafterLag(const Request& req);
  // In a probing step, whether `req` is one of the ProbeDrafts that draft; counts it.
  bool ProbesWith(const Request& req);
  // What PlanSpeculation needs besides the candidates: the step cost model, the proposer's cost.
  SpecPlanInput PlanInput(std::span<const SpecCandidate> candidates, int64_t base_tokens, int64_t base_emitted) const;
  // The proposer's time is a noticeable part of a step of `decodes` decodes (not a lookup).
  bool ProposerIsCostly(int64_t decodes) const;
  // Adaptive speculation with a drafter model: is catching `req` up repaid (drafter_catch_up.h)?
  bool CatchUpPays(const Request& req) const;
  // Would the plan verify full drafts? Of a drafter model, at the acceptance measured so far
  // (drafts are checked whether verified or not), for the requests it is current with and one
  // more: drafting for one request of four runs the same forwards as for all four. Of another
  // costly proposer (DSpark), for every running request, each draft as sure as the proposer's
  // measured calibration allows: an upper bound, false only where no draft could pay at this
  // batch size. Where the plan would verify none of it, drafting is pure cost. True until
  // kMinDraftsForAcceptance drafts are measured; asked once per step. `drafting_free`: were
  // drafting free (only verification priced), which only the drafting's own cost can change.
  bool DraftsWouldBeVerified(bool drafting_free = false);
  // After a verification step: num_computed_tokens back to the accepted length, and the counters.
  void RollBackRejected(Request* req, size_t num_emitted);
  void ScheduleWaiting(StepPlan& plan);
  // Tokens `req` may compute this step within `budget` (0 = none this step).
  int64_t TokensToSchedule(const Request& req, int64_t budget) const;
  // Allocates slots for a running request, preempting lower-ranked ones while the pool is short.
  // Returns nullopt if `req` itself was preempted or failed. May shrink `num_tokens`.
  std::optional<kv::KvBlocks> AllocateForRunning(Request* req, int64_t& num_tokens, StepPlan& plan);
  // Allocates slots for a waiting request from its prefix-cache hit; nullopt when it must wait
  // (or failed because it cannot fit alone). May shrink `num_tokens`.
  std::optional<kv::KvBlocks> AllocateForWaiting(Request* req, const kv::CacheHit& hit, int64_t& num_tokens);
  // A consumer request at the head of the queue: allocates blocks for its prompt KV after its
  // prefix-cache hit and sends it waiting for the pull. False when it must wait for blocks.
  bool StartRemotePrefill(Request* req);
  // A consumer request whose pull ended: schedules the rest of its prompt into the blocks it holds.
  // False when the budget or the pool cannot take it this step.
  bool ScheduleArrived(Request* req, StepPlan& plan);
  Request* LowestRankedRunning() const;
  void Preempt(Request* victim, StepPlan& plan);
  void FailAlone(Request* req);  // finishes with an error: cannot fit even alone
  SchedulerOutput BuildOutput(StepPlan& plan);

  // Appends one step's sampled tokens to a running request, stopping at the first stop; caches
  // its newly full blocks, gives back blocks that only rejected drafts used, and takes its next
  // draft and the proposer's confidences in it (either may be null).
  RequestOutput AppendTokens(Request* req, const std::vector<int32_t>& tokens,
                             const std::vector<TokenLogprobs>* logprobs, const std::vector<int32_t>* draft,
                             const std::vector<float>* confidences);
  // Ends a request: frees its blocks, drops it from the queues and destroys it. Returns its
  // final event.
  RequestOutput Finish(Request* req, FinishReason reason, std::string message = {},
              std::optional<int32_t> stop_token = {});
  RequestOutput MakeOutput(const Request& req) const;
  void RemoveFromRunning(Request* req);

  SchedulerConfig config_;
  kv::KvCacheManager* kv_;
  std::unordered_map<RequestIndex, std::unique_ptr<Request>> requests_;  // unfinished ones
  RequestQueue waiting_;
  std::vector<Request*> running_;  // in the order they started running
  std::vector<RequestIndex> finished_for_runner_;  // reported in the next SchedulerOutput
  std::vector<RequestOutput> pending_outputs_;     // final events of aborts and errors
  // Disaggregation (see the public functions above).
  std::vector<HeldKvRequest> newly_held_;
  std::unordered_set<RequestIndex> held_;
  std::vector<KvPullToStart> pulls_to_start_;
  std::vector<RequestIndex> pulls_to_cancel_;
  std::vector<RemoteKv> remote_releases_;
  std::unordered_set<RequestIndex> cancelled_pulls_;  // aborted while pulling: blocks freed at FinishPull
  int64_t num_pulling_ = 0;                            // requests in kWaitingForRemoteKv
  uint64_t next_step_id_ = 0;
  uint64_t next_arrival_seq_ = 0;
  int64_t num_preemptions_ = 0;
  AcceptanceStats engine_acceptance_;  // every request's drafts, verified or not
  SpecDecodeCounters spec_counters_;
  MultiModalStepStats multimodal_;  // summed from the runner's outputs
  // Moving average of the proposer's cost per step, or per position of the longest draft where
  // config_.propose_cost_per_position, aged by the steps since its last measurement
  // (propose_measured_step_), not by the measurements: see UpdateFromOutput.
  double propose_seconds_ = 0.0;
  uint64_t propose_measured_step_ = 0;
  SpeculationGuard guard_;             // adaptive only: off where speculation realised less
  DrafterCatchUp catch_up_;            // adaptive with a drafter model: which requests it catches up
  double running_load_ = 0.0;          // moving average of running requests per step
  // What the guard needs to judge the step in flight (set by Schedule, read by UpdateFromOutput).
  struct GuardStep {
    uint64_t step_id = 0;
    int64_t num_decodes = 0;
    bool decode_only = false;
    bool allowed = false;  // what the guard answered for the step's decision
    int64_t catch_up_tokens = 0;  // tokens the drafter is asked to catch up after the step
    std::optional<bool> drafts_verifiable;  // DraftsWouldBeVerified, once asked in the step
    std::optional<bool> drafts_verifiable_if_free;  // DraftsWouldBeVerified(true), once asked
    int64_t probe_drafts = 0;               // requests a costly proposer probes with this step
    int64_t probe_width = 0;                // ProbeDrafts of the step, once asked
    std::optional<int64_t> probe_lag;       // ProbesWith's bound on DrafterLag, once asked in the step
  };
  GuardStep guard_step_;
  // The drafting the last step did (its output's propose_seconds): the cost of the drafts the
  // step in flight verifies, charged to it by the guard.
  double drafting_for_this_step_ = 0.0;
};

}  // namespace ember
