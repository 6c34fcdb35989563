#include "engine/spec_decode.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace ember {

double StepCostModel::Seconds(int64_t n) const {
  EMBER_CHECK(!tokens.empty() && tokens.size() == seconds.size());
  if (tokens.size() == 1 || n <= tokens.front()) {
    // Below the first point, or a single point: proportional to it at worst.
    return tokens.size() == 1 ? seconds.front() * std::max<double>(1.0, static_cast<double>(n) / tokens.front())
                              : seconds.front();
  }
  size_t hi = 1;
  while (hi + 1 < tokens.size() && tokens[hi] < n) ++hi;
  const double x0 = static_cast<double>(tokens[hi - 1]), x1 = static_cast<double>(tokens[hi]);
  const double slope = std::max(0.0, (seconds[hi] - seconds[hi - 1]) / (x1 - x0));
  return seconds[hi - 1] + slope * (static_cast<double>(n) - x0);
}

void StepCostModel::Observe(int64_t n, double observed) {
  if (empty() || n <= 0 || !(observed > 0.0)) return;
  // The point nearest n on a log scale (the table is denser where steps are small).
  size_t nearest = 0;
  double best = 1e300;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const double d = std::abs(std::log(static_cast<double>(tokens[i]) / static_cast<double>(n)));
    if (d < best) {
      best = d;
      nearest = i;
    }
  }
  constexpr double kRate = 0.1;  // about ten steps to follow a lasting change; one outlier moves little
  const double ratio = std::clamp(observed / Seconds(n), 0.5, 2.0);
  // The nearest point and every larger one move by the same factor: what makes a step of n tokens
  // slower than measured at startup (contexts longer than the startup's, other load) makes larger
  // steps slower alike. Moving the nearest point alone flattened the slope above it, so extra
  // (verified) tokens looked cheap exactly where steps had grown dear, and adaptive speculation
  // verified at 64 requests, where a verified token costs a whole generated one.
  const double factor = 1.0 + kRate * (ratio - 1.0);
  for (size_t j = nearest; j < seconds.size(); ++j) seconds[j] *= factor;
  for (size_t j = nearest; j-- > 0;) seconds[j] = std::min(seconds[j], seconds[nearest]);
}

std::string StepCostModel::Describe() const {
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    out += fmt::format("{}{} tok {:.2f} ms", i ? ", " : "", tokens[i], seconds[i] * 1e3);
  }
  return out;
}

void AcceptanceStats::Record(int32_t matched, int32_t checked, std::span<const float> confidences) {
  checked = std::min(checked, kMaxPositions);
  matched = std::min(matched, checked);
  for (int32_t i = 0; i < checked; ++i) {
    ++checked_[i];
    if (i < matched) ++matched_[i];
    if (static_cast<size_t>(i) < confidences.size()) {
      confidence_sum_[i] += confidences[i];
      if (i < matched) ++confident_matched_[i];
    }
  }
}

double AcceptanceStats::ConfidenceScale(int32_t position, double prior) const {
  EMBER_CHECK(position >= 1 && position <= kMaxPositions);
  return (static_cast<double>(confident_matched_[position - 1]) + prior) / (confidence_sum_[position - 1] + prior);
}

double AcceptanceStats::Conditional(int32_t position, double prior_rate, double prior) const {
  EMBER_CHECK(position >= 1 && position <= kMaxPositions);
  // P(i | 1..i-1) = matched(i) / matched(i-1) among drafts checked that far; counts of drafts
  // that reached i-1 matched and had i checked are checked(i).
  const double hits = static_cast<double>(matched_[position - 1]);
  const double trials = static_cast<double>(checked_[position - 1]);
  return (hits + prior * prior_rate) / (trials + prior);
}

void DraftTracker::Record(AcceptanceStats* request, AcceptanceStats* engine) {
  if (done_ || checked_ == 0) return;
  if (request != nullptr) request->Record(matched_, checked_, confidences_);
  if (engine != nullptr) engine->Record(matched_, checked_, confidences_);
  done_ = true;
}

