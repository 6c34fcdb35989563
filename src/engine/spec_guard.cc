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

bool SpeculationGuard::WouldAllow(const Bucket& b, int64_t decision) {
  // Learning: alternate, so that both sides get steps even when the plan would always speculate.
  if (Learning(b)) return decision % 2 == 0 || Explores(decision);
  return b.off ? Explores(decision) : !Explores(decision);
}

bool SpeculationGuard::Allow(int64_t num_decodes) {
  Bucket& b = buckets_[BucketOf(num_decodes)];
  return WouldAllow(b, b.decisions++);
}

bool SpeculationGuard::WantsDrafts(int64_t num_decodes, bool costly) const {
  const Bucket& b = buckets_[BucketOf(num_decodes)];
  const int64_t next = b.decisions;
  // Lookups draft always: what they cost is nothing, and every draft, verified or not, measures
  // acceptance.
  if (!costly) return Explores(next) || !b.off || Learning(b);
  // A costly proposer drafts only for a decision that may speculate, and while its plans verify
  // nothing, only for a probe once per kExplorePeriod decisions: the last decision of the period
  // where the bucket is off (the exploring one), the one before it where it is on.
  if (!WouldAllow(b, next)) return false;
  if (b.unverified < kMinSteps) return true;
  const int64_t phase = next % kExplorePeriod;
  return phase == kExplorePeriod - 1 || phase == kExplorePeriod - 2;
}

void SpeculationGuard::Planned(int64_t num_decodes, bool verified) {
  Bucket& b = buckets_[BucketOf(num_decodes)];
  b.unverified = verified ? 0 : b.unverified + 1;
}

void SpeculationGuard::Record(int64_t num_decodes, bool speculated, int64_t emitted, double seconds) {
  if (num_decodes <= 0 || emitted <= 0 || !(seconds > 0.0)) return;
  Bucket& b = buckets_[BucketOf(num_decodes)];
  Side& side = speculated ? b.spec : b.plain;
  side.emitted = kDecay * side.emitted + static_cast<double>(emitted);
  side.seconds = kDecay * side.seconds + seconds;
  ++side.steps;
  Judge(b, num_decodes);
}

double SpeculationGuard::Ratio(int64_t num_decodes) const {
  const Bucket& b = buckets_[BucketOf(num_decodes)];
  if (b.plain.steps < kMinSteps || b.spec.steps < kMinSteps || b.plain.Rate() <= 0.0) return 0.0;
  return b.spec.Rate() / b.plain.Rate();
}

void SpeculationGuard::Judge(Bucket& b, int64_t num_decodes) {
  const double ratio = Ratio(num_decodes);
  if (ratio <= 0.0) return;
  const bool off = b.off ? ratio < kHysteresis : ratio < 1.0;
  if (off == b.off) return;
  b.off = off;
  EMBER_LOG_INFO("speculative decoding {} at {}: {:.0f} tok/s speculating vs {:.0f} without", off ? "off" : "on",
                 BucketName(num_decodes), b.spec.Rate(), b.plain.Rate());
}

}  // namespace ember
