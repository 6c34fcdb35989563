// The guard that switches speculation off where it realised fewer tokens per second than plain
// decoding: its verdicts on synthetic step times, and the scheduler obeying it.
#include "engine/spec_guard.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine_harness.h"
#include "engine/scheduler.h"

namespace ember {
namespace {

// Feeds the guard `steps` decisions for a bucket, each step taking `plain_rate` or `spec_rate`
// tokens/s according to the guard's own decision; returns how many decisions allowed speculation.
int64_t RunSteps(SpeculationGuard& guard, int64_t decodes, int64_t steps, double plain_rate, double spec_rate) {
  int64_t allowed = 0;
  for (int64_t s = 0; s < steps; ++s) {
    const bool spec = guard.Allow(decodes);
    allowed += spec;
    const int64_t emitted = spec ? 3 * decodes : decodes;
    guard.Record(decodes, spec, emitted, static_cast<double>(emitted) / (spec ? spec_rate : plain_rate));
  }
  return allowed;
}

TEST(SpeculationGuard, AlternatesWhileLearningThenKeepsSpeculationThatPays) {
  SpeculationGuard guard;
  for (int s = 0; s < 2 * SpeculationGuard::kMinSteps; ++s) {
    EXPECT_EQ(guard.Allow(4), s % 2 == 0) << "decision " << s;
    guard.Record(4, s % 2 == 0, s % 2 == 0 ? 12 : 4, s % 2 == 0 ? 12 / 150.0 : 4 / 100.0);
  }
  EXPECT_NEAR(guard.Ratio(4), 1.5, 1e-9);
  EXPECT_FALSE(guard.off(4));
  // On: every decision speculates except one in kExplorePeriod, which measures plain decoding.
  const int64_t n = 10 * SpeculationGuard::kExplorePeriod;
  EXPECT_EQ(RunSteps(guard, 4, n, 100, 150), n - 10);
  EXPECT_TRUE(guard.WantsDrafts(4));
}

// Off: two decisions in 2 kExplorePeriod still speculate (a pair, the first unmeasured), and
// drafts are wanted only before them; where speculating was measured much slower the pairs come
// rarer, so that exploring costs at most kExploreCost of the bucket's time (unless the proposer
// catches up on skipped tokens, which keeps the period). Returns the decisions allowed of `n`.
int64_t OffDecisionsAllowed(SpeculationGuard& guard, double spec_rate, int64_t n) {
  RunSteps(guard, 16, 2 * SpeculationGuard::kMinSteps, 100, spec_rate);
  EXPECT_TRUE(guard.off(16));
  EXPECT_NEAR(guard.Ratio(16), spec_rate / 100, 1e-9);
  int64_t allowed = 0, drafting = 0;
  for (int64_t s = 0; s < n; ++s) {
    drafting += guard.WantsDrafts(16);
    const bool spec = guard.Allow(16);
    allowed += spec;
    guard.Record(16, spec, spec ? 30 : 16, spec ? 30 / spec_rate : 16 / 100.0);
  }
  EXPECT_EQ(drafting, allowed);
  EXPECT_TRUE(guard.off(16));
  return allowed;
}

TEST(SpeculationGuard, SwitchesOffWhereSpeculationIsSlowerAndStopsDrafting) {
  const int64_t period = 2 * SpeculationGuard::kExplorePeriod;
  const int64_t n = 40 * period;
  {
    // 2% slower: a pair's two steps, 30-48 tokens each where a plain step emits 16, cost
    // 0.08-0.12 plain steps beyond plain decoding, under 0.5% of 32 decisions: a pair every 32.
    SpeculationGuard guard;
    EXPECT_EQ(OffDecisionsAllowed(guard, 98, n), 2 * n / period);
  }
  {
    // 20% slower: a pair costs ~1 plain step (30 tokens at 0.8x take 0.47 steps beyond plain
    // decoding); every 32 decisions that is 3% of them, every 256 (the most kMaxExploreDoublings
    // allow) 0.4%.
    SpeculationGuard guard;
    const int64_t allowed = OffDecisionsAllowed(guard, 80, n);
    EXPECT_EQ(allowed, 2 * n / (8 * period));
    const double pair_steps = 2 * (30 / 80.0 - 30 / 100.0) / (16 / 100.0);
    EXPECT_LE(allowed / 2 * pair_steps, SpeculationGuard::kExploreCost * static_cast<double>(n));
  }
  {
    // A proposer that catches up (a draft model) keeps a pair every 32.
    SpeculationGuard guard(/*max_explore_doublings=*/0);
    EXPECT_EQ(OffDecisionsAllowed(guard, 80, n), 2 * n / period);
  }
}

TEST(SpeculationGuard, BucketsAreSeparateAndAVerdictCanChange) {
  SpeculationGuard guard;
  RunSteps(guard, 1, 2 * SpeculationGuard::kMinSteps, 100, 140);   // 1 decode: pays
  RunSteps(guard, 20, 2 * SpeculationGuard::kMinSteps, 100, 70);   // 16-31 decodes: loses
  EXPECT_FALSE(guard.off(1));
  EXPECT_TRUE(guard.off(20));
  EXPECT_TRUE(guard.off(31));
  EXPECT_EQ(guard.Ratio(32), 0.0) << "32-63 decodes is another bucket, without a verdict of its own";
  EXPECT_TRUE(guard.off(32)) << "larger than a bucket where speculation lost: off until it learns otherwise";
  EXPECT_FALSE(guard.off(8)) << "between a bucket where it paid and one where it lost: learning";
  // The host got quieter for verify steps: exploration sees it and the bucket comes back on.
  RunSteps(guard, 20, 60 * SpeculationGuard::kExplorePeriod, 100, 130);
  EXPECT_FALSE(guard.off(20));
  // Slower again: once the decayed sums hold mostly the new steps, off again.
  RunSteps(guard, 20, 4 * static_cast<int64_t>(SpeculationGuard::kWindow), 100, 95);
  EXPECT_TRUE(guard.off(20));
  EXPECT_LT(guard.Evidence(20), -SpeculationGuard::kConfidence);
}

// Decisions of one bucket with noisy steps (a fixed seed): a plain step of `decodes` requests
// emits one token each in `plain` seconds; a speculating one also each request's one draft token,
// accepted with probability `accept`, in `spec` seconds. Every step's time varies by +-10%
// (uniform) and is multiplied by `host(decision)`, the host's own slowness. Returns the share of
// the decisions from `from` on that the guard allowed.
double AllowedShare(SpeculationGuard& guard, int64_t decodes, int64_t decisions, int64_t from, double plain,
                    double spec, double accept, const std::function<double(int64_t)>& host) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> jitter(0.9, 1.1);
  std::bernoulli_distribution accepted(accept);
  int64_t allowed = 0;
  for (int64_t d = 0; d < decisions; ++d) {
    const bool spec_step = guard.Allow(decodes);
    int64_t emitted = decodes;
    if (spec_step) {
      for (int64_t r = 0; r < decodes; ++r) emitted += accepted(rng);
    }
    guard.Record(decodes, spec_step, emitted, (spec_step ? spec : plain) * jitter(rng) * host(d));
    if (d >= from) allowed += spec_step;
  }
  return static_cast<double>(allowed) / static_cast<double>(decisions - from);
}
double SteadyHost(int64_t) { return 1.0; }

// SmolLM2 with its DSpark drafter at 1 request on the EPYC VM, roughly: a plain step 5.3 ms; a
// speculating one 7.8 ms with its drafting, emitting 1.54 tokens on average (1.047x). A
// speculating step emits 1 or 2 tokens, so a rate over a few dozen of them is only known to ~7%:
// judged on the last ~20 steps of each side against a fixed threshold, the guard switched every
// 0.1-1 s and speculated in only 0.6 of the decisions (0.9375 when on). Judged by the standard
// error over a window of decisions, it stays on.
TEST(SpeculationGuard, ASmallGainInNoisyStepsStaysOn) {
  SpeculationGuard guard;
  const double share = AllowedShare(guard, 1, 20000, 4000, 5.3e-3, 7.8e-3, 0.54, SteadyHost);
  EXPECT_GT(share, 0.88);
  EXPECT_FALSE(guard.off(1));
}

// A small loss (0.95x) while the host itself slows down to half its speed over the run: the
// guard still finds it and keeps speculation off but for its explorations (the drift widens the
// standard errors; both sides are weighed over the same decisions, so it does not bias them).
TEST(SpeculationGuard, ASmallLossStaysOffWhileTheHostDrifts) {
  SpeculationGuard guard;
  const int64_t n = 20000;
  const double share = AllowedShare(guard, 1, n, 4000, 5.3e-3, 8.6e-3, 0.54, [n](int64_t d) {
    return 1.0 + static_cast<double>(d) / static_cast<double>(n);
  });
  EXPECT_LT(share, 0.15);
  EXPECT_TRUE(guard.off(1));
}

// A bucket that is off goes back to learning (half its decisions speculating) only when its
// exploring pairs bring evidence for speculation, not on a point estimate that merely crosses
// parity. At 16 requests a SmolLM2 + DSpark server's speculating steps ran ~12% slower; soon
// after its first verdict, with few pairs measured, one slow plain step put the estimate over
// parity, and the bucket alternated for 5 s of a 30 s run (bench/results/dspark_s37).
// Decisions of a 16-decode bucket where speculating realises 0.9x the plain rate, every step
// within +-10% and with a 5% chance of taking twice as long (the host); returns how many of the
// `n` decisions after its first verdict of off it spent learning.
int64_t LearningAfterFirstOff(uint64_t seed, int64_t n) {
  SpeculationGuard guard;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> jitter(0.9, 1.1);
  std::bernoulli_distribution outlier(0.05), accepted(0.8);
  const int64_t decodes = 16;
  const double plain_rate = decodes / 11e-3;
  int64_t learning = 0, from = -1;
  for (int64_t d = 0; from < 0 || d < from + n; ++d) {
    const bool spec_step = guard.Allow(decodes);
    int64_t emitted = decodes;
    if (spec_step) {
      for (int64_t r = 0; r < decodes; ++r) emitted += accepted(rng);
    }
    const double seconds = static_cast<double>(emitted) / (plain_rate * (spec_step ? 0.9 : 1.0));
    guard.Record(decodes, spec_step, emitted, seconds * jitter(rng) * (outlier(rng) ? 2.0 : 1.0));
    if (from < 0 && guard.off(decodes)) from = d;
    if (from >= 0) learning += !guard.off(decodes);
  }
  return learning;
}

TEST(SpeculationGuard, ASmallLossWithOutliersStaysOff) {
  // 40 servers' first 1,000 decisions after their first verdict. Going back to learning whenever
  // the point estimate crossed parity, 11 of them did, for 1,146 decisions in all (26-261 each).
  int64_t learning = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) learning += LearningAfterFirstOff(seed, 1000);
  EXPECT_LT(learning, 40 * 1000 / 100);
}

