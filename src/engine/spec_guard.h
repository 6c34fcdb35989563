// The backstop of adaptive speculation: it switches speculation off wherever the tokens per
// second it realised are below what steps without it realised.
//
// PlanSpeculation predicts from a cost model and the measured acceptance, and a prediction can
// be wrong in ways no startup measurement sees: a verify step of R requests x (1 + k) tokens is
// not a single sequence of R (1 + k) tokens (attention over R contexts, the sampler and
// verification over R (1 + k) rows), other load on the host, contexts that grow. On a CPU the
// error has a sign that hurts: multi-row kernels share weight loads over only a few rows, so
// verify steps cost closer to linear in their tokens than the model believed, and a plan that
// looked 10% faster ran 5-25% slower at 4-16 concurrent requests.
//
// So the guard measures the outcome. Decisions are put in buckets by how many requests decode in
// them (1, 2-3, 4-7, ...: the batch size is what decides whether verification pays), and per
// bucket it compares the two modes it chooses between: decisions it allowed to speculate (the
// plan then verifies what it likes, possibly nothing) and decisions it kept plain. A mode is
// charged what it costs in a steady run of it: an allowed decision its step plus the drafting
// that made its drafts (done in the step before), a plain one its step without any drafting.
// Per side it keeps decayed sums of the decode-only steps' emitted tokens and seconds and of
// their squares, so each rate comes with a standard error, and the verdict follows the evidence:
//
// * Both sides' sums decay per decision of the bucket (a horizon of about kWindow decisions), not
//   per step of the side, so the rarely chosen side is weighed over the same stretch of time as
//   the other: the host's own speed drifts (a plain SmolLM2 server read 167 then 120 tok/s ten
//   seconds later on the EPYC VM), and a side measured over a longer stretch carried that drift
//   into the ratio.
// * A bucket commits to a verdict when speculating is faster or slower by kConfidence standard
//   errors, and goes back to learning (alternating decisions, both sides measured equally) when
//   the point estimate contradicts the verdict it holds: at once for on (the bar is never slower),
//   and for off once speculating looks faster by kReconsider standard errors. An off bucket's
//   speculating side has only its exploring pairs, so one slow plain step could lift the point
//   estimate over parity; at 16 requests such a flip alternated 16-decode steps, with
//   speculating ~12% slower, for 5 s of a 30 s server run (bench/results/dspark_s37). Where
//   speculating does pay, its pairs soon show it by more than that. With a fixed threshold on the ratio
//   (off below 1, back on above 1.05) and the last ~20 steps of a side, the 1-request bucket of
//   SmolLM2 + DSpark, where speculating was a few percent faster, switched every 0.1-1 s and was
//   off a third of the time (bench/results/dspark_s31): a speculating step emits 1 to 3 tokens,
//   so 20 of them measure a rate to about 7%. Near parity learning costs nothing (both modes are
//   as fast); far from it the standard errors are small and the verdict comes within a few steps
//   (a 25% loss at 16 requests: about kMinSteps per side).
//
// One decision in kExplorePeriod of a bucket that is on runs plain, and one that is off speculates
// in a pair every 2 kExplorePeriod (WarmsUp), so both rates stay current and a change is seen;
// where speculating was measured that much slower, the pairs grow rarer (OffPeriod), so exploring
// costs at most kExploreCost of the bucket's time. A bucket
// without measurements of its own starts from what its neighbours imply, since speculation pays
// less the more requests a step verifies: a bucket larger than one that is off starts off, one
// smaller than a bucket that is on starts on; only a bucket that neither implies alternates to
// learn (arrivals and completions move a server through many buckets, and learning each from
// scratch costs most where steps are fewest).
//
// A costly proposer (a draft model, DSpark) drafts only for decisions that may speculate, and
// where the plan itself has verified nothing for kMinSteps decisions, only for one probing
// decision per kExplorePeriod: drafts nobody verifies are pure cost (at 4 requests a SmolLM2
// drafter that was never verified made its target 0.4x as fast). The probe is a decision the guard
// allows, so the plan sees fresh drafts and their measured acceptance and can change its mind. The
// probes grow rarer the longer nothing is verified (to one in 16 kExplorePeriod).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace ember {

