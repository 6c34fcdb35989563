// The scheduler's side of speculative decoding (reference/next_capabilities.md §1,
// serving_engines.md §3.2-3.3): following each request's draft against the tokens that really
// came, acceptance statistics per draft position, the measured cost of a step, and the choice of
// how many draft tokens each request verifies this step.
//
// Acceptance is measured on every draft, verified or not: once the request's next tokens are
// known, the draft's longest matching prefix is what verification would have accepted (the
// runner's verification is coupled to the sampler: it emits exactly the tokens decoding without
// speculation emits). So speculation that was switched off keeps learning whether it would pay,
// at no cost.
//
// The choice (PlanSpeculation) maximises the expected tokens per second of the step: each extra
// draft token of request r at draft position i adds P_r(positions 1..i accepted) expected tokens
// (from the proposer's confidences when it gives them, else from the measured acceptance)
// and one token of step cost, read from the StepCostModel measured at engine start. The extra
// tokens with the largest expected gains are taken while they raise tokens/s; none at all when
// the best choice is not clearly (kMinGain) better than no speculation. The cost model starts from
// the startup measurement and follows the measured step times (StepCostModel::Observe). Where the
// plan is still wrong, SpeculationGuard (spec_guard.h) switches speculation off by what it realised.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ember {

// Seconds one engine step takes for a batch of n tokens on this machine and model (decode-shaped
// steps with short contexts), measured at startup by the runner; linear between the points and
// beyond the last one.
struct StepCostModel {
  std::vector<int64_t> tokens;  // increasing, from 1
  std::vector<double> seconds;

  bool empty() const { return tokens.empty(); }
  double Seconds(int64_t n) const;
  // A step of n tokens took `seconds`: moves the nearest point, and every larger one by the same
  // factor, a little toward what that says (and keeps the table non-decreasing), so the model
  // follows this machine as it is now (other load, longer contexts) rather than only as it was at
  // startup, and the cost of extra tokens above n grows with it.
  void Observe(int64_t n, double seconds);
  std::string Describe() const;  // "1 tok 4.1 ms, 2 tok 4.3 ms, ..." for the startup log
};

// Per draft position i (1-based): how often positions 1..i all matched among the drafts whose
// position i was checked. Conditional(i) = P(i accepted | 1..i-1 accepted).
//
// For drafts that came with the proposer's confidences it also sums them per position, so that
// ConfidenceScale(i) = accepted / predicted at i: calibration-in-the-large of a confidence head
// online. A drafter's STS temperatures are fitted offline on its own held-out data; a different
// workload, a quantized target or an untrained head shifts them, and Algorithm 1 would otherwise
// believe them (a random drafter says 0.5 and is never right).
class AcceptanceStats {
 public:
  static constexpr int kMaxPositions = 16;
  // A draft whose first `checked` positions were compared, the first `matched` of them equal
  // (matched == checked, or matched + 1 == checked when position matched + 1 differed), with the
  // proposer's confidence in each draft token (empty: none given).
  void Record(int32_t matched, int32_t checked, std::span<const float> confidences = {});
  // With `prior` pseudo-observations at `prior_rate`, so a request with few drafts borrows the
  // engine's rate.
  double Conditional(int32_t position, double prior_rate, double prior) const;
  int64_t checked(int32_t position) const { return checked_[position - 1]; }
  int64_t matched(int32_t position) const { return matched_[position - 1]; }
  // What multiplies the proposer's confidence at `position` to match what was accepted there:
  // (accepted + prior) / (sum of confidences + prior) over the drafts with confidences checked
  // that far, so 1 until evidence accumulates (`prior` is in expected tokens).
  double ConfidenceScale(int32_t position, double prior) const;

 private:
  int64_t checked_[kMaxPositions] = {};
  int64_t matched_[kMaxPositions] = {};
  double confidence_sum_[kMaxPositions] = {};   // over drafts with confidences, position checked
  int64_t confident_matched_[kMaxPositions] = {};
};