// A drafter that keeps its context lazily (DSpark) catches up, when it drafts, on every token
// since it last drafted, so the first speculating decision after a plain stretch costs more than
// a steady run of speculation does. Here speculation pays 1.05x steadily and each token caught up
// costs 3% of a plain step (SmolLM2's drafter projects a token for ~1.5% of its target's work;
// the shares of a step differ more on a CPU). A slow start (0.7x for the first 300 decisions: a
// fresh server's first drafts) switches the bucket off; its explorations then must not be charged
// the catch-up of the plain decisions between them (16 tokens: +0.48 of a step, which looks like
// 0.8x), or it never comes back on.
TEST(SpeculationGuard, AnOffBucketsExplorationsAreNotChargedTheDraftersCatchUp) {
  SpeculationGuard guard;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> jitter(0.9, 1.1);
  std::bernoulli_distribution accepted(0.54);
  const double plain = 5.3e-3, spec = 1.54 * plain / 1.05, per_token = 0.03 * plain;
  int64_t since_drafted = 0, allowed = 0;
  bool was_off = false;
  const int64_t decisions = 30000, from = 15000;
  for (int64_t d = 0; d < decisions; ++d) {
    const bool spec_step = guard.Allow(1);
    double seconds = plain;
    int64_t emitted = 1;
    if (spec_step) {
      emitted += accepted(rng);
      seconds = (d < 300 ? 1.5 : 1.0) * spec + per_token * static_cast<double>(since_drafted);
      since_drafted = 0;
    } else {
      ++since_drafted;
    }
    guard.Record(1, spec_step, emitted, seconds * jitter(rng));
    was_off |= guard.off(1);
    if (d >= from) allowed += spec_step;
  }
  EXPECT_TRUE(was_off) << "the slow start switched it off";
  EXPECT_GT(static_cast<double>(allowed) / static_cast<double>(decisions - from), 0.8);
  EXPECT_FALSE(guard.off(1));
}