void DraftTracker::Start(std::span<const int32_t> draft, int64_t start, AcceptanceStats* request,
                         AcceptanceStats* engine, std::span<const float> confidences) {
  Record(request, engine);  // an earlier draft cut short by this one counts as far as it got
  tokens_.assign(draft.begin(), draft.end());
  confidences_.assign(confidences.begin(), confidences.end());
  if (confidences_.size() != tokens_.size()) confidences_.clear();
  start_ = start;
  matched_ = checked_ = 0;
  done_ = tokens_.empty();
}

void DraftTracker::Check(std::span<const int32_t> all_tokens, AcceptanceStats* request, AcceptanceStats* engine) {
  if (done_) return;
  const int64_t known = static_cast<int64_t>(all_tokens.size()) - start_;
  while (checked_ < static_cast<int32_t>(tokens_.size()) && checked_ < known) {
    const bool equal = all_tokens[start_ + checked_] == tokens_[checked_];
    ++checked_;
    if (!equal) {
      Record(request, engine);
      return;
    }
    ++matched_;
  }
  if (checked_ == static_cast<int32_t>(tokens_.size())) Record(request, engine);
}

std::span<const int32_t> DraftTracker::Ahead(int64_t num_tokens) const {
  // Only a draft that starts exactly at the next position and has not missed yet can be verified.
  if (tokens_.empty() || num_tokens != start_ || checked_ > 0) return {};
  return tokens_;
}

std::vector<int32_t> PlanSpeculation(const SpecPlanInput& in) { return PredictSpeculation(in).plan; }

SpecPrediction PredictSpeculation(const SpecPlanInput& in) {
  SpecPrediction out;
  std::vector<int32_t>& plan = out.plan;
  plan.assign(in.candidates.size(), 0);
  if (in.candidates.empty()) return out;
  EMBER_CHECK(in.cost != nullptr && !in.cost->empty() && in.engine != nullptr);
  // Candidate extra tokens: (expected gain, request). A request's gains decrease with the
  // position, so taking the largest gains first never skips a position.
  struct Gain {
    double expected;
    size_t candidate;
  };
  std::vector<Gain> gains;
  constexpr double kPrior = 4.0;  // pseudo-drafts at the engine's rate
  constexpr double kScalePrior = 2.0;  // expected tokens at which the confidences are believed as given
  for (size_t c = 0; c < in.candidates.size(); ++c) {
    const SpecCandidate& cand = in.candidates[c];
    double p = 1.0;
    for (int32_t i = 1; i <= std::min(cand.max_tokens, AcceptanceStats::kMaxPositions); ++i) {
      // The engine's own rate, itself starting from an even prior until drafts are seen.
      if (static_cast<size_t>(i) <= cand.confidences.size()) {
        const double scale = in.engine->ConfidenceScale(i, kScalePrior);
        p *= std::clamp(static_cast<double>(cand.confidences[i - 1]) * scale, 0.0, 0.995);
      } else {
        const double engine_rate = in.engine->Conditional(i, 0.5, 1.0);
        p *= std::min(0.995, cand.stats != nullptr ? cand.stats->Conditional(i, engine_rate, kPrior) : engine_rate);
      }
      gains.push_back({p, c});
    }
  }
  std::stable_sort(gains.begin(), gains.end(), [](const Gain& a, const Gain& b) { return a.expected > b.expected; });
  const double base_rate =
      static_cast<double>(in.base_emitted) /
      (in.cost->Seconds(std::max<int64_t>(1, in.base_tokens)) + (in.propose_paid_anyway ? in.propose_seconds : 0.0));
  double best_rate = base_rate * kMinGain;
  size_t best_m = 0;
  double emitted = static_cast<double>(in.base_emitted);
  std::vector<int32_t> taken(in.candidates.size(), 0);
  int32_t longest = 0;
  for (size_t m = 1; m <= gains.size(); ++m) {
    emitted += gains[m - 1].expected;
    longest = std::max(longest, ++taken[gains[m - 1].candidate]);
    const double seconds = in.cost->Seconds(in.base_tokens + static_cast<int64_t>(m)) + in.propose_seconds +
                           in.propose_seconds_per_position * longest;
    const double rate = emitted / seconds;
    if (rate > best_rate) {
      best_rate = rate;
      best_m = m;
    }
  }
  for (size_t m = 0; m < best_m; ++m) ++plan[gains[m].candidate];
  out.base_rate = base_rate;
  out.rate = best_m > 0 ? best_rate : base_rate;
  return out;
}

}  // namespace ember
