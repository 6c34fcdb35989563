#include "engine/scheduler.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <cmath>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "core/check.h"
#include "core/logging.h"
#include "engine/token_stop.h"

namespace ember {
namespace {

// SplitMix64 finalizer: decorrelates the seeds of neighbouring request indices.
uint64_t MixSeed(uint64_t base, uint64_t index) {
  uint64_t z = base + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The drafter model has computed all of `req` but a few tokens (drafter_catch_up.h).
bool DrafterIsCurrent(const Request& req) {
  return req.drafter_tokens() > 0 && req.num_tokens() - req.drafter_tokens() <= DrafterCatchUp::kCurrent;
}

}  // namespace

SpecPlanInput Scheduler::PlanInput(std::span<const SpecCandidate> candidates, int64_t base_tokens,
                                   int64_t base_emitted) const {
  return {.candidates = candidates,
          .base_tokens = base_tokens,
          .base_emitted = base_emitted,
          .propose_seconds = config_.propose_cost_per_position ? 0.0 : propose_seconds_,
          .propose_seconds_per_position = config_.propose_cost_per_position ? propose_seconds_ : 0.0,
          .cost = &config_.step_cost,
          .engine = &engine_acceptance_};
}

Status SchedulerConfig::Validate() const {
  if (max_num_seqs < 1) return InvalidArgument(fmt::format("max_num_seqs is {}: it must be at least 1", max_num_seqs));
  if (vocab_size < 1) {
    return InvalidArgument(fmt::format("vocab_size is {}: set it to the model's vocabulary size (ModelInfo::vocab_size)",
                                       vocab_size));
  }
  if (max_model_len < 2) {
    return InvalidArgument(fmt::format("max_model_len is {}: it must be at least 2 (one prompt and one output token)",
                                       max_model_len));
  }
  if (max_num_batched_tokens < max_num_seqs) {
    // Otherwise a full batch of decodes could not run in one step.
    return InvalidArgument(fmt::format("max_num_batched_tokens ({}) must be at least max_num_seqs ({})",
                                       max_num_batched_tokens, max_num_seqs));
  }
  if (!enable_chunked_prefill && max_num_batched_tokens < max_model_len) {
    return InvalidArgument(fmt::format(
        "without chunked prefill max_num_batched_tokens ({}) must be at least max_model_len ({}), or a long "
        "prompt could never be scheduled: raise it or enable chunked prefill",
        max_num_batched_tokens, max_model_len));
  }
  if (long_prefill_token_threshold < 0) {
    return InvalidArgument("long_prefill_token_threshold must be 0 (off) or positive");
  }
  if (shared_step_prefill_tokens < 0) {
    return InvalidArgument("shared_step_prefill_tokens must be 0 (off) or positive");
  }
  if (!(long_prefill_share > 0 && long_prefill_share <= 1)) {
    return InvalidArgument("long_prefill_share must be in (0, 1] (1: off)");
  }
  if (num_speculative_tokens < 0 || num_speculative_tokens > AcceptanceStats::kMaxPositions) {
    return InvalidArgument(fmt::format("num_speculative_tokens is {}: it must be in [0, {}]", num_speculative_tokens,
                                       AcceptanceStats::kMaxPositions));
  }
  if (num_speculative_tokens > 0 && adaptive_speculation && step_cost.empty()) {
    return InvalidArgument("adaptive speculation needs the step cost model (measure it, or turn adaptive off)");
  }
  return Status::Ok();
}

Scheduler::Scheduler(SchedulerConfig config, kv::KvCacheManager* kv)
    : config_(std::move(config)),
      kv_(kv),
      waiting_(config_.policy),
      guard_(config_.proposer_catches_up ? 0 : SpeculationGuard::kMaxExploreDoublings) {
  const Status valid = config_.Validate();
  EMBER_CHECK(valid.ok(), "invalid SchedulerConfig: {}", valid.message());
  EMBER_CHECK(kv_ != nullptr);
}

namespace {

// The runner trusts a request's multimodal ranges (it fills batch rows from them), so they are
// checked here like token ids: inside the prompt, in order, disjoint, with an input to encode.
// KV never moves between instances for them: the KV connector matches prompts by token ids, which
// are the same for every image of one size.
Status CheckMultiModalFeatures(const RequestInput& input) {
  if (input.mm_features.empty()) return Status::Ok();
  if (input.kv_transfer.do_remote_decode || input.kv_transfer.remote_prefill) {
    return InvalidArgument("kv_transfer_params cannot be combined with image, video or audio inputs");
  }
  const int64_t prompt_len = static_cast<int64_t>(input.prompt_token_ids.size());
  int64_t end = 0;
  for (size_t i = 0; i < input.mm_features.size(); ++i) {
    const MultiModalFeature& f = input.mm_features[i];
    const bool mask_ok = f.is_embed.empty() || static_cast<int64_t>(f.is_embed.size()) == f.length;
    if (f.offset < end || f.length <= 0 || f.offset + f.length > prompt_len || !mask_ok || f.input == nullptr ||
        (mask_ok && f.num_embeds() == 0)) {
      return InvalidArgument(fmt::format("multimodal input {} ({} at [{}, {})) does not fit the prompt of {} tokens",
                                         i, ModalityName(f.modality), f.offset, f.offset + f.length, prompt_len));
    }
    end = f.offset + f.length;
  }
  return Status::Ok();
}

}  // namespace

Status Scheduler::Add(RequestIndex index, RequestInput input) {
  const int64_t prompt_len = static_cast<int64_t>(input.prompt_token_ids.size());
  if (prompt_len == 0) return InvalidArgument("the prompt is empty: send at least one token");
  if (prompt_len >= config_.max_model_len) {
    return InvalidArgument(fmt::format(
        "the prompt has {} tokens but this model's context is {} tokens (max_model_len), which must also hold "
        "at least one generated token: shorten the prompt to at most {} tokens",
        prompt_len, config_.max_model_len, config_.max_model_len - 1));
  }
  // The runner trusts admitted ids: a forward pass that fails on one mid-step is an engine bug.
  for (size_t i = 0; i < input.prompt_token_ids.size(); ++i) {
    const int32_t id = input.prompt_token_ids[i];
    if (id < 0 || id >= config_.vocab_size) {
      return InvalidArgument(fmt::format("token id {} at index {} of the prompt is outside the vocabulary of the "
                                         "model's {} tokens: ids must be in [0, {}]",
                                         id, i, config_.vocab_size, config_.vocab_size - 1));
    }
  }
  if (input.sampling.max_tokens < 1) {
    return InvalidArgument(fmt::format("max_tokens is {}: it must be at least 1", input.sampling.max_tokens));
  }
  if (requests_.contains(index)) return InvalidArgument(fmt::format("request index {} is already in use", index));
  const KvTransferRequest& transfer = input.kv_transfer;
  if (transfer.do_remote_decode && !config_.kv_producer) {
    return InvalidArgument("kv_transfer_params asks for do_remote_decode, but this instance is no KV producer: start "
                           "it with --kv-transfer-config '{\"kv_connector\":\"UcxConnector\",\"kv_role\":\"kv_producer\"}'");
  }
  if (transfer.remote_prefill && !config_.kv_consumer) {
    return InvalidArgument("kv_transfer_params asks for do_remote_prefill, but this instance is no KV consumer: start "
                           "it with --kv-transfer-config '{\"kv_connector\":\"UcxConnector\",\"kv_role\":\"kv_consumer\"}'");
  }
  EMBER_RETURN_IF_ERROR(CheckMultiModalFeatures(input));
  auto req = std::make_unique<Request>(index, std::move(input), next_arrival_seq_++, MixSeed(config_.seed, index));
  if (const std::optional<RemoteKv>& remote = req->kv_transfer().remote_prefill) {
    // The KV a producer holds is only ever this prompt's: same length, same ids. Anything else
    // (another tokenizer or template upstream, a stale or forged kv_transfer_params) computes the
    // prompt here instead of decoding from someone else's KV.
    const std::span<const int32_t> prompt = req->prompt_token_ids();
    const int64_t expected = req->num_prompt_tokens() - 1;
    if (remote->num_tokens != expected || remote->num_tokens <= 0 ||
        remote->tokens_hash != KvTokensHash(prompt.first(static_cast<size_t>(expected)))) {
      EMBER_LOG_WARN("request {}: kv_transfer_params describe another prompt ({} tokens held, this one needs {}; or "
                     "their ids differ): computing the prompt here",
                     req->external_id(), remote->num_tokens, expected);
      req->set_kv_pull(Request::KvPull::kNone);
    }
  }
  waiting_.Add(req.get());
  requests_.emplace(index, std::move(req));
  return Status::Ok();
}

const Request* Scheduler::Find(RequestIndex index) const {
  auto it = requests_.find(index);
  return it == requests_.end() ? nullptr : it->second.get();
}

SchedulerStats Scheduler::Stats() const {
  SchedulerStats stats;
  stats.num_running = static_cast<int64_t>(running_.size());
  stats.num_waiting = static_cast<int64_t>(waiting_.size());
  stats.num_waiting_for_remote_kv = num_pulling_;
  stats.num_held_for_remote_decode = static_cast<int64_t>(held_.size());
  stats.kv_usage = kv_->usage();
  stats.num_preemptions = num_preemptions_;
  stats.prefix_cache = kv_->prefix_cache_stats();
  stats.spec_decode = spec_counters_;
  stats.multimodal = multimodal_;
  return stats;
}

// ---- Schedule ------------------------------------------------------------------------------

SchedulerOutput Scheduler::Schedule() {
  // A step shared by several requests holds a bounded prefill (SchedulerConfig::shared_step_prefill_tokens).
  const bool shared = running_.size() + waiting_.size() > 1;
  const int64_t prefill_budget = config_.enable_chunked_prefill && shared && config_.shared_step_prefill_tokens > 0
                                     ? std::min(config_.max_num_batched_tokens, config_.shared_step_prefill_tokens)
                                     : config_.max_num_batched_tokens;
  StepPlan plan;
  plan.budget = config_.max_num_batched_tokens;
  plan.prefill_budget = prefill_budget;
  if (prefill_budget < config_.max_num_batched_tokens) PlanLongPrefillShare(plan);
  ScheduleRunning(plan);
  // After a preemption the pool is known to be short: admitting new work would only thrash.
  if (plan.preempted.empty()) ScheduleWaiting(plan);
  return BuildOutput(plan);
}

void Scheduler::PlanLongPrefillShare(StepPlan& plan) const {
  if (config_.long_prefill_share >= 1) return;
  const int64_t long_tokens = plan.prefill_budget / 2;
  const auto is_short = [&](const Request* r) {
    const int64_t left = r->num_tokens_to_compute();
    return left > 1 && left <= long_tokens;
  };
  // Only the head of the queue can be admitted this step: a bounded look suffices.
  constexpr int kWaitingLooked = 64;
  bool short_waits = std::any_of(running_.begin(), running_.end(), is_short);
  int looked = 0;
  for (auto it = waiting_.begin(); !short_waits && it != waiting_.end() && looked < kWaitingLooked; ++it, ++looked) {
    short_waits = (*it)->kv_pull() == Request::KvPull::kNone && is_short(*it);
  }
  if (!short_waits) return;
  plan.long_prompt_tokens = long_tokens;
  plan.long_budget = static_cast<int64_t>(static_cast<double>(plan.prefill_budget) * config_.long_prefill_share);
}

int64_t Scheduler::TokensToSchedule(const Request& req, int64_t budget) const {
  int64_t n = req.num_tokens_to_compute();
  if (!config_.enable_chunked_prefill) return n <= budget ? n : 0;  // whole prompts only
  if (config_.long_prefill_token_threshold > 0) n = std::min(n, config_.long_prefill_token_threshold);
  return std::min(n, budget);
}

void Scheduler::ScheduleRunning(StepPlan& plan) {
  // Decodes first, so streaming requests keep their pace while long prompts (and recomputes
  // after preemption) share what is left of the budget.
  std::vector<Request*> order = running_;
  std::stable_partition(order.begin(), order.end(), [](const Request* r) { return r->num_tokens_to_compute() == 1; });
  constexpr double kLoadDecay = 0.95;  // about the last 20 steps
  running_load_ = kLoadDecay * running_load_ + (1.0 - kLoadDecay) * static_cast<double>(running_.size());
  PlanSpeculativeTokens(order, plan.budget);
  for (Request* req : order) {
    if (plan.budget == 0) break;
    // Preempted earlier in this loop (still alive, now waiting). Only `req` itself can fail and
    // be destroyed, and it is not visited again.
    if (req->status() != RequestStatus::kRunning) continue;
    // A decode's draft tokens ride along as far as the budget allows.
    const int64_t spec = std::min<int64_t>(req->num_spec_tokens(), std::max<int64_t>(0, plan.budget - 1));
    const int64_t left = req->num_tokens_to_compute();
    const bool prefill = spec == 0 && left > 1;
    int64_t n = spec > 0 ? 1 + spec : TokensToSchedule(*req, prefill ? plan.PrefillLimit(left) : plan.budget);
    if (n == 0) continue;
    std::optional<kv::KvBlocks> blocks = AllocateForRunning(req, n, plan);
    if (!blocks) continue;
    req->set_num_spec_tokens(static_cast<int32_t>(std::max<int64_t>(0, n - req->num_tokens_to_compute())));
    plan.entries.push_back({req, n, false, std::move(*blocks)});
    plan.budget -= n;
    if (prefill) plan.TakePrefill(left, n);
    plan.prefill_budget = std::min(plan.prefill_budget, plan.budget);
  }
}

void Scheduler::PlanSpeculativeTokens(const std::vector<Request*>& order, int64_t budget) {
  for (Request* req : order) req->set_num_spec_tokens(0);
  guard_step_ = {.step_id = next_step_id_};
  if (config_.num_speculative_tokens == 0) return;
  std::vector<Request*> decodes;
  std::vector<SpecCandidate> candidates;
  int64_t base_tokens = 0, base_emitted = 0;
  for (Request* req : order) {
    const int64_t to_compute = req->num_tokens_to_compute();
    base_tokens += std::min(to_compute, std::max<int64_t>(0, budget - base_tokens));
    if (to_compute != 1) continue;
    ++base_emitted;
    // Every emitted token must fit max_tokens and max_model_len, the last one (the target's
    // own) included.
    const int64_t room = std::min<int64_t>(req->sampling().max_tokens - req->num_output_tokens(),
                                           config_.max_model_len - req->num_tokens()) - 1;
    const int64_t ahead = static_cast<int64_t>(req->draft().Ahead(req->num_tokens()).size());
    const int64_t max = std::min<int64_t>({ahead, room, config_.num_speculative_tokens});
    if (max <= 0) continue;
    decodes.push_back(req);
    candidates.push_back({static_cast<int32_t>(max), &req->acceptance(), req->draft().confidences()});
  }
  guard_step_.num_decodes = base_emitted;
  // Every step with decodes is a decision, drafts or not: the guard's exploration schedule counts
  // steps, and a switched-off bucket, which stops drafting, must still reach its next exploration.
  const bool allowed = !config_.adaptive_speculation || base_emitted == 0 || guard_.Allow(base_emitted);
  guard_step_.allowed = allowed;
  if (candidates.empty()) {
    if (base_emitted > 0) guard_.Planned(base_emitted, false, allowed);
    if (base_emitted > 0) EMBER_LOG_DEBUG("spec plan: {} decodes, none with drafts, allowed {}", base_emitted, allowed);
    return;
  }
  std::vector<int32_t> plan;
  if (!allowed) {
    plan.assign(candidates.size(), 0);
  } else if (config_.adaptive_speculation) {
    SpecPlanInput input = PlanInput(candidates, base_tokens, base_emitted);
    // A block drafter costs the same per step at any draft length, and where speculation is on
    // and the guard wants the step to draft for the next one, it drafts whatever this plan
    // verifies (TokensToPropose follows the guard, not the plan): the drafting is paid either
    // way, so the plan weighs only what verifying costs. Charged to verification, the drafting (a
    // third of a SmolLM2 step at 1 request) made the plan leave 40% of the drafts it had paid for
    // unverified: 0.93-1.12x no speculation in paired runs, 1.04-1.16x weighed this way
    // (bench/results/dspark_s25). Where the bucket is learning or off, drafting goes on only
    // while plans verify (or for exploring and probing), so it is still the choice: each draft
    // must pay for it, or the plans verify nothing and the drafting stops. Not charged there, the
    // plans of a learning 16-decode bucket verified ~25 tokens a step that the drafting (3 ms of
    // an 11 ms step) made 10-30% slower, for seconds, until the guard switched it off
    // (bench/results/dspark_s37).
    input.propose_paid_anyway = !config_.propose_cost_per_position && !config_.proposer_catches_up &&
                                guard_.on(base_emitted) && !guard_.Probing(base_emitted) &&
                                guard_.WantsDrafts(base_emitted, ProposerIsCostly(base_emitted));
    plan = PlanSpeculation(input);
  } else {
    for (const SpecCandidate& c : candidates) plan.push_back(c.max_tokens);
  }
  guard_.Planned(base_emitted, std::any_of(plan.begin(), plan.end(), [](int32_t n) { return n > 0; }), allowed);
  EMBER_LOG_DEBUG("spec plan: {} decodes, {} with drafts, allowed {}, verifies {} tokens, proposer {:.2f} ms", base_emitted,
                  candidates.size(), allowed, std::accumulate(plan.begin(), plan.end(), int64_t{0}), propose_seconds_ * 1e3);
  for (size_t i = 0; i < decodes.size(); ++i) {
    decodes[i]->set_num_spec_tokens(plan[i]);
    decodes[i]->set_last_spec_plan(plan[i]);
  }
}

int32_t Scheduler::TokensToPropose(Request& req) {
  if (config_.num_speculative_tokens == 0) return 0;
  // Adaptive: a little past what was verified last, so the plan can grow; drafting is cheap for
  // lookups, and a drafter model pays only for what may be used.
  if (config_.adaptive_speculation) {
    const int64_t decodes = std::max<int64_t>(1, guard_step_.num_decodes);
    const bool costly = ProposerIsCostly(decodes);
    if (!guard_.WantsDrafts(decodes, costly)) return 0;
    if (config_.proposer_catches_up && !CatchUpPays(req)) return 0;
    // Not even the guard's learning and probing steps draft where drafts cannot pay at this batch
    // size: a DSpark drafting step for 16 requests costs about a decode step on a CPU, and those
    // steps alone cost 7-17% of the throughput at 16-64 requests (bench/results/dspark_s23).
    // Except a block drafter's probe where only the drafting's price stands in the way: a probe
    // is the only step that measures that price again once drafting has stopped, and judged by
    // the price a burst of load had set, a 1-request SmolLM2 server drafted nothing for the rest
    // of its run (bench/results/dspark_s34). A drafter model's probe would first catch the
    // request up, which CatchUpPays weighs (such probes cost 2% at 4 requests in
    // DrafterCatchUp.AtFourRequestsACatchUpThatDoesNotPayIsNotMade).
    const bool probing = costly && guard_.Probing(decodes);
    const bool probe_prices_drafting =
        probing && !config_.proposer_catches_up && DraftsWouldBeVerified(/*drafting_free=*/true);
    if (costly && !DraftsWouldBeVerified() && !probe_prices_drafting) return 0;
    // A probe asks whether the plan would verify fresh drafts now; a few requests' drafts answer
    // that (the plan verifies the drafts it is surest of), while drafting for every request of a
    // step of 16 cost the SmolLM2 DSpark drafter about as much as the decode step itself.
    if (probing && !ProbesWith(req)) return 0;
  }
  if (config_.proposer_catches_up) {
    guard_step_.catch_up_tokens += std::max<int64_t>(0, req.num_tokens() - req.drafter_tokens());
  }
  req.set_drafter_tokens(req.num_tokens());
  const int32_t want = config_.adaptive_speculation ? std::max(2, req.last_spec_plan() + 2)
                                                    : config_.num_speculative_tokens;
  return std::min(want, config_.num_speculative_tokens);
}

int64_t Scheduler::DrafterLag(const Request& req) {
  return req.num_tokens() - std::max(req.drafter_tokens(), req.num_prompt_tokens());
}

bool Scheduler::ProbesWith(const Request& req) {
  // The probe's ProbeDrafts requests are those the drafter is most nearly current with: a
  // drafter that catches up (a draft model) or keeps its context lazily (DSpark projects the
  // rows of every token since the request last drafted) pays least for them, and a request
  // prefilled a step ago costs nothing to catch up. Where speculation is off, the first
  // requests in order would be the longest-running ones, those that cost most.
  if (!guard_step_.probe_lag) {
    // Among the requests that have sampled: one still computing its prompt drafts nothing this
    // step, and its lag of 0 would take a probe's place.
    std::vector<int64_t> lags;
    for (const Request* r : running_) {
      if (r->num_output_tokens() > 0) lags.push_back(DrafterLag(*r));
    }
    if (lags.empty()) lags.push_back(DrafterLag(req));
    guard_step_.probe_width = ProbeDrafts(static_cast<int64_t>(lags.size()));
    const size_t n = static_cast<size_t>(guard_step_.probe_width);
    std::nth_element(lags.begin(), lags.begin() + static_cast<std::ptrdiff_t>(n - 1), lags.end());
    guard_step_.probe_lag = lags[n - 1];
  }
  return DrafterLag(req) <= *guard_step_.probe_lag && guard_step_.probe_drafts++ < guard_step_.probe_width;
}

bool Scheduler::ProposerIsCostly(int64_t decodes) const {
  // Over 2% of a plain step: worth stopping when nothing is verified.
  const double per_step = propose_seconds_ * (config_.propose_cost_per_position ? config_.num_speculative_tokens : 1);
  return config_.proposer_catches_up || per_step > 0.02 * config_.step_cost.Seconds(std::max<int64_t>(1, decodes));
}

bool Scheduler::DraftsWouldBeVerified(bool drafting_free) {
  // Until the acceptance is measured, drafts are what measures it.
  if (engine_acceptance_.checked(1) < DrafterCatchUp::kMinDraftsForAcceptance) return true;
  std::optional<bool>& answer = drafting_free ? guard_step_.drafts_verifiable_if_free : guard_step_.drafts_verifiable;
  if (answer) return *answer;
  // A drafter model: the requests it is current with, and the one asking (at the engine's
  // acceptance). Another proposer (DSpark) drafts for every running request, and its plan reads
  // each draft's confidences: the bound is a draft it is sure of (confidence 1 at every position,
  // as far as its measured calibration believes that), since the plan verifies exactly the drafts
  // it is most sure of. Gated on the mean acceptance instead, the SmolLM2 drafter stopped drafting
  // at 1 request, where the plan had verified 2.2 tokens per step.
  static constexpr std::array<float, AcceptanceStats::kMaxPositions> kSure = [] {
    std::array<float, AcceptanceStats::kMaxPositions> a{};
    a.fill(1.0f);
    return a;
  }();
  const int32_t k = std::min<int32_t>(config_.num_speculative_tokens, AcceptanceStats::kMaxPositions);
  std::vector<SpecCandidate> current;
  if (config_.proposer_catches_up) current.push_back({.max_tokens = config_.num_speculative_tokens});
  for (const Request* r : running_) {
    if (config_.proposer_catches_up && !DrafterIsCurrent(*r)) continue;
    current.push_back({.max_tokens = config_.num_speculative_tokens,
                       .stats = &r->acceptance(),
                       .confidences = config_.proposer_catches_up ? std::span<const float>{}
                                                                  : std::span<const float>(kSure).first(k)});
  }
  const int64_t decodes = std::max<int64_t>(1, static_cast<int64_t>(running_.size()));
  SpecPlanInput input = PlanInput(current, decodes, decodes);
  if (drafting_free) input.propose_seconds = input.propose_seconds_per_position = 0.0;
  const std::vector<int32_t> plan = PlanSpeculation(input);
  answer = std::any_of(plan.begin(), plan.end(), [](int32_t n) { return n > 0; });
  return *answer;
}

bool Scheduler::CatchUpPays(const Request& req) const {
  // A current request always drafts: skip the prediction and the scan over the running requests,
  // which would make every step's drafting decisions quadratic in the batch.
  const int64_t behind = req.num_tokens() - req.drafter_tokens();
  if (behind <= DrafterCatchUp::kCurrent) return true;
  // The request will draft in steps of about as many decodes as requests run: as many as now, or
  // as recently when more (a moment between one request's end and the next one's arrival says
  // nothing about the load the request will decode under).
  const int64_t decodes =
      std::max<int64_t>({1, static_cast<int64_t>(running_.size()), std::lround(running_load_)});
  // What speculating saves per token: as measured in the bucket, else as the plan predicts it
  // for a step in which every running request verifies a full draft, from the acceptance the
  // engine measured (drafts are checked whether verified or not) and the drafter's measured cost.
  std::optional<double> saving = guard_.SavingPerToken(decodes);
  const bool predicted = !saving;
  if (!saving && engine_acceptance_.checked(1) >= DrafterCatchUp::kMinDraftsForAcceptance) {
    const std::vector<SpecCandidate> all(static_cast<size_t>(decodes),
                                         SpecCandidate{.max_tokens = config_.num_speculative_tokens});
    const SpecPrediction p = PredictSpeculation(PlanInput(all, decodes, decodes));
    saving = p.rate > p.base_rate ? 1.0 / p.base_rate - 1.0 / p.rate : 0.0;
  }
  const bool another_is_current =
      std::any_of(running_.begin(), running_.end(), [&](const Request* r) { return r != &req && DrafterIsCurrent(*r); });
  const int64_t room = std::min<int64_t>(req.sampling().max_tokens - req.num_output_tokens(),
                                         config_.max_model_len - req.num_tokens());
  const bool pays = catch_up_.Pays({.behind = behind,
                                    .emitted = req.num_output_tokens(),
                                    .room = room,
                                    .saving_per_token = saving,
                                    .saving_predicted = predicted,
                                    .another_is_current = another_is_current});
  EMBER_LOG_DEBUG("drafter catch-up of request {}: {} tokens at {:.2f} ms/token, saving {} ms/token over ~{:.0f} "
                  "tokens left: {}", req.index(), behind, catch_up_.seconds_per_token() * 1e3,
                  !saving ? "unknown (learning)" : fmt::format("{:.3f} {}", *saving * 1e3, predicted ? "predicted" : "measured"),
                  catch_up_.ExpectedTokensLeft(req.num_output_tokens(), room), pays ? "yes" : "no");
  return pays;
}

std::optional<kv::KvBlocks> Scheduler::AllocateForRunning(Request* req, int64_t& num_tokens, StepPlan& plan) {
  while (true) {
    auto blocks = kv_->AllocateSlots(req->index(), req->num_computed_tokens(), num_tokens, nullptr);
    if (blocks) return blocks;
    if (running_.size() == 1) {
      // Alone, nothing can be preempted. A smaller chunk may still fit where sliding-window
      // groups release blocks as the request advances; one token that does not fit never will.
      if (config_.enable_chunked_prefill && num_tokens > 1) {
        num_tokens /= 2;
        continue;
      }
      FailAlone(req);
      return std::nullopt;
    }
    Request* victim = LowestRankedRunning();
    Preempt(victim, plan);
    if (victim == req) return std::nullopt;
  }
}

Request* Scheduler::LowestRankedRunning() const {
  EMBER_CHECK(!running_.empty());
  return *std::max_element(running_.begin(), running_.end(), [this](const Request* a, const Request* b) {
    return RanksBefore(config_.policy, *a, *b);
  });
}

void Scheduler::Preempt(Request* victim, StepPlan& plan) {
  // Under the priority policy the victim may already have a share of this step: give it back.
  auto it = std::find_if(plan.entries.begin(), plan.entries.end(), [victim](const Scheduled& s) { return s.req == victim; });
  if (it != plan.entries.end()) {
    plan.budget += it->num_tokens;
    plan.entries.erase(it);
  }
  kv_->Free(victim->index());
  RemoveFromRunning(victim);
  victim->Preempt();
  waiting_.Add(victim);
  plan.preempted.push_back(victim->index());
  ++num_preemptions_;
}

void Scheduler::ScheduleWaiting(StepPlan& plan) {
  // Long prompts the long share holds back this step stay at the head of the queue, in order; the
  // requests behind them may be admitted first. Nothing else overtakes (a request short of blocks
  // keeps its place).
  size_t passed = 0;
  while (plan.budget > 0 && static_cast<int64_t>(running_.size()) + num_pulling_ < config_.max_num_seqs &&
         passed < waiting_.size()) {
    Request* req = *std::next(waiting_.begin(), static_cast<std::ptrdiff_t>(passed));
    const RequestIndex index = req->index();
    if (req->kv_pull() == Request::KvPull::kWanted) {
      if (!StartRemotePrefill(req)) break;
      if (req->status() == RequestStatus::kWaitingForRemoteKv) continue;
      // Its prefix-cache hit covers the producer's KV: nothing to pull; computed as usual below.
    }
    if (req->kv_pull() == Request::KvPull::kArrived) {
      if (!ScheduleArrived(req, plan)) break;
      continue;
    }
    // Prompt logprobs need every prompt position computed, so such a request takes no cache hit.
    const kv::CacheHit hit = req->sampling().prompt_logprobs
                                 ? kv::CacheHit{}
                                 : kv_->FindCachedPrefix(req->all_token_ids(), req->block_keys());
    EMBER_CHECK(hit.num_tokens < req->num_tokens());
    req->set_num_computed_tokens(hit.num_tokens);
    const int64_t left = req->num_tokens_to_compute();
    int64_t n = TokensToSchedule(*req, plan.PrefillLimit(left));
    if (n == 0 && left > plan.long_prompt_tokens && std::min(plan.budget, plan.prefill_budget) > 0) {
      req->set_num_computed_tokens(0);
      ++passed;  // held back by the long share only: the short prompts behind it go first
      continue;
    }
    if (n == 0) break;  // whole prompt only, and it does not fit this step's budget: keep order
    std::optional<kv::KvBlocks> blocks = AllocateForWaiting(req, hit, n);
    if (!blocks) {
      if (!requests_.contains(index)) continue;  // could never fit: failed and gone
      req->set_num_computed_tokens(0);
      break;  // wait for running requests to free blocks; later ones must not overtake
    }
    waiting_.Remove(req);
    if (!req->times().first_scheduled) {
      req->times().first_scheduled = Clock::now();
      req->set_num_cached_tokens(hit.num_tokens);
    }
    req->set_status(RequestStatus::kRunning);
    running_.push_back(req);
    plan.entries.push_back({req, n, true, {}});
    plan.budget -= n;
    plan.TakePrefill(left, n);
  }
}

bool Scheduler::StartRemotePrefill(Request* req) {
  const RemoteKv& remote = *req->kv_transfer().remote_prefill;
  const kv::CacheHit hit = req->sampling().prompt_logprobs
                               ? kv::CacheHit{}
                               : kv_->FindCachedPrefix(req->all_token_ids(), req->block_keys());
  if (hit.num_tokens >= remote.num_tokens) {
    req->set_kv_pull(Request::KvPull::kNone);  // already here: the usual path takes the hit
    remote_releases_.push_back(remote);
    return true;
  }
  // Blocks for the positions the producer holds after the hit, as if they were computed: a
  // sliding-window group gets only those its window still reads (the rest of a long prompt never
  // takes a block here). None yet for the last prompt token, which the request computes once the
  // KV is in. Taking the hit first keeps AllocateSlots' first call at the hit.
  const bool allocated = kv_->AllocateSlots(req->index(), hit.num_tokens, 0, &hit) &&
                         kv_->AllocateSlots(req->index(), remote.num_tokens, 0, nullptr);
  if (!allocated) {
    kv_->Free(req->index());
    if (!running_.empty() || num_pulling_ > 0) return false;  // wait for blocks to come back
    // Nothing else holds blocks and the prompt's KV still does not fit: the usual path halves
    // the chunk or fails the request with its message.
    req->set_kv_pull(Request::KvPull::kNone);
    return true;
  }
  waiting_.Remove(req);
  if (!req->times().first_scheduled) req->times().first_scheduled = Clock::now();
  req->set_num_cached_tokens(hit.num_tokens);
  req->set_num_computed_tokens(hit.num_tokens);
  req->set_status(RequestStatus::kWaitingForRemoteKv);
  req->set_kv_pull(Request::KvPull::kNone);
  ++num_pulling_;
  pulls_to_start_.push_back({req->index(), remote, hit.num_tokens, req->kv_transfer().num_pulls});
  return true;
}

bool Scheduler::ScheduleArrived(Request* req, StepPlan& plan) {
  int64_t n = TokensToSchedule(*req, std::min(plan.budget, plan.prefill_budget));
  if (n == 0) return false;
  if (!kv_->AllocateSlots(req->index(), req->num_computed_tokens(), n, nullptr)) return false;
  waiting_.Remove(req);
  req->set_kv_pull(Request::KvPull::kNone);
  req->set_status(RequestStatus::kRunning);
  running_.push_back(req);
  plan.entries.push_back({req, n, true, {}});
  plan.budget -= n;
  plan.prefill_budget -= n;
  return true;
}

void Scheduler::FinishPull(RequestIndex index, bool ok) {
  if (cancelled_pulls_.erase(index)) {
    kv_->Free(index);
    return;
  }
  auto it = requests_.find(index);
  EMBER_CHECK(it != requests_.end() && it->second->status() == RequestStatus::kWaitingForRemoteKv,
              "a pull ended for request {}, which does not wait for one", index);
  Request* req = it->second.get();
  --num_pulling_;
  req->set_status(RequestStatus::kWaiting);
  if (ok) {
    req->set_num_computed_tokens(req->kv_transfer().remote_prefill->num_tokens);
    req->set_kv_pull(Request::KvPull::kArrived);
  } else {
    // Its blocks hold whatever arrived, and its sliding groups have no blocks for positions it must
    // now compute: it starts over like a new request (its prefix-cache hit still counts).
    kv_->Free(index);
    req->set_num_computed_tokens(0);
    req->set_kv_pull(Request::KvPull::kNone);
  }
  waiting_.Add(req);
}

void Scheduler::ReleaseHeld(RequestIndex index) {
  if (held_.erase(index)) kv_->Free(index);
}

std::optional<kv::KvBlocks> Scheduler::AllocateForWaiting(Request* req, const kv::CacheHit& hit, int64_t& num_tokens) {
  while (true) {
    auto blocks = kv_->AllocateSlots(req->index(), hit.num_tokens, num_tokens, &hit);
    if (blocks || !running_.empty()) return blocks;
    // Nothing else holds blocks: same reasoning as for a running request alone.
    if (config_.enable_chunked_prefill && num_tokens > 1) {
      num_tokens /= 2;
      continue;
    }
    waiting_.Remove(req);
    FailAlone(req);
    return std::nullopt;
  }
}

void Scheduler::FailAlone(Request* req) {
  std::string message = fmt::format(
      "a request of {} tokens needs more KV cache than the whole pool holds, even with no other request "
      "running: shorten the prompt or max_tokens, or give the engine more KV cache memory",
      req->num_tokens());
  pending_outputs_.push_back(Finish(req, FinishReason::kError, std::move(message)));
}

SchedulerOutput Scheduler::BuildOutput(StepPlan& plan) {
  SchedulerOutput out;
  out.step_id = next_step_id_++;
  out.finished_reqs = std::exchange(finished_for_runner_, {});
  out.preempted_reqs = std::move(plan.preempted);
  const bool speculating = config_.num_speculative_tokens > 0;
  guard_step_.decode_only = !plan.entries.empty();
  for (Scheduled& s : plan.entries) {
    Request* req = s.req;
    // A decode computes its one new token and its draft; anything else is (part of) a prefill.
    guard_step_.decode_only &= !s.is_new && s.num_tokens == 1 + req->num_spec_tokens();
    out.scheduled_reqs.push_back(req->index());
    out.num_scheduled_tokens.push_back(static_cast<int32_t>(s.num_tokens));
    out.total_num_scheduled_tokens += s.num_tokens;
    if (speculating) {
      const std::span<const int32_t> draft = req->draft().Ahead(req->num_tokens()).first(req->num_spec_tokens());
      out.scheduled_spec_tokens.emplace_back(draft.begin(), draft.end());
      const bool samples = req->num_computed_tokens() + s.num_tokens == req->num_tokens() + req->num_spec_tokens();
      out.num_tokens_to_propose.push_back(samples ? TokensToPropose(*req) : 0);
    }
    if (s.is_new) {
      NewRequestData data;
      data.req = req->index();
      data.prompt_token_ids.assign(req->prompt_token_ids().begin(), req->prompt_token_ids().end());
      data.output_token_ids.assign(req->output_token_ids().begin(), req->output_token_ids().end());
      data.sampling = req->sampling();
      data.sampling.seed = req->seed();  // resolved: the runner always gets one
      data.eos_token_id = req->eos_token_id();
      data.block_ids = kv_->Blocks(req->index());
      data.num_computed_tokens = req->num_computed_tokens();
      data.cache_salt_key = req->cache_salt_key();
      data.mm_features = req->mm_features();
      out.new_reqs.push_back(std::move(data));
    } else {
      out.cached_reqs.push_back(
          {req->index(), std::move(s.new_blocks), req->num_computed_tokens(), std::exchange(req->kept_blocks(), {})});
    }
    // The step's tokens count as computed from now on (vLLM does the same): the next Schedule
    // can already plan the following decode while this step runs.
    req->set_num_computed_tokens(req->num_computed_tokens() + s.num_tokens);
  }
  EMBER_CHECK(out.total_num_scheduled_tokens <= config_.max_num_batched_tokens);
  EMBER_CHECK(static_cast<int64_t>(running_.size()) <= config_.max_num_seqs);
  return out;
}

// ---- After the step ------------------------------------------------------------------------

std::vector<RequestOutput> Scheduler::UpdateFromOutput(const SchedulerOutput& scheduled,
                                                       const ModelRunnerOutput& output) {
  std::vector<RequestOutput> events = std::exchange(pending_outputs_, {});
  if (!output.reqs.empty()) {
    EMBER_CHECK(output.step_id == scheduled.step_id, "runner answered step {} for step {}", output.step_id,
                scheduled.step_id);
    EMBER_CHECK(output.reqs == scheduled.scheduled_reqs, "runner answered other requests than step {} scheduled",
                scheduled.step_id);
    EMBER_CHECK(output.sampled_token_ids.size() == output.reqs.size());
  }
  multimodal_.Add(output.multimodal);
  spec_counters_.propose_seconds += output.propose_seconds;
  spec_counters_.hidden_states_seconds += output.hidden_states_seconds;
  constexpr double kProposeDecay = 0.9;
  constexpr int64_t kProposeMaxAge = 8;
  // The proposer's per-step cost when it drafts (a step that drafted nothing says nothing about
  // it), without one-off catch-ups. The old estimate ages by the steps since it was measured (up
  // to kProposeMaxAge: one measurement then weighs 57%, not all, since one step's drafting is a
  // noisy sample), so a few measurements after a long pause replace it: where drafting stops
  // (the plan would not verify at that price, or the guard probes), only rare steps measure it
  // again, and aged per measurement an estimate a burst of load had raised kept a 1-request
  // SmolLM2 server from drafting for the rest of a run (bench/results/dspark_s34).
  size_t longest_draft = 0;
  for (const std::vector<int32_t>& d : output.draft_token_ids) longest_draft = std::max(longest_draft, d.size());
  if (output.propose_seconds > 0.0 && (longest_draft > 0 || !config_.propose_cost_per_position)) {
    double cost = output.propose_seconds - output.propose_catch_up_seconds;
    if (config_.propose_cost_per_position) cost /= static_cast<double>(longest_draft);
    const double old_weight =
        propose_seconds_ == 0.0
            ? 0.0
            : std::pow(kProposeDecay, static_cast<double>(std::min<uint64_t>(
                                              scheduled.step_id - propose_measured_step_, kProposeMaxAge)));
    propose_seconds_ = old_weight * propose_seconds_ + (1.0 - old_weight) * cost;
    propose_measured_step_ = scheduled.step_id;
  }
  if (config_.adaptive_speculation && config_.num_speculative_tokens > 0 && output.execute_seconds > 0.0 &&
      scheduled.total_num_scheduled_tokens > 0) {
    config_.step_cost.Observe(scheduled.total_num_scheduled_tokens, output.execute_seconds - output.propose_seconds);
    if (guard_step_.step_id == scheduled.step_id && guard_step_.decode_only) {
      int64_t emitted = 0;
      for (const std::vector<int32_t>& tokens : output.sampled_token_ids) emitted += static_cast<int64_t>(tokens.size());
      // Each mode is charged what a steady run of it costs: a decision the guard allowed its step
      // and the drafting that made its drafts (the step before drafted them, and does so whether
      // the plan then verifies them or not), a plain decision its step without any drafting. The
      // drafting this step did is the next decision's.
      const double seconds = output.execute_seconds - output.propose_seconds +
                             (guard_step_.allowed ? drafting_for_this_step_ : 0.0);
      guard_.Record(guard_step_.num_decodes, guard_step_.allowed, emitted, seconds);
    }
  }
  drafting_for_this_step_ = output.propose_seconds;
  if (guard_step_.step_id == scheduled.step_id && guard_step_.catch_up_tokens > 0) {
    catch_up_.ObserveCatchUp(guard_step_.catch_up_tokens, output.propose_catch_up_seconds);
  }
  for (size_t i = 0; i < scheduled.scheduled_reqs.size(); ++i) {
    auto it = requests_.find(scheduled.scheduled_reqs[i]);
    if (it == requests_.end() || it->second->status() != RequestStatus::kRunning) continue;  // aborted meanwhile
    Request* req = it->second.get();
    if (i < output.prompt_logprobs.size() && !output.prompt_logprobs[i].empty()) {
      // The step's tokens already count as computed, so its first position is that minus them.
      req->AddPromptLogprobs(req->num_computed_tokens() - scheduled.num_scheduled_tokens[i], output.prompt_logprobs[i]);
    }
    const bool sampled = i < output.sampled_token_ids.size() && !output.sampled_token_ids[i].empty();
    if (!sampled) {
      // A partial prefill: its newly full blocks are reusable as soon as their K/V exists.
      kv_->CacheFullBlocks(req->index(), req->all_token_ids(), req->num_computed_tokens(), req->block_keys());
      continue;
    }
    RollBackRejected(req, output.sampled_token_ids[i].size());
    const std::vector<TokenLogprobs>* logprobs = i < output.logprobs.size() ? &output.logprobs[i] : nullptr;
    const std::vector<int32_t>* draft = i < output.draft_token_ids.size() ? &output.draft_token_ids[i] : nullptr;
    const std::vector<float>* confidences =
        i < output.draft_confidences.size() ? &output.draft_confidences[i] : nullptr;
    events.push_back(AppendTokens(req, output.sampled_token_ids[i], logprobs, draft, confidences));
  }
  return events;
}

void Scheduler::RollBackRejected(Request* req, size_t num_emitted) {
  const int32_t drafted = req->num_spec_tokens();
  req->set_num_spec_tokens(0);
  if (drafted == 0) return;
  const int32_t accepted = static_cast<int32_t>(num_emitted) - 1;
  EMBER_CHECK(accepted >= 0 && accepted <= drafted, "request {}: {} tokens emitted for {} draft tokens",
              req->index(), num_emitted, drafted);
  // The K/V of rejected positions was written but is never read: the next step overwrites it.
  req->set_num_computed_tokens(req->num_computed_tokens() - (drafted - accepted));
  ++spec_counters_.num_drafts;
  spec_counters_.num_draft_tokens += drafted;
  spec_counters_.num_accepted_tokens += accepted;
  if (spec_counters_.accepted_per_position.size() < static_cast<size_t>(config_.num_speculative_tokens)) {
    spec_counters_.accepted_per_position.resize(config_.num_speculative_tokens, 0);
    spec_counters_.drafts_per_length.resize(config_.num_speculative_tokens, 0);
  }
  for (int32_t j = 0; j < accepted; ++j) ++spec_counters_.accepted_per_position[j];
  ++spec_counters_.drafts_per_length[drafted - 1];
}

RequestOutput Scheduler::AppendTokens(Request* req, const std::vector<int32_t>& tokens,
                                      const std::vector<TokenLogprobs>* logprobs, const std::vector<int32_t>* draft,
                                      const std::vector<float>* confidences) {
  // Every emitted token but the last has its K/V computed (accepted drafts); the last one is
  // computed by the next step.
  EMBER_CHECK(req->num_computed_tokens() == req->num_tokens() + static_cast<int64_t>(tokens.size()) - 1,
              "request {} sampled before its tokens were computed", req->index());
  if (!req->times().first_token) req->times().first_token = Clock::now();
  std::vector<TokenLogprobs> prompt_logprobs = req->TakePromptLogprobs();  // before Finish frees req
  std::vector<int32_t> new_tokens;
  std::vector<TokenLogprobs> new_logprobs;
  std::optional<StopDecision> stop;
  for (size_t k = 0; k < tokens.size() && !stop; ++k) {
    req->AppendOutputToken(tokens[k]);
    new_tokens.push_back(tokens[k]);
    if (logprobs && k < logprobs->size()) new_logprobs.push_back((*logprobs)[k]);
    stop = CheckTokenStop(*req, config_.max_model_len);
  }
  req->draft().Check(req->all_token_ids(), &req->acceptance(), &engine_acceptance_);
  // A stop inside an accepted draft leaves computed positions past the last kept token.
  const int64_t computed = std::min(req->num_computed_tokens(), req->num_tokens());
  kv_->CacheFullBlocks(req->index(), req->all_token_ids(), computed, req->block_keys());
  RequestOutput event;
  if (stop) {
    event = Finish(req, stop->reason, {}, stop->stop_token);
  } else {
    if (config_.num_speculative_tokens > 0) {
      // Blocks that only rejected draft tokens reached go back to the pool; the runner hears of it
      // with the request's next diff.
      std::vector<int32_t> kept = kv_->TrimTo(req->index(), req->num_tokens());
      if (!kept.empty()) req->kept_blocks() = std::move(kept);
      if (draft != nullptr && !draft->empty()) {
        req->draft().Start(*draft, req->num_tokens(), &req->acceptance(), &engine_acceptance_,
                           confidences != nullptr ? std::span<const float>(*confidences) : std::span<const float>());
      }
    }
    event = MakeOutput(*req);
  }
  event.new_token_ids = std::move(new_tokens);
  event.new_logprobs = std::move(new_logprobs);
  event.prompt_logprobs = std::move(prompt_logprobs);
  return event;
}

// ---- Finishing -------------------------------------------------------------------------------

bool Scheduler::Abort(RequestIndex index) {
  auto it = requests_.find(index);
  if (it == requests_.end()) return false;
  pending_outputs_.push_back(Finish(it->second.get(), FinishReason::kAbort));
  return true;
}

RequestOutput Scheduler::Finish(Request* req, FinishReason reason, std::string message,
                               std::optional<int32_t> stop_token) {
  const RequestIndex index = req->index();
  // A producer keeps a finished prefill's prompt KV for the consumer (all but the last prompt
  // token: the consumer computes that one to get its first token's logits).
  const bool hold = req->kv_transfer().do_remote_decode && req->status() == RequestStatus::kRunning &&
                    (reason == FinishReason::kStop || reason == FinishReason::kLength) &&
                    req->num_prompt_tokens() >= 2 && req->num_computed_tokens() >= req->num_prompt_tokens() - 1;
  if (req->status() == RequestStatus::kRunning) {
    // Only running requests are known to the runner (preempted ones were dropped there).
    finished_for_runner_.push_back(index);
    RemoveFromRunning(req);
  } else if (req->status() != RequestStatus::kWaitingForRemoteKv) {
    waiting_.Remove(req);
  }
  if (req->kv_pull() == Request::KvPull::kWanted) remote_releases_.push_back(*req->kv_transfer().remote_prefill);
  if (req->status() == RequestStatus::kWaitingForRemoteKv) {
    // The transport may still write its blocks: they are freed when its pull ends (FinishPull).
    --num_pulling_;
    cancelled_pulls_.insert(index);
    pulls_to_cancel_.push_back(index);
  } else if (hold) {
    const int64_t held_tokens = req->num_prompt_tokens() - 1;
    held_.insert(index);
    newly_held_.push_back(
        {index, held_tokens, KvTokensHash(req->prompt_token_ids().first(static_cast<size_t>(held_tokens)))});
  } else {
    kv_->Free(index);
  }
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) catch_up_.ObserveFinished(req->num_output_tokens());
  req->Finish(reason, std::move(message), stop_token);
  RequestOutput event = MakeOutput(*req);
  requests_.erase(req->index());  // `req` dangles from here on
  return event;
}

RequestOutput Scheduler::MakeOutput(const Request& req) const {
  RequestOutput out;
  out.req = req.index();
  out.external_id = req.external_id();
  out.finished = req.finished();
  out.finish_reason = req.finish_reason();
  out.stop_token = req.stop_token();
  out.error = req.error();
  out.num_prompt_tokens = req.num_prompt_tokens();
  out.num_output_tokens = req.num_output_tokens();
  out.num_cached_tokens = req.num_cached_tokens();
  out.times = req.times();
  return out;
}

void Scheduler::RemoveFromRunning(Request* req) {
  auto it = std::find(running_.begin(), running_.end(), req);
  EMBER_CHECK(it != running_.end());
  running_.erase(it);
}

}  // namespace ember