// A large loss (16 requests, speculation 0.81x) is off within a few steps of each side despite
// the noise, and stays off but for the exploring decisions.
TEST(SpeculationGuard, ALargeLossIsOffWithinAFewSteps) {
  SpeculationGuard guard;
  AllowedShare(guard, 16, 4 * SpeculationGuard::kMinSteps, 0, 20e-3, 32e-3, 0.3, SteadyHost);
  EXPECT_TRUE(guard.off(16));
  EXPECT_LT(AllowedShare(guard, 16, 2000, 0, 20e-3, 32e-3, 0.3, SteadyHost), 0.08);
}

// A costly proposer (a draft model) drafts only for decisions that may speculate (a draft no
// decision verifies is pure cost), and where the plan has verified nothing for kMinSteps
// decisions only for one probe per kExplorePeriod, which the guard lets speculate so the plan
// sees fresh drafts; a lookup keeps drafting; a verified plan resumes.
TEST(SpeculationGuard, CostlyDraftsOnlyForDecisionsThatMaySpeculate) {
  for (const bool off : {false, true}) {
    SCOPED_TRACE(off ? "bucket off" : "bucket on");
    SpeculationGuard guard;
    RunSteps(guard, 4, 2 * SpeculationGuard::kMinSteps, 100, off ? 99 : 150);  // off: pairs every 32
    ASSERT_EQ(guard.off(4), off);
    int64_t wasted = 0, probes = 0, cheap = 0;
    const int64_t n = 4 * SpeculationGuard::kExplorePeriod;
    for (int64_t s = 0; s < n; ++s) {
      const bool costly = guard.WantsDrafts(4, /*costly=*/true);
      cheap += guard.WantsDrafts(4, /*costly=*/false);
      const bool allowed = guard.Allow(4);
      wasted += costly && !allowed;
      if (s >= SpeculationGuard::kMinSteps) probes += costly;
      guard.Planned(4, false);
    }
    EXPECT_EQ(wasted, 0) << "drafted for decisions that could not speculate";
    // Decisions 18..75 of the bucket hold three whole periods' probes; an off bucket explores
    // only every other period (its exploring pairs), so two of them are decisions it may speculate.
    EXPECT_EQ(probes, off ? 2 : 3);
    EXPECT_EQ(cheap, off ? 4 : n) << "a lookup drafts whenever a decision may use it";
    guard.Planned(4, true);
    if (!off) {
      EXPECT_TRUE(guard.WantsDrafts(4, true));
    }
  }
}

// Probes back off while the plans keep verifying nothing: after a long silence one probe period
// is 16 times kExplorePeriod; a verified plan brings drafting back at once.
TEST(SpeculationGuard, ProbesGrowRareWhileNothingIsVerified) {
  SpeculationGuard guard;
  RunSteps(guard, 4, 2 * SpeculationGuard::kMinSteps, 100, 150);
  ASSERT_FALSE(guard.off(4));
  const int64_t longest = SpeculationGuard::kExplorePeriod << SpeculationGuard::kMaxProbeDoublings;
  int64_t early = 0, late = 0;
  for (int64_t s = 0; s < 2000 + 2 * longest; ++s) {
    const bool probe = guard.WantsDrafts(4, /*costly=*/true);
    guard.Allow(4);
    if (s >= 100 && s < 100 + longest) early += probe;
    if (s >= 2000) late += probe;
    guard.Planned(4, false);
  }
  EXPECT_GE(early, 3) << "soon after the silence began, probes still come often";
  EXPECT_LE(late, 4) << "two probes per " << longest << " decisions at most";
  EXPECT_GE(late, 2);
  guard.Planned(4, true);
  EXPECT_TRUE(guard.WantsDrafts(4, true));
}