class SpeculationGuard {
 public:
  static constexpr int kBuckets = 8;             // decodes 1, 2-3, 4-7, ..., 128 and more
  static constexpr int64_t kMinSteps = 6;        // per side before a bucket's own verdict
  static constexpr int64_t kExplorePeriod = 16;  // one decision in this many takes the other side
  static constexpr double kWindow = 1024.0;      // decisions: each decays the sums by 1 - 1/kWindow
  static constexpr double kConfidence = 2.0;     // standard errors of the log rate ratio to commit
  static constexpr double kReconsider = 1.0;     // ... for an off bucket to learn again
  static constexpr int64_t kMaxProbeDoublings = 4;  // probes of a costly proposer: at least 1 in 256
  // A bucket that is off explores (a speculating pair) once in 2 kExplorePeriod decisions, or
  // rarer, down to once in 2 kExplorePeriod << kMaxExploreDoublings, where speculating was
  // measured so much slower that the pairs would cost more than kExploreCost of the bucket's time.
  static constexpr double kExploreCost = 0.005;
  static constexpr int64_t kMaxExploreDoublings = 3;

  // `max_explore_doublings`: 0 for a proposer that catches up on the tokens it skipped (a draft
  // model): DrafterCatchUp::kCurrent counts a pair 2 kExplorePeriod decisions apart as current,
  // and one further behind would have to repay its catch-up, which an off bucket's saving of 0
  // never does, so its pairs would speculate without drafts.
  explicit SpeculationGuard(int64_t max_explore_doublings = kMaxExploreDoublings)
      : max_explore_doublings_(max_explore_doublings) {}

  // May a step with `num_decodes` decoding requests speculate? Counts the decision.
  bool Allow(int64_t num_decodes);
  // Should the requests of such a step draft for the next one? False in a bucket that is off,
  // except before the step that will explore it.
  // `costly`: the proposer's time is a noticeable part of a step (not a lookup): then only for a
  // decision the guard allows, and while plans verify nothing only for a probe (see above).
  bool WantsDrafts(int64_t num_decodes, bool costly = false) const;
  // A costly proposer's drafts in the bucket of `num_decodes` are only probes: its plans have
  // verified nothing for kMinSteps decisions (WantsDrafts answers for one decision in a period).
  bool Probing(int64_t num_decodes) const { return buckets_[BucketOf(num_decodes)].unverified >= kMinSteps; }
  // The plan for a step of `num_decodes` decodes verified drafts (or not); `allowed`: what Allow
  // answered for it. A decision the guard kept plain could not verify anything and counts for
  // nothing: counted, a learning bucket's alternation alone made it "probing" within a few steps
  // (SmolLM2 + DSpark at 1 request on a fresh server: 47 verifying steps in 2,996), and an off
  // bucket was probing by every exploring pair, so the pair's first decision drafted nothing and
  // the second paid the drafter's whole catch-up.
  void Planned(int64_t num_decodes, bool verified, bool allowed = true);
  // A step in which only decodes ran (no prefill) finished: `emitted` tokens in `seconds`.
  // `allowed`: what Allow answered for its decision. The caller charges an allowed decision the
  // drafting that made its drafts and a plain one no drafting (see above).
  void Record(int64_t num_decodes, bool allowed, int64_t emitted, double seconds);

  // Speculating tokens/s over plain tokens/s in the bucket of `num_decodes`, 0 before both sides
  // have kMinSteps.
  double Ratio(int64_t num_decodes) const;
  // How many standard errors speculating is faster (> 0) or slower (< 0) in the bucket of
  // `num_decodes`; 0 before both sides have kMinSteps, +-infinity for noiseless measurements.
  double Evidence(int64_t num_decodes) const;
  // Speculation is off in the bucket of `num_decodes`: its own verdict, or one its neighbours imply.
  bool off(int64_t num_decodes) const;
  // Speculation is on there (its own verdict or an implied one): not off, and not learning.
  bool on(int64_t num_decodes) const;
  // Seconds that speculating saved per emitted token in the bucket of `num_decodes`
  // (1/plain rate - 1/speculating rate): 0 where speculation is off (by its own verdict or an
  // implied one). A bucket without a verdict of its own takes the saving of the nearest larger
  // bucket that has one, where speculation paid (a lower bound); else nullopt (learning).
  std::optional<double> SavingPerToken(int64_t num_decodes) const;
  // "2-3 decodes" for logs.
  static std::string BucketName(int64_t num_decodes);

