#include "engine/spec_guard.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

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

bool SpeculationGuard::Learning(const Bucket& b) { return b.plain.steps < kMinSteps || b.spec.steps < kMinSteps; }

SpeculationGuard::Verdict SpeculationGuard::VerdictOf(int bucket) const {
  const Bucket& b = buckets_[bucket];
  if (!Learning(b)) return b.off ? Verdict::kOff : Verdict::kOn;
  // Where the buckets disagree with the rule (a smaller one off, a larger one on), off wins: the
  // bar is never slower.
  for (int j = 0; j < bucket; ++j) {
    if (!Learning(buckets_[j]) && buckets_[j].off) return Verdict::kOff;
  }
  for (int j = bucket + 1; j < kBuckets; ++j) {
    if (!Learning(buckets_[j]) && !buckets_[j].off) return Verdict::kOn;
  }
  return Verdict::kLearning;
}

bool SpeculationGuard::WouldAllow(int bucket, int64_t decision) const {
  switch (VerdictOf(bucket)) {
    // Alternate, so that both sides get steps even when the plan would always speculate.
    case Verdict::kLearning: return decision % 2 == 0 || Explores(decision);
    case Verdict::kOff: return Explores(decision);
    case Verdict::kOn: return !Explores(decision);
  }
  return false;
}

bool SpeculationGuard::Allow(int64_t num_decodes) {
  const int i = BucketOf(num_decodes);
  return WouldAllow(i, buckets_[i].decisions++);
}

bool SpeculationGuard::WantsDrafts(int64_t num_decodes, bool costly) const {
  const int i = BucketOf(num_decodes);
  const Bucket& b = buckets_[i];
  const int64_t next = b.decisions;
  // A lookup drafts wherever speculation is not off: what it costs is nothing, and every draft,
  // verified or not, measures acceptance.
  if (!costly) return Explores(next) || VerdictOf(i) != Verdict::kOff;
  // A costly proposer drafts only for a decision that may speculate, and while its plans verify
  // nothing, only for a probe once per kExplorePeriod decisions: the last decision of the period
  // (the exploring one) where that one may speculate, the one before it otherwise.
  if (!WouldAllow(i, next)) return false;
  if (b.unverified < kMinSteps) return true;
  // The longer the plans find nothing worth verifying, the rarer the probes: a probe of a draft
  // model drafted for every request of the step (a quarter of a step for a 135M target on two
  // cores), so one in kExplorePeriod alone cost more than the 2% the issue allows (probes now
  // draft for Scheduler::ProbeDrafts requests only). The period doubles every four silent
  // periods, to kMaxProbePeriod; it stays a multiple of kExplorePeriod, so the probe still lands
  // on the exploring decision of a bucket that is off.
  const int64_t doublings = std::min<int64_t>(kMaxProbeDoublings, (b.unverified - kMinSteps) / (4 * kExplorePeriod));
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
  if (!allowed && VerdictOf(i) == Verdict::kLearning) return;
  Bucket& b = buckets_[i];
  b.unverified = verified ? 0 : b.unverified + 1;
}

void SpeculationGuard::Record(int64_t num_decodes, bool speculated, int64_t emitted, double seconds) {
  if (num_decodes <= 0 || emitted <= 0 || !(seconds > 0.0)) return;
  const int i = BucketOf(num_decodes);
  Bucket& b = buckets_[i];
  // A bucket's first verdict of its own continues the implied one (the hysteresis applies to it).
  const bool was_off = VerdictOf(i) == Verdict::kOff;
  Side& side = speculated ? b.spec : b.plain;
  side.emitted = kDecay * side.emitted + static_cast<double>(emitted);
  side.seconds = kDecay * side.seconds + seconds;
  ++side.steps;
  const double ratio = RatioOf(b);
  if (ratio <= 0.0) return;
  b.off = was_off ? ratio < kHysteresis : ratio < 1.0;
  if (b.off == was_off) return;
  EMBER_LOG_INFO("speculative decoding {} at {}: {:.0f} tok/s speculating vs {:.0f} without", b.off ? "off" : "on",
                 BucketName(num_decodes), b.spec.Rate(), b.plain.Rate());
}

double SpeculationGuard::RatioOf(const Bucket& b) {
  if (Learning(b) || b.plain.Rate() <= 0.0) return 0.0;
  return b.spec.Rate() / b.plain.Rate();
}

double SpeculationGuard::Ratio(int64_t num_decodes) const { return RatioOf(buckets_[BucketOf(num_decodes)]); }

std::optional<double> SpeculationGuard::SavingPerToken(int64_t num_decodes) const {
  const int i = BucketOf(num_decodes);
  if (VerdictOf(i) == Verdict::kOff) return 0.0;
  auto saving = [](const Bucket& b) { return std::max(0.0, 1.0 / b.plain.Rate() - 1.0 / b.spec.Rate()); };
  auto measured = [](const Bucket& b) { return !Learning(b) && b.plain.Rate() > 0.0 && b.spec.Rate() > 0.0; };
  if (measured(buckets_[i])) return buckets_[i].off ? 0.0 : saving(buckets_[i]);
  // Speculation saves less per token the more requests a step verifies, so the nearest larger
  // bucket's saving, where it paid, is a lower bound for this one.
  for (int j = i + 1; j < kBuckets; ++j) {
    if (!measured(buckets_[j])) continue;
    if (!buckets_[j].off && saving(buckets_[j]) > 0.0) return saving(buckets_[j]);
    break;
  }
  return std::nullopt;
}

bool SpeculationGuard::off(int64_t num_decodes) const { return VerdictOf(BucketOf(num_decodes)) == Verdict::kOff; }

}  // namespace ember