// A bucket whose plans verify nothing never measures a speculating step, so it stays learning,
// where every other decision may speculate: a probe must still be one drafting decision per
// period, not the exploring decision and the one before it (before: two, each a drafting step
// for every probed request).
TEST(SpeculationGuard, ABucketThatNeverVerifiedProbesOncePerPeriod) {
  SpeculationGuard guard;
  int64_t drafting = 0, allowed_drafts = 0;
  const int64_t periods = 3;
  int64_t s = 0;
  for (; !guard.Probing(4); ++s) {  // learning: every allowed decision drafts
    ASSERT_LT(s, 100);
    guard.Planned(4, false, guard.Allow(4));
  }
  ASSERT_FALSE(guard.off(4)) << "no verdict: nothing speculated";
  const int64_t first = ((s / SpeculationGuard::kExplorePeriod) + 1) * SpeculationGuard::kExplorePeriod;
  for (; s < first + periods * SpeculationGuard::kExplorePeriod; ++s) {
    const bool drafts = guard.WantsDrafts(4, /*costly=*/true);
    const bool allowed = guard.Allow(4);
    if (s >= first) {
      drafting += drafts;
      allowed_drafts += drafts && allowed;
    }
    guard.Planned(4, false, allowed);
  }
  EXPECT_EQ(drafting, periods) << "probing decisions in " << periods << " periods";
  EXPECT_EQ(allowed_drafts, drafting) << "a probe is a decision that may speculate";
}

// A bucket without a verdict starts from what its neighbours imply: larger than a bucket where
// speculation lost, it starts off; smaller than one where it paid, on; between the two, or with
// nothing to go by, it alternates. Its own verdict, once it has one, wins.
TEST(SpeculationGuard, AnUnseenBucketStartsFromWhatItsNeighboursImply) {
  const int64_t period = SpeculationGuard::kExplorePeriod;
  SpeculationGuard guard;
  RunSteps(guard, 1, 2 * SpeculationGuard::kMinSteps, 100, 150);  // 1 decode: pays
  RunSteps(guard, 8, 2 * SpeculationGuard::kMinSteps, 100, 70);   // 8-15 decodes: loses
  EXPECT_EQ(RunSteps(guard, 32, 2 * period, 100, 70), 2) << "off from its first decision: only the exploring pair";
  EXPECT_EQ(RunSteps(guard, 4, 2, 100, 100), 1) << "between 1 (on) and 8-15 (off): alternates";
  SpeculationGuard other;
  RunSteps(other, 16, 2 * SpeculationGuard::kMinSteps, 100, 150);  // 16-31 decodes: pays
  EXPECT_EQ(RunSteps(other, 2, period, 100, 150), period - 1) << "on from its first decision";
  // Its own measurements overrule the implied verdict: at 2-3 decodes speculation loses after all
  // (kMinSteps of each side take 6 explorations, 6 periods).
  RunSteps(other, 2, 8 * period, 100, 60);
  EXPECT_TRUE(other.off(2));
  EXPECT_FALSE(other.off(16));
  EXPECT_TRUE(other.off(32)) << "and now 32-63, larger than 2-3, is implied off too";
}

// While learning, a costly proposer drafts for the alternate decisions that may speculate.
TEST(SpeculationGuard, CostlyDraftsWhileLearning) {
  SpeculationGuard guard;
  int64_t costly = 0;
  for (int64_t s = 0; s < SpeculationGuard::kMinSteps; ++s) {
    costly += guard.WantsDrafts(4, /*costly=*/true);
    EXPECT_EQ(guard.Allow(4), s % 2 == 0);
    guard.Planned(4, true);
  }
  EXPECT_EQ(costly, SpeculationGuard::kMinSteps / 2);
}

// While learning, half the decisions are plain by the guard's own alternation: those could not
// verify anything and are not the plans' silence. Here one allowed plan in four verifies (a
// drafter whose confident drafts come now and then); counting the plain decisions between them,
// seven decisions in a row verified nothing, and the bucket went probing: on a fresh server at
// 1 request the SmolLM2 drafter then verified in 47 of 2,996 steps, after the fix in 1,112 of 1,965.
TEST(SpeculationGuard, LearningAlternationIsNotSilence) {
  SpeculationGuard guard;
  int64_t allowed_decisions = 0;
  for (int64_t s = 0; s < 64; ++s) {
    const bool allowed = guard.Allow(1);
    const bool verified = allowed && allowed_decisions++ % 4 == 3;
    guard.Planned(1, verified, allowed);
    ASSERT_FALSE(guard.Probing(1)) << "decision " << s;
  }
  for (int64_t silent = 0; silent < SpeculationGuard::kMinSteps;) {
    const bool allowed = guard.Allow(1);
    guard.Planned(1, false, allowed);
    silent += allowed;
  }
  EXPECT_TRUE(guard.Probing(1)) << "allowed decisions that verify nothing still count";
}

// In an off bucket the plain decisions between its exploring pairs are the guard's choice, not
// plans that verified nothing: while the pairs' plans verify, a costly proposer drafts for both
// decisions of each pair (the first catches the drafter up, the second is measured), never for
// the others. Counted as silence, they made every pair a probe, which drafts for its second
// decision only.
TEST(SpeculationGuard, AnOffBucketsPlainDecisionsAreNotSilence) {
  SpeculationGuard guard;
  RunSteps(guard, 1, 2 * SpeculationGuard::kMinSteps, 100, 99);  // off, near parity: pairs every 32
  ASSERT_TRUE(guard.off(1));
  int64_t allowed_decisions = 0, drafted_for_allowed = 0, drafted_for_plain = 0;
  for (int64_t s = 0; s < 8 * SpeculationGuard::kExplorePeriod; ++s) {
    const bool drafts = guard.WantsDrafts(1, /*costly=*/true);
    const bool allowed = guard.Allow(1);
    allowed_decisions += allowed;
    drafted_for_allowed += drafts && allowed;
    drafted_for_plain += drafts && !allowed;
    guard.Planned(1, /*verified=*/allowed, allowed);
    ASSERT_FALSE(guard.Probing(1)) << "decision " << s;
  }
  EXPECT_EQ(allowed_decisions, 8);
  EXPECT_EQ(drafted_for_allowed, 8);
  EXPECT_EQ(drafted_for_plain, 0);
}

