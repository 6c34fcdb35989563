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
// So the guard measures the outcome. Steps are put in buckets by how many requests decode in
// them (1, 2-3, 4-7, ...: the batch size is what decides whether verification pays), and per
// bucket it keeps decayed sums of emitted tokens and seconds of the decode-only steps that
// speculated and of those that did not. Once both have kMinSteps, a bucket whose speculating
// rate is below the plain one is switched off, and back on only when clearly faster
// (kHysteresis), so noise near parity does not flap it. One decision in kExplorePeriod takes the
// other side, so each rate stays current and a bucket whose verdict has changed (longer
// contexts, a quieter host) flips back. A bucket without a verdict of its own starts from what its
// neighbours imply, since speculation pays less the more requests a step verifies: a bucket
// larger than one where it lost starts off, one smaller than a bucket where it paid starts on;
// only a bucket that neither implies alternates to learn (arrivals and completions move a server
// through many buckets, and learning each from scratch costs most where steps are fewest). Exploring costs at most 1/kExplorePeriod of the gap it
// measures: 1.6% of a bucket where speculation is 25% slower.
//
// The plain side is charged without the proposer's time (a switched-off bucket stops drafting:
// WantsDrafts), so the comparison is against no speculation at all, the bar. A costly
// proposer (a draft model) drafts only for decisions that may speculate, and where the plan
// itself has verified nothing for kMinSteps decisions, only for one probing decision per
// kExplorePeriod: drafts nobody verifies are pure cost (at 4 requests a SmolLM2 drafter that was
// never verified made its target 0.4x as fast). The probe is a decision the guard allows, so the
// plan sees fresh drafts and their measured acceptance and can change its mind. The probes grow
// rarer the longer nothing is verified (to one in 16 kExplorePeriod).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace ember {

class SpeculationGuard {
 public:
  static constexpr int kBuckets = 8;             // decodes 1, 2-3, 4-7, ..., 128 and more
  static constexpr int64_t kMinSteps = 6;        // per side before a verdict
  static constexpr int64_t kExplorePeriod = 16;  // one decision in this many takes the other side
  static constexpr double kDecay = 0.95;         // per recorded step: about the last 20 count
  static constexpr double kHysteresis = 1.05;    // an off bucket comes back above this ratio (kMinGain)
  static constexpr int64_t kMaxProbeDoublings = 4;  // probes of a costly proposer: at least 1 in 256

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
  // answered for it. A decision a learning bucket kept plain by its alternation could not verify
  // anything and counts for nothing: counted, the alternation alone made a bucket "probing" within
  // a few steps (SmolLM2 + DSpark at 1 request on a fresh server: 47 verifying steps in 2,996).
  void Planned(int64_t num_decodes, bool verified, bool allowed = true);
  // A step in which only decodes ran (no prefill) finished: `emitted` tokens in `seconds`
  // (the proposer's time left out by the caller for a step that did not speculate).
  void Record(int64_t num_decodes, bool speculated, int64_t emitted, double seconds);

  // Speculating tokens/s over plain tokens/s in the bucket of `num_decodes`, 0 before both sides
  // have kMinSteps.
  double Ratio(int64_t num_decodes) const;
  // Speculation is off in the bucket of `num_decodes`: its own verdict, or one its neighbours imply.
  bool off(int64_t num_decodes) const;
  // Seconds that speculating saved per emitted token in the bucket of `num_decodes`
  // (1/plain rate - 1/speculating rate): 0 where speculation is off (by its own verdict or an
  // implied one). A bucket without a verdict of its own takes the saving of the nearest larger
  // bucket that has one, where speculation paid (a lower bound); else nullopt (learning).
  std::optional<double> SavingPerToken(int64_t num_decodes) const;
  // "2-3 decodes" for logs.
  static std::string BucketName(int64_t num_decodes);

 private:
  struct Side {
    double emitted = 0.0, seconds = 0.0;  // decayed sums
    int64_t steps = 0;
    double Rate() const { return seconds > 0.0 ? emitted / seconds : 0.0; }
  };
  struct Bucket {
    Side plain, spec;
    int64_t decisions = 0;
    int64_t unverified = 0;  // consecutive plans that verified nothing
    bool off = false;
  };
  enum class Verdict { kLearning, kOn, kOff };
  static int BucketOf(int64_t num_decodes);
  static bool Learning(const Bucket& b);
  static double RatioOf(const Bucket& b);
  static bool Explores(int64_t decision) { return decision % kExplorePeriod == kExplorePeriod - 1; }
  // The bucket's own verdict once both sides have kMinSteps; before that one a neighbour implies,
  // else kLearning.
  Verdict VerdictOf(int bucket) const;
  // What Allow answers for the bucket's decision number `decision`.
  bool WouldAllow(int bucket, int64_t decision) const;

  std::array<Bucket, kBuckets> buckets_{};
};

}  // namespace ember