// One request's current draft, checked against the tokens as they arrive.
class DraftTracker {
 public:
  // A new draft for the positions from `start` (the request's token count when it was proposed).
  // An unfinished earlier draft is recorded as far as it was checked.
  void Start(std::span<const int32_t> draft, int64_t start, AcceptanceStats* request, AcceptanceStats* engine,
             std::span<const float> confidences = {});
  // The request's tokens grew (or it ended): compares what can be compared, records a finished draft.
  void Check(std::span<const int32_t> all_tokens, AcceptanceStats* request, AcceptanceStats* engine);
  // The draft tokens still ahead of the request's `num_tokens` known tokens (what a step can verify).
  std::span<const int32_t> Ahead(int64_t num_tokens) const;
  // The proposer's confidence in each token of Ahead() (empty when it gave none).
  std::span<const float> confidences() const { return confidences_; }
  void Clear() {
    tokens_.clear();
    confidences_.clear();
  }

 private:
  void Record(AcceptanceStats* request, AcceptanceStats* engine);

  std::vector<int32_t> tokens_;
  std::vector<float> confidences_;
  int64_t start_ = 0;
  int32_t matched_ = 0;
  int32_t checked_ = 0;
  bool done_ = true;
};

// vLLM's spec-decode counters (verified drafts only), for /metrics.
struct SpecDecodeCounters {
  int64_t num_drafts = 0;           // verification passes with at least one draft token
  int64_t num_draft_tokens = 0;     // draft tokens verified
  int64_t num_accepted_tokens = 0;  // of which accepted
  std::vector<int64_t> accepted_per_position;  // [i]: drafts whose position i + 1 was accepted
  std::vector<int64_t> drafts_per_length;      // [i]: drafts verified with i + 1 tokens (the plan's choice)
  // The proposer's time, every step it ran (drafting or not): drafting (Proposer::Propose) and
  // taking in the target's hidden states (DSpark's context upkeep, paid by every step).
  double propose_seconds = 0.0;
  double hidden_states_seconds = 0.0;
};

// One decoding request offered to PlanSpeculation.
struct SpecCandidate {
  int32_t max_tokens = 0;  // draft tokens it may verify (draft length, ceiling, length limits)
  const AcceptanceStats* stats = nullptr;
  // The proposer's per-token confidence (P(token i survives | 1..i-1 did), e.g. DSpark's
  // calibrated head): when given, the prefix survival is their running product (DSpark's
  // Algorithm 1) instead of the measured acceptance, each scaled by the engine's
  // AcceptanceStats::ConfidenceScale at its position.
  std::span<const float> confidences;
};

struct SpecPlanInput {
  std::span<const SpecCandidate> candidates;
  int64_t base_tokens = 0;         // tokens the step computes without speculation
  int64_t base_emitted = 0;        // tokens it emits without speculation (one per decode)
  double propose_seconds = 0.0;    // the proposer's cost per step, paid when anyone speculates
  // The step pays propose_seconds whether or not it verifies: it drafts for the next step either
  // way (Scheduler::TokensToPropose decides that, not this plan), so the cost is on both sides and
  // only the verification's own cost decides. False: drafting is the choice being weighed (paid
  // only with speculation), as when deciding whether to draft at all.
  bool propose_paid_anyway = false;
  // The proposer's cost per position of the longest verified draft (a drafter model's forward per
  // draft token), paid on top: drafting m tokens for the next step costs m of them.
  double propose_seconds_per_position = 0.0;
  const StepCostModel* cost = nullptr;
  const AcceptanceStats* engine = nullptr;
};

// Speculate only when predicted at least 5% faster: the margin absorbs the cost model's error, so
// that speculation is never measurably slower than none.
inline constexpr double kMinGain = 1.05;

// Draft tokens to verify per candidate (parallel to candidates).
std::vector<int32_t> PlanSpeculation(const SpecPlanInput& input);

// The plan with the tokens/s it expects, and plain decoding's (rate == base_rate: no speculation).
struct SpecPrediction {
  std::vector<int32_t> plan;
  double rate = 0.0;
  double base_rate = 0.0;
};
SpecPrediction PredictSpeculation(const SpecPlanInput& input);

}  // namespace ember