TEST(SpeculationGuard, SavingPerTokenIsTheBucketsOwnOrALargerBucketsLowerBound) {
  SpeculationGuard guard;
  EXPECT_FALSE(guard.SavingPerToken(4).has_value());  // nothing measured: learning
  RunSteps(guard, 4, 60, 100.0, 150.0);
  ASSERT_TRUE(guard.SavingPerToken(4).has_value());
  EXPECT_NEAR(*guard.SavingPerToken(4), 1.0 / 100.0 - 1.0 / 150.0, 1e-9);
  // Fewer requests save at least as much per token as 4-7 did.
  ASSERT_TRUE(guard.SavingPerToken(1).has_value());
  EXPECT_NEAR(*guard.SavingPerToken(1), 1.0 / 100.0 - 1.0 / 150.0, 1e-9);
  EXPECT_FALSE(guard.SavingPerToken(16).has_value());  // more requests: no bound, learn there
  RunSteps(guard, 16, 60, 100.0, 80.0);
  EXPECT_EQ(guard.SavingPerToken(16), 0.0);  // off: nothing to save
  EXPECT_EQ(guard.SavingPerToken(64), 0.0);  // off by implication
  EXPECT_NEAR(*guard.SavingPerToken(4), 1.0 / 100.0 - 1.0 / 150.0, 1e-9);  // unchanged
}

TEST(SpeculationGuard, IgnoresEmptyStepsAndNamesBuckets) {
  SpeculationGuard guard;
  guard.Record(4, true, 0, 1.0);
  guard.Record(4, false, 4, 0.0);
  guard.Record(0, false, 4, 1.0);
  EXPECT_EQ(guard.Ratio(4), 0.0);
  EXPECT_EQ(SpeculationGuard::BucketName(1), "1 decode");
  EXPECT_EQ(SpeculationGuard::BucketName(5), "4-7 decodes");
  EXPECT_EQ(SpeculationGuard::BucketName(1000), "128+ decodes");
}

// The scheduler over a FakeExecutor with adaptive speculation: `num_requests` requests of
// `prompt_len` prompt tokens and `max_tokens` outputs, drafts that go wrong where `wrong` says,
// each step's measured seconds set by `time`. Returns the share of the steps `counted` picks that
// speculated.
using StepTimer = std::function<void(const SchedulerOutput&, int step, ModelRunnerOutput&)>;
using StepFilter = std::function<bool(const SchedulerOutput&, int step)>;
double SpeculatingShare(const SchedulerConfig& c, int num_requests, int prompt_len, int max_tokens,
                        test::FakeExecutor::WrongFn wrong, const StepTimer& time, const StepFilter& counted,
                        test::FakeExecutor::ConfidenceFn confidence = {}) {
  const kv::KvCacheConfig kv_config = test::FullOnlyKv(16, 300);
  kv::KvCacheManager kv(kv_config, {});
  Scheduler scheduler(c, &kv);
  test::FakeExecutor executor(c, 1, kv_config.block_size);
  executor.set_token_fn([](std::span<const int32_t>, int64_t pos) { return static_cast<int32_t>(100 + pos % 50); });
  executor.set_draft_errors(std::move(wrong));
  executor.set_draft_confidences(std::move(confidence));
  test::AddFixedLengthRequests(scheduler, num_requests, prompt_len, max_tokens);
  int64_t steps = 0, speculating = 0;
  for (int step = 0; step < 2000; ++step) {
    const SchedulerOutput out = scheduler.Schedule();
    if (out.empty()) break;
    ModelRunnerOutput result = executor.Execute(out);
    time(out, step, result);
    bool spec = false;
    for (const std::vector<int32_t>& d : out.scheduled_spec_tokens) spec |= !d.empty();
    if (counted(out, step)) {
      ++steps;
      speculating += spec;
    }
    scheduler.UpdateFromOutput(out, result);
  }
  EXPECT_GT(steps, 150);
  return static_cast<double>(speculating) / static_cast<double>(std::max<int64_t>(1, steps));
}

// Four requests whose drafts go wrong at one position in three (and stay wrong after it), over
// 600 steps: when verify steps cost in proportion to their tokens, such drafts cannot pay, and
// speculation must end up off in all but the exploring steps; when the steps cost mostly a fixed
// amount, it must stay on. Startup believed wide steps cheap either way.
double PartlyAcceptedSpeculatingShare(bool linear_cost) {
  const SchedulerConfig c = test::AdaptiveSpecConfig(4, 4, {{1, 8, 64}, {1e-3, 1.05e-3, 1.5e-3}});
  return SpeculatingShare(
      c, 4, 8, 1000, [](std::span<const int32_t>, int64_t pos) { return (pos * 7919) % 3 == 0; },
      [&](const SchedulerOutput& out, int, ModelRunnerOutput& result) {
        const double tokens = static_cast<double>(out.total_num_scheduled_tokens);
        result.execute_seconds = linear_cost ? 1e-3 * tokens : 1e-3 + 1e-6 * tokens;
      },
      [](const SchedulerOutput&, int step) { return step >= 100 && step < 600; });  // past learning
}

TEST(SpeculationGuard, SchedulerSwitchesOffSpeculationThatRealisesLess) {
  EXPECT_LT(PartlyAcceptedSpeculatingShare(/*linear_cost=*/true), 0.10);
}

TEST(SpeculationGuard, SchedulerKeepsSpeculationThatPays) {
  EXPECT_GT(PartlyAcceptedSpeculatingShare(/*linear_cost=*/false), 0.80);
}