 private:
  // One mode's decode-only steps: sums weighted by kDecay^age (age in decisions of the bucket),
  // and the squared-weight sums the rate's standard error needs.
  struct Side {
    double weight = 0.0, emitted = 0.0, seconds = 0.0;
    double weight_sq = 0.0, emitted_sq = 0.0, emitted_seconds = 0.0, seconds_sq = 0.0;
    int64_t steps = 0;
    double Rate() const { return seconds > 0.0 ? emitted / seconds : 0.0; }
    // The variance of log Rate() (the ratio estimator's, by the delta method).
    double LogRateVariance() const;
    void Decay(double factor);
    void Add(double step_emitted, double step_seconds);
  };
  enum class Verdict { kLearning, kOn, kOff };
  struct Bucket {
    Side plain, spec;
    Side warm_up;  // the unmeasured first decisions of an off bucket's pairs: priced, never judged
    int64_t decisions = 0;
    int64_t unverified = 0;  // consecutive plans that verified nothing (of decisions it allowed)
    int64_t silent_from = 0;  // the decision at which unverified reached kMinSteps (probing began)
    Verdict verdict = Verdict::kLearning;  // its own, once it HasData
    bool warming_up = false;  // the last decision was the unmeasured first of an off bucket's pair
  };
  static constexpr double kDecay = 1.0 - 1.0 / kWindow;
  static int BucketOf(int64_t num_decodes);
  static bool HasData(const Bucket& b);
  static double RatioOf(const Bucket& b);
  static double EvidenceOf(const Bucket& b);
  // The verdict the evidence `z` moves a bucket holding `verdict` to.
  static Verdict Next(Verdict verdict, double z);
  static const char* Name(Verdict v);
  // A committed bucket's decision that takes the other side: one in kExplorePeriod where it is on.
  static bool Explores(int64_t decision) { return decision % kExplorePeriod == kExplorePeriod - 1; }
  // Where a bucket is off, the last two of every 2 kExplorePeriod decisions speculate, and only the
  // second is measured: the first one's drafting catches the drafter up on the rows of every token
  // since it last drafted (DSpark projects them: ~2.1M multiply-adds a token for SmolLM2's
  // drafter, so 16-32 rows cost a few percent of a step), which a steady run of speculation never
  // pays. Charged to the measured side, it kept the SmolLM2 1-request bucket off where
  // speculating paid.
  //
  // The pairs come once per OffPeriod decisions: 2 kExplorePeriod, doubled (at most
  // kMaxExploreDoublings times) while the pair's extra time (PairExtraSteps) is over
  // kExploreCost of the period. At 16 requests a SmolLM2 + DSpark server's speculating
  // steps of the 16-31 bucket ran 17% slower than plain ones, and its pairs every 32 decisions
  // cost ~1.3% of its time; over all buckets, its measured speculating steps took 1.64% of the
  // decode-only time beyond their plain rates, 0.33% with OffPeriod (bench/results/dspark_s36:
  // one debug run each, so a rough before and after). Rarer pairs also mean fewer measurements
  // of the speculating side: its decayed sums then span fewer steps, so its standard error grows
  // and a verdict needs a larger difference to hold; three doublings keep ~4 measured pairs in
  // kWindow decisions (decayed weights worth ~8 steps with the older ones), and a bucket that is
  // off sees a change within 256 decisions (3 s at 16 requests of SmolLM2).
  int64_t OffPeriod(const Bucket& b) const;
  // What an off bucket's exploring pair costs beyond plain decoding, in plain steps: each of its
  // two steps' time beyond what plain steps take for the tokens it emitted. The measured second
  // step as the speculating side's average; the unmeasured first as the warm-up steps' average,
  // where there are some: it also pays the drafter's catch-up (at 16 requests 28 ms against an
  // 11 ms plain step in bench/results/dspark_s37, while the measured step ran 19 ms for its 21
  // tokens), which pricing both steps as the measured one left out. 0 before the bucket has data.
  static double PairExtraSteps(const Bucket& b);
  static bool WarmsUp(int64_t decision, int64_t period) { return decision % period == period - 2; }
  static bool ExploresOff(int64_t decision, int64_t period) {
    return WarmsUp(decision, period) || WarmsUp(decision - 1, period);
  }
  // The bucket's own verdict once both sides have kMinSteps; before that one a neighbour implies,
  // else kLearning.
  Verdict VerdictOf(int bucket) const;
  // What Allow answers for the bucket's decision number `decision`.
  bool WouldAllow(int bucket, int64_t decision) const;

  std::array<Bucket, kBuckets> buckets_{};
  int64_t max_explore_doublings_;
};

}  // namespace ember
