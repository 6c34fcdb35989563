// Whether a costly proposer (a draft model) should catch a request up before drafting for it.
//
// A drafter model can draft for a request only once it has computed every token of it: a new
// request's whole prompt, or the tokens of the steps it did not draft in. That catch-up is the
// drafter's prefill, a one-off cost of about a millisecond per token for a 135M drafter on 2
// cores, and speculation repays it only over the tokens the request still emits. On an AMD EPYC
// VM, SmolLM2's Q4_1 drafter made its BF16 target ~1.1x faster per decode step at 4 requests, and
// catching up a 330-token prompt cost more than that saved over the request's whole output: draft
// speculation ran at 0.87x no speculation (bench/results/spec_decode_s13). The guard could not see
// it, since catch-ups run in steps that also hold a prefill.
//
// So a catch-up is an investment: the drafter catches a request up only when
//   behind x (measured catch-up seconds per token)  <  saving per token x expected tokens left.
// The saving per emitted token is what the guard measured in the bucket the request decodes in
// (SpeculationGuard::SavingPerToken), else what the plan predicts for a step in which every
// running request verifies a full draft, from the engine's measured acceptance (every draft is
// checked, verified or not) and the drafter's measured cost, which must then repay the catch-up
// kPredictionMargin times over. The tokens left are estimated from
// recently finished requests' output lengths (before any finished: as many as the request has
// emitted so far, so a new request waits). A request the drafter is no more than kCurrent tokens
// behind costs about one drafting forward and always drafts (a probe in an off bucket uses such
// requests). Before any draft was checked, nothing predicts the acceptance: one request at a time
// is caught up to measure it (learning with every request would pay every prompt's catch-up
// before knowing whether any of it is repaid).
#pragma once

#include <cstdint>
#include <optional>

namespace ember {

class DrafterCatchUp {
 public:
  // Tokens behind that count as current: the steps a switched-off bucket skips between two probes
  // (SpeculationGuard::kExplorePeriod) plus a draft's worth.
  static constexpr int64_t kCurrent = 32;
  // Checked drafts before the engine's acceptance predicts a saving.
  static constexpr int64_t kMinDraftsForAcceptance = 8;
  // A predicted saving must repay a catch-up this many times over. The step cost model is
  // measured at startup on short contexts and follows only the steps that run, so it
  // underestimates wide verify steps on a CPU (spec_guard.h): on the AMD EPYC VM it predicted
  // 3.2-3.9 ms saved per token at 4 requests where the realised steps saved ~1 and catching up
  // the last wave of requests on that prediction lost 6% (bench/results/spec_decode_s14).
  static constexpr double kPredictionMargin = 2.0;

  struct Candidate {
    int64_t behind = 0;       // tokens the drafter has not computed
    int64_t emitted = 0;      // output tokens so far
    int64_t room = 0;         // output tokens it may still emit (max_tokens, max_model_len)
    // Seconds saved per emitted token by speculating where the request decodes, measured or
    // predicted; nullopt while nothing predicts it.
    std::optional<double> saving_per_token;
    bool saving_predicted = false;  // from the plan's prediction, not the guard's measurement
    bool another_is_current = false;  // another running request keeps the drafter current
  };
  bool Pays(const Candidate& c) const;

  // A proposer call caught up `tokens` tokens (beyond current requests) in `seconds`.
  void ObserveCatchUp(int64_t tokens, double seconds);
  // A request finished after emitting `output_tokens` (stopped or at its length limit).
  void ObserveFinished(int64_t output_tokens);

  double seconds_per_token() const { return seconds_per_token_; }
  double mean_output_tokens() const { return mean_output_tokens_; }
  // The output tokens a request that has emitted `emitted` is expected to emit still, at most `room`.
  double ExpectedTokensLeft(int64_t emitted, int64_t room) const;

 private:
  double seconds_per_token_ = 0.0;  // moving average; 0 before the first catch-up was measured
  double mean_output_tokens_ = 0.0;  // moving average; 0 before a request finished
};

}  // namespace ember