// A costly drafter that pays (a draft model agreeing with its target on nearly every token): one
// request at a time, eight requests one after another, steps timed as SmolLM2 BF16 with its Q4_1
// drafter measured on the Xeon (a target step 15.7 ms + 2.1 ms per extra token; a drafter forward
// 5 ms, k + 1 of them to draft k tokens). Fixed width would speculate in every decode step;
// adaptive speculation must in nearly all of them too. Priced per step (the drafting of a 5-token
// draft charged to a 2-token one), a new request's short first drafts looked too dear to verify,
// a streak of unverified plans put the guard's costly-proposer probing on, and two decode steps
// in three ran plain (0.93x no speculation at 4 requests in bench/results/spec_decode_s12/draft).
double CostlyDrafterSpeculatingShare(bool priced_per_position) {
  SchedulerConfig c = test::AdaptiveSpecConfig(1, 5, {{1, 2, 6}, {15.7e-3, 17.8e-3, 26.2e-3}});
  c.propose_cost_per_position = priced_per_position;
  return SpeculatingShare(
      c, 8, 64, 128, [](std::span<const int32_t>, int64_t) { return false; },
      [](const SchedulerOutput& out, int step, ModelRunnerOutput& result) {
        int64_t drafted = 0;
        for (const int32_t n : out.num_tokens_to_propose) drafted += n;
        const double tokens = static_cast<double>(out.total_num_scheduled_tokens);
        result.propose_seconds = drafted > 0 ? 5e-3 * static_cast<double>(drafted + 1) : 0.0;
        if (tokens > 8 && drafted > 0) {  // after a prefill the drafter catches up the prompt
          result.propose_catch_up_seconds = 0.5e-3 * tokens;
          result.propose_seconds += result.propose_catch_up_seconds;
        }
        const double noise = 0.8 + 0.4 * static_cast<double>((step * 7919) % 101) / 100.0;
        result.execute_seconds = noise * (15.7e-3 + 2.1e-3 * (tokens - 1.0)) + result.propose_seconds;
      },
      [k = c.num_speculative_tokens](const SchedulerOutput& out, int) {
        return out.total_num_scheduled_tokens <= 1 + k;  // decode steps
      });
}

TEST(SpeculationGuard, SchedulerKeepsACostlyDrafterThatPays) {
  EXPECT_GT(CostlyDrafterSpeculatingShare(/*priced_per_position=*/true), 0.85);  // per step: 0.78
}

// SmolLM2 and its DSpark drafter at 1 request on the EPYC VM: a step 4.03 ms + 0.43 ms per extra
// token; a drafting step (PricedDraftingTimer) 1.4 ms.
SchedulerConfig BlockDrafterAt1() {
  SchedulerConfig c = test::AdaptiveSpecConfig(1, 7, {{1, 2, 4, 8}, {4.03e-3, 4.46e-3, 5.32e-3, 7.04e-3}});
  c.propose_cost_per_position = false;
  return c;
}
bool Drafting(const SchedulerOutput& out) {
  return std::any_of(out.num_tokens_to_propose.begin(), out.num_tokens_to_propose.end(),
                     [](int32_t n) { return n > 0; });
}
StepTimer PricedDraftingTimer(const StepCostModel& cost) {
  return [cost](const SchedulerOutput& out, int, ModelRunnerOutput& result) {
    result.propose_seconds = Drafting(out) ? 1.4e-3 : 0.0;
    result.execute_seconds = cost.Seconds(out.total_num_scheduled_tokens) + result.propose_seconds;
  };
}
// A fixed pseudo-random function of a position (splitmix64's finaliser), for draft outcomes.
uint64_t Mix(int64_t x, uint64_t salt) {
  uint64_t z = static_cast<uint64_t>(x) * 0x9E3779B97F4A7C15ull + salt;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  return z ^ (z >> 31);
}

// A block drafter (DSpark: priced per step) at 1 request whose confidence head tells easy tokens
// (0.9, right 9 times in 10) from hard ones (0.3, right 3 times in 10), steps timed as SmolLM2's
// with its drafter on a CPU (4.03 ms + 0.43 ms per extra token; drafting 1.4 ms). Speculation
// pays, so the guard keeps it on and every step drafts for the next; a draft that starts with a
// hard token is then still worth verifying (0.3 tokens for 0.43 ms) though not worth drafting
// for. Charged the drafting as well, the plan left those drafts unverified: 40% of the SmolLM2
// drafter's drafts at 1 request, 0.93-1.12x no speculation where verifying them gave 1.04-1.16x
// (bench/results/dspark_s25).
TEST(SpeculationGuard, ABlockDrafterThatPaysVerifiesWhatItDrafted) {
  const SchedulerConfig c = BlockDrafterAt1();
  const auto hard = [](int64_t pos) { return Mix(pos, 1) % 2 == 0; };
  const double share = SpeculatingShare(
      c, 4, 8, 256,
      [&](std::span<const int32_t>, int64_t pos) { return Mix(pos, 2) % 10 < (hard(pos) ? 7u : 1u); },
      PricedDraftingTimer(c.step_cost),
      [](const SchedulerOutput& out, int step) { return step >= 100 && out.total_num_scheduled_tokens <= 8; },
      [&](int64_t pos) { return hard(pos) ? 0.3f : 0.9f; });
  EXPECT_GT(share, 0.8);
}

// The same steps, but every token as hard as the hard ones there (confidence 0.35, right 35 times
// in 100): verifying a draft would still be worth its 0.43 ms, but drafting for it is not worth
// 1.4 ms more, so speculating never pays and the guard switches it off. Where the guard drafts
// only for its exploring decisions and probes, drafting is the choice the plan weighs: the plans
// verify nothing and the drafting backs off to rare probes. Weighed as already paid for there,
// every verified probe reset that back-off: 15% of the decode steps drafted.
TEST(SpeculationGuard, ABlockDrafterThatCannotPayBacksOff) {
  const SchedulerConfig c = BlockDrafterAt1();
  const StepTimer timer = PricedDraftingTimer(c.step_cost);
  int64_t decode_steps = 0, drafting_steps = 0;
  SpeculatingShare(
      c, 4, 8, 256, [](std::span<const int32_t>, int64_t pos) { return Mix(pos, 2) % 100 >= 35; },
      [&](const SchedulerOutput& out, int step, ModelRunnerOutput& result) {
        timer(out, step, result);
        if (step >= 300 && out.total_num_scheduled_tokens <= 8) {
          ++decode_steps;
          drafting_steps += Drafting(out);
        }
      },
      [](const SchedulerOutput&, int) { return true; }, [](int64_t) { return 0.35f; });
  ASSERT_GT(decode_steps, 300);
  EXPECT_LT(static_cast<double>(drafting_steps) / static_cast<double>(decode_steps), 0.03)
      << drafting_steps << " of " << decode_steps << " decode steps drafted";
}

