#include "engine/spec_guard.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <utility>

#include "core/logging.h"

namespace ember {

int SpeculationGuard::BucketOf(int64_t num_decodes) {
  const uint64_t n = static_cast<uint64_t>(std::max<int64_t>(1, num_decodes));
  return std::min(kBuckets - 1, static_cast<int>(std::bit_width(n)) - 1);
}

std::string SpeculationGuard::BucketName(int64_t num_decodes) {
  const int b = BucketOf(num_decodes);
  const int64_t lo = int64_t{1} << b;
  if (b == kBuckets - 1) return fmt::format("{}+ decodes", lo);
  return lo == 1 ? "1 decode" : fmt::format("{}-{} decodes", lo, 2 * lo - 1);
}

void SpeculationGuard::Side::Decay(double factor) {
  weight *= factor;
  emitted *= factor;
  seconds *= factor;
  const double sq = factor * factor;
  weight_sq *= sq;
  emitted_sq *= sq;
  emitted_seconds *= sq;
  seconds_sq *= sq;
}

void SpeculationGuard::Side::Add(double step_emitted, double step_seconds) {
  weight += 1.0;
  emitted += step_emitted;
  seconds += step_seconds;
  weight_sq += 1.0;
  emitted_sq += step_emitted * step_emitted;
  emitted_seconds += step_emitted * step_seconds;
  seconds_sq += step_seconds * step_seconds;
  ++steps;
}

double SpeculationGuard::Side::LogRateVariance() const {
  const double rate = Rate();
  if (!(rate > 0.0)) return 0.0;
  // R = sum w e / sum w s; R - true rate ~ sum w (e - R s) / sum w s, so its variance is
  // sum w^2 (e - R s)^2 / (sum w s)^2, times n / (n - 1) for the rate estimated from the same
  // steps (n: the effective number of steps, weight^2 / weight_sq).
  const double residual = std::max(0.0, emitted_sq - 2.0 * rate * emitted_seconds + rate * rate * seconds_sq);
  const double n = weight * weight / weight_sq;
  const double correction = n > 1.0 ? n / (n - 1.0) : 1.0;
  return correction * residual / (seconds * seconds) / (rate * rate);
}

bool SpeculationGuard::HasData(const Bucket& b) { return b.plain.steps >= kMinSteps && b.spec.steps >= kMinSteps; }

SpeculationGuard::Verdict SpeculationGuard::Next(Verdict verdict, double z) {
  if (z >= kConfidence) return Verdict::kOn;
  if (z <= -kConfidence) return Verdict::kOff;
  // A verdict the evidence now contradicts is no longer known: learn again, measuring both sides
  // equally, until it is clear one way. On, at the first sign (never slower); off, at a clear one
  // (see kReconsider).
  if ((verdict == Verdict::kOn && z < 0.0) || (verdict == Verdict::kOff && z > kReconsider)) return Verdict::kLearning;
  return verdict;
}

const char* SpeculationGuard::Name(Verdict v) {
  switch (v) {
    case Verdict::kOn: return "on";
    case Verdict::kOff: return "off";
    case Verdict::kLearning: return "learning";
  }
  return "?";
}

SpeculationGuard::Verdict SpeculationGuard::VerdictOf(int bucket) const {
  const Bucket& b = buckets_[bucket];
  if (HasData(b)) return b.verdict;
  // Where the buckets disagree with the rule (a smaller one off, a larger one on), off wins: the
  // bar is never slower.
  for (int j = 0; j < bucket; ++j) {
    if (HasData(buckets_[j]) && buckets_[j].verdict == Verdict::kOff) return Verdict::kOff;
  }
  for (int j = bucket + 1; j < kBuckets; ++j) {
    if (HasData(buckets_[j]) && buckets_[j].verdict == Verdict::kOn) return Verdict::kOn;
  }
  return Verdict::kLearning;
}

double SpeculationGuard::PairExtraSteps(const Bucket& b) {
  if (!HasData(b) || !(b.plain.Rate() > 0.0) || !(b.plain.weight > 0.0)) return 0.0;
  const double plain_step = b.plain.seconds / b.plain.weight;
  // A side's average step: its seconds beyond the plain time for its tokens.
  const auto extra = [&](const Side& s) { return (s.seconds - s.emitted / b.plain.Rate()) / s.weight; };
  const double measured = extra(b.spec);
  const double first = b.warm_up.weight > 0.0 ? extra(b.warm_up) : measured;
  return std::max(0.0, measured + first) / plain_step;
}

int64_t SpeculationGuard::OffPeriod(const Bucket& b) const {
  int64_t period = 2 * kExplorePeriod;
  const double ratio = RatioOf(b);  // 0 without measurements of its own (an implied verdict)
  if (!(ratio > 0.0 && ratio < 1.0)) return period;
  const double extra_steps = PairExtraSteps(b);
  for (int64_t d = 0; d < max_explore_doublings_ && extra_steps > kExploreCost * static_cast<double>(period); ++d) {
    period *= 2;
  }
  return period;
}

bool SpeculationGuard::WouldAllow(int bucket, int64_t decision) const {
  switch (VerdictOf(bucket)) {
    // Alternate, so that both sides get steps even when the plan would always speculate.
    case Verdict::kLearning: return decision % 2 == 0 || Explores(decision);
    case Verdict::kOff: return ExploresOff(decision, OffPeriod(buckets_[bucket]));
    case Verdict::kOn: return !Explores(decision);
  }
  return false;
}

bool SpeculationGuard::Allow(int64_t num_decodes) {
  const int i = BucketOf(num_decodes);
  Bucket& b = buckets_[i];
  b.plain.Decay(kDecay);
  b.spec.Decay(kDecay);
  b.warm_up.Decay(kDecay);
  const int64_t decision = b.decisions++;
  b.warming_up = VerdictOf(i) == Verdict::kOff && WarmsUp(decision, OffPeriod(b));
  return WouldAllow(i, decision);
}

bool SpeculationGuard::WantsDrafts(int64_t num_decodes, bool costly) const {
  const int i = BucketOf(num_decodes);
  const Bucket& b = buckets_[i];
  const int64_t next = b.decisions;
  // A lookup drafts wherever speculation is not off: what it costs is nothing, and every draft,
  // verified or not, measures acceptance.
  if (!costly) return VerdictOf(i) != Verdict::kOff || ExploresOff(next, OffPeriod(b));
  // A costly proposer drafts only for a decision that may speculate, and while its plans verify
  // nothing, only for a probe once per kExplorePeriod decisions: the last decision of the period
  // (the exploring one) where that one may speculate, the one before it otherwise.
  if (!WouldAllow(i, next)) return false;
  if (b.unverified < kMinSteps) return true;
  // The longer the plans find nothing worth verifying, the rarer the probes: a probe of a draft
  // model drafted for every request of the step (a quarter of a step for a 135M target on two
  // cores), so one in kExplorePeriod alone cost more than the 2% the issue allows (probes now
  // draft for Scheduler::ProbeDrafts requests only). The period doubles every four periods of
  // silence (in decisions, plain ones included, though they are not plans), to kMaxProbePeriod;
  // it stays a multiple of kExplorePeriod, so the probe still lands on an exploring decision of a
  // bucket that is off.
  const int64_t doublings = std::min<int64_t>(kMaxProbeDoublings, (next - b.silent_from) / (4 * kExplorePeriod));
  const int64_t period = kExplorePeriod << doublings;
  const int64_t phase = next % period;
  // One probe per period. A bucket whose plans verify nothing never gets a speculating side and
  // stays learning, where both decisions may speculate: both drafted before, which made every
  // probe at 4 requests two drafting steps.
  if (phase == period - 1) return true;
  return phase == period - 2 && !WouldAllow(i, next + 1);
}

void SpeculationGuard::Planned(int64_t num_decodes, bool verified, bool allowed) {
  const int i = BucketOf(num_decodes);
  if (!allowed) return;
  Bucket& b = buckets_[i];
  if (verified) {
    b.unverified = 0;
  } else if (++b.unverified == kMinSteps) {
    b.silent_from = b.decisions;
  }
}

void SpeculationGuard::Record(int64_t num_decodes, bool allowed, int64_t emitted, double seconds) {
  if (num_decodes <= 0 || emitted <= 0 || !(seconds > 0.0)) return;
  const int i = BucketOf(num_decodes);
  Bucket& b = buckets_[i];
  // A bucket's first verdict of its own continues the implied one.
  const Verdict was = VerdictOf(i);
  const bool warming_up = std::exchange(b.warming_up, false);
  (warming_up ? b.warm_up : allowed ? b.spec : b.plain).Add(static_cast<double>(emitted), seconds);
  if (CurrentLogLevel() <= LogLevel::kDebug) {  // every step: skip formatting the bucket's name otherwise
    EMBER_LOG_DEBUG("spec guard: {} {}, {} tokens in {:.2f} ms{}; {:.0f} vs {:.0f} tok/s, {:+.2f} standard errors",
                    BucketName(num_decodes), allowed ? "speculating" : "plain", emitted, seconds * 1e3,
                    warming_up ? " (warm-up, not counted)" : "", b.spec.Rate(), b.plain.Rate(), EvidenceOf(b));
  }
  if (warming_up || !HasData(b)) return;
  const double z = EvidenceOf(b);
  b.verdict = Next(was, z);
  if (b.verdict == was) return;
  EMBER_LOG_INFO("speculative decoding {} at {}: {:.0f} tok/s speculating vs {:.0f} without ({:+.1f} standard errors)",
                 Name(b.verdict), BucketName(num_decodes), b.spec.Rate(), b.plain.Rate(), z);
}

double SpeculationGuard::RatioOf(const Bucket& b) {
  if (!HasData(b) || b.plain.Rate() <= 0.0) return 0.0;
  return b.spec.Rate() / b.plain.Rate();
}

double SpeculationGuard::EvidenceOf(const Bucket& b) {
  const double ratio = RatioOf(b);
  if (ratio <= 0.0) return 0.0;
  const double se = std::sqrt(b.spec.LogRateVariance() + b.plain.LogRateVariance());
  const double log_ratio = std::log(ratio);
  if (se > 0.0) return log_ratio / se;
  if (log_ratio == 0.0) return 0.0;
  return log_ratio > 0.0 ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

double SpeculationGuard::Ratio(int64_t num_decodes) const { return RatioOf(buckets_[BucketOf(num_decodes)]); }

double SpeculationGuard::Evidence(int64_t num_decodes) const { return EvidenceOf(buckets_[BucketOf(num_decodes)]); }

std::optional<double> SpeculationGuard::SavingPerToken(int64_t num_decodes) const {
  const int i = BucketOf(num_decodes);
  if (VerdictOf(i) == Verdict::kOff) return 0.0;
  auto saving = [](const Bucket& b) { return std::max(0.0, 1.0 / b.plain.Rate() - 1.0 / b.spec.Rate()); };
  auto measured = [](const Bucket& b) { return HasData(b) && b.plain.Rate() > 0.0 && b.spec.Rate() > 0.0; };
  if (measured(buckets_[i])) return buckets_[i].verdict == Verdict::kOff ? 0.0 : saving(buckets_[i]);
  // Speculation saves less per token the more requests a step verifies, so the nearest larger
  // bucket's saving, where it paid, is a lower bound for this one.
  for (int j = i + 1; j < kBuckets; ++j) {
    if (!measured(buckets_[j])) continue;
    if (buckets_[j].verdict != Verdict::kOff && saving(buckets_[j]) > 0.0) return saving(buckets_[j]);
    break;
  }
  return std::nullopt;
}

bool SpeculationGuard::off(int64_t num_decodes) const { return VerdictOf(BucketOf(num_decodes)) == Verdict::kOff; }

bool SpeculationGuard::on(int64_t num_decodes) const { return VerdictOf(BucketOf(num_decodes)) == Verdict::kOn; }

}  // namespace ember