// A block drafter at 1 request (steps as BlockDrafterAt1's) whose head says 0.95 for every token
// while 6 in 10 are right: speculating pays (1.25x at 2 tokens), but the plan's bound on any draft
// (DraftsWouldBeVerified: confidences scaled down to what was accepted) is worth a few ms. For 20
// early steps other work takes the cores and a drafting step costs 30 ms instead of 1.4. Judged at
// that price no draft would be verified, so drafting stops, and only drafting measures the price
// again: the guard's probes must still draft, and what a probe measures after a pause must count
// for the steps it stands for. Without both, drafting never resumed (share 0.0 here; a 1-request
// SmolLM2 server on a loaded Zen 5 verified 24 of 1,643 plans: bench/results/dspark_s34). The guard
// itself charged speculation the burst and stays off for a while; its exploring pairs bring it
// back on.
TEST(SpeculationGuard, ABurstOfDraftingCostDoesNotStopADrafterThatPays) {
  const SchedulerConfig c = BlockDrafterAt1();
  const double share = SpeculatingShare(
      c, 8, 8, 1000, [](std::span<const int32_t>, int64_t pos) { return Mix(pos, 3) % 10 >= 6; },
      [&](const SchedulerOutput& out, int step, ModelRunnerOutput& result) {
        result.propose_seconds = Drafting(out) ? (step >= 40 && step < 60 ? 30e-3 : 1.4e-3) : 0.0;
        result.execute_seconds = c.step_cost.Seconds(out.total_num_scheduled_tokens) + result.propose_seconds;
      },
      [](const SchedulerOutput& out, int step) { return step >= 1500 && out.total_num_scheduled_tokens <= 8; },
      [](int64_t) { return 0.95f; });
  EXPECT_GT(share, 0.8);
}

// A block drafter (DSpark: one forward drafts every request's block, priced per step) at
// `requests` requests of 200 tokens, drafts going wrong where `wrong` says, each step's
// startup-measured cost from `cost` and its measured proposer and execute seconds from `time`,
// given how many requests it asked to draft. `on_decode` sees each decode step and that count.
void RunBlockDrafter(int requests, StepCostModel cost, test::FakeExecutor::WrongFn wrong,
                     const std::function<void(int64_t drafting, const SchedulerOutput&, ModelRunnerOutput&)>& time,
                     const std::function<void(int step, int64_t drafting, int64_t running)>& on_decode,
                     int max_tokens = 200) {
  SchedulerConfig c = test::AdaptiveSpecConfig(requests, 7, std::move(cost));
  c.propose_cost_per_position = false;
  const auto decode = [requests](const SchedulerOutput& out, int) {
    return out.total_num_scheduled_tokens <= int64_t{requests} * 8;
  };
  SpeculatingShare(
      c, requests, 8, max_tokens, std::move(wrong),
      [&](const SchedulerOutput& out, int step, ModelRunnerOutput& result) {
        const int64_t drafting = std::count_if(out.num_tokens_to_propose.begin(), out.num_tokens_to_propose.end(),
                                               [](int32_t n) { return n > 0; });
        time(drafting, out, result);
        if (decode(out, step)) on_decode(step, drafting, static_cast<int64_t>(out.scheduled_reqs.size()));
      },
      decode);
}

// Where a step costs in proportion to its tokens and drafts go wrong at one position in three,
// verifying cannot pay, even for a draft the drafter were sure of. Drafting for all 16 costs as
// much as the decode step itself, so every drafting step is a step lost. Once the first drafts
// have been measured, not even the guard's learning and probing decisions may draft: before, they
// drafted in 17 of the 200 decode steps here (7-17% of the throughput at 16-64 requests on a CPU,
// bench/results/dspark_s23).
TEST(SpeculationGuard, ABlockDrafterDoesNotDraftWhereItsAcceptanceCannotPay) {
  int64_t decode_steps = 0, drafting_steps = 0;
  RunBlockDrafter(
      16, {{1, 16, 128}, {1e-3, 16e-3, 128e-3}}, [](std::span<const int32_t>, int64_t pos) { return (pos * 7919) % 3 == 0; },
      [](int64_t drafting, const SchedulerOutput& out, ModelRunnerOutput& result) {
        result.propose_seconds = drafting > 0 ? 16e-3 : 0.0;
        result.execute_seconds = 1e-3 * static_cast<double>(out.total_num_scheduled_tokens) + result.propose_seconds;
      },
      [&](int, int64_t drafting, int64_t) {
        ++decode_steps;
        drafting_steps += drafting > 0;
      });
  ASSERT_GT(decode_steps, 150);
  EXPECT_LT(static_cast<double>(drafting_steps) / static_cast<double>(decode_steps), 0.02)
      << drafting_steps << " of " << decode_steps << " decode steps drafted";
}

// Where drafting looks affordable (steps cost mostly a fixed amount, so a draft it were sure of
// would be verified) but the drafts are never right: the plans verify nothing, and it drafts only
// for the guard's probes. A probe drafts for a quarter of the running requests (1 to 4), not
// all of them: on a CPU, drafting for 16 cost the SmolLM2 drafter a decode step, and for all 4 of
// 4 half of one. (Probing starts once kMinSteps allowed decisions verified nothing: in a bucket
// that is off, after three of its exploring pairs, up to 384 decisions in; the requests are long
// enough to see probes after that, as long as the KV cache holds them.)
TEST(SpeculationGuard, ABlockDrafterProbesWithAFewRequests) {
  for (const int requests : {16, 4}) {
    SCOPED_TRACE(std::to_string(requests) + " requests");
    const int max_tokens = 4800 / requests - 8;  // test::FullOnlyKv(16, 300): 4,800 tokens
    int64_t probes = 0, widest = 0;
    RunBlockDrafter(
        requests, {{1, 16, 128}, {10e-3, 11e-3, 24e-3}}, [](std::span<const int32_t>, int64_t) { return true; },
        [](int64_t drafting, const SchedulerOutput& out, ModelRunnerOutput& result) {
          result.propose_seconds = 0.5e-3 * static_cast<double>(drafting);
          result.execute_seconds =
              10e-3 + 0.1e-3 * static_cast<double>(out.total_num_scheduled_tokens) + result.propose_seconds;
        },
        [&](int step, int64_t drafting, int64_t running) {
          // Past the first measurements, all requests running (not the drain's smaller buckets).
          if (step >= max_tokens / 2 && running == requests && drafting > 0) {
            ++probes;
            widest = std::max(widest, drafting);
          }
        },
        max_tokens);
    EXPECT_GT(probes, 0) << "the guard keeps probing";
    EXPECT_EQ(widest, Scheduler::ProbeDrafts(requests)) << "the widest probe";
    EXPECT_EQ(Scheduler::ProbeDrafts(requests), requests / 4);
  }
}

// A probe drafts for the requests the drafter is most nearly current with
// (Scheduler::ProbesWith): a DSpark context projects every row since the request last drafted (and
// a draft model catches up on them), so those that drafted last, or were just prefilled, cost
// least. Here four short requests leave early and four waiting ones take their slots, last in the
// running order: the probes after they join draft for them, not for the first requests in order,
// which have not drafted since the guard's learning.
TEST(SpeculationGuard, ProbesDraftForTheRequestsTheDrafterIsNearestTo) {
  SchedulerConfig c = test::AdaptiveSpecConfig(16, 7, {{1, 16, 128}, {10e-3, 11e-3, 24e-3}});
  c.propose_cost_per_position = false;
  const kv::KvCacheConfig kv_config = test::FullOnlyKv(16, 600);
  kv::KvCacheManager kv(kv_config, {});
  Scheduler scheduler(c, &kv);
  test::FakeExecutor executor(c, 1, kv_config.block_size);
  executor.set_token_fn([](std::span<const int32_t>, int64_t pos) { return static_cast<int32_t>(100 + pos % 50); });
  executor.set_draft_errors([](std::span<const int32_t>, int64_t) { return true; });  // never right
  for (int r = 0; r < 20; ++r) {
    RequestInput input;
    input.external_id = "r" + std::to_string(r);
    input.prompt_token_ids = test::Prompt(8, r);
    input.sampling.max_tokens = r < 4 ? 80 : 300;
    input.sampling.ignore_eos = true;
    ASSERT_TRUE(scheduler.Add(static_cast<RequestIndex>(r), std::move(input)).ok());
  }
  std::map<RequestIndex, int64_t> drafted_at;  // the request's tokens when it last drafted (or joined)
  std::map<RequestIndex, int64_t> tokens;
  int64_t probes = 0, probes_with_newcomers = 0, stale_probes = 0;
  for (int step = 0; step < 3000; ++step) {
    const SchedulerOutput out = scheduler.Schedule();
    if (out.empty()) break;
    int64_t drafting = 0;
    for (size_t i = 0; i < out.scheduled_reqs.size(); ++i) {
      const RequestIndex r = out.scheduled_reqs[i];
      tokens[r] = scheduler.Find(r)->num_tokens();
      if (!drafted_at.contains(r)) drafted_at[r] = tokens[r];
      drafting += out.num_tokens_to_propose[i] > 0;
    }
    if (step >= 20 && drafting > 0 && drafting <= Scheduler::kMaxProbeDrafts) {
      ++probes;
      int64_t most_behind_probed = -1, least_behind_other = std::numeric_limits<int64_t>::max();
      bool newcomer = false;
      for (size_t i = 0; i < out.scheduled_reqs.size(); ++i) {
        const RequestIndex r = out.scheduled_reqs[i];
        const int64_t behind = tokens[r] - drafted_at[r];
        if (out.num_tokens_to_propose[i] > 0) {
          most_behind_probed = std::max(most_behind_probed, behind);
          newcomer |= r >= 16;
        } else {
          least_behind_other = std::min(least_behind_other, behind);
        }
      }
      stale_probes += most_behind_probed > least_behind_other;
      probes_with_newcomers += newcomer;
    }
    for (size_t i = 0; i < out.scheduled_reqs.size(); ++i) {
      if (out.num_tokens_to_propose[i] > 0) drafted_at[out.scheduled_reqs[i]] = tokens[out.scheduled_reqs[i]];
    }
    ModelRunnerOutput result = executor.Execute(out);
    result.propose_seconds = 0.5e-3 * static_cast<double>(drafting);
    result.execute_seconds = 10e-3 + 0.1e-3 * static_cast<double>(out.total_num_scheduled_tokens) + result.propose_seconds;
    scheduler.UpdateFromOutput(out, result);
  }
  EXPECT_GT(probes, 3);
  EXPECT_GT(probes_with_newcomers, 0) << "no probe drafted for a request that joined late";
  EXPECT_EQ(stale_probes, 0) << "probes drafted for a request further behind than one left out";
}

}  // namespace
}  // namespace ember
