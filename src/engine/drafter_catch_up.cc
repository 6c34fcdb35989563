#include "engine/drafter_catch_up.h"

#include <algorithm>

namespace ember {

namespace {
constexpr double kDecay = 0.8;  // about the last 5 observations count
double Blend(double average, double sample) { return average == 0.0 ? sample : kDecay * average + (1.0 - kDecay) * sample; }
}  // namespace

bool DrafterCatchUp::Pays(const Candidate& c) const {
  if (c.behind <= kCurrent) return true;
  const double cost = static_cast<double>(c.behind) * seconds_per_token_;
  if (!c.saving_per_token) return !c.another_is_current;  // learning: one request at a time
  const double margin = c.saving_predicted ? kPredictionMargin : 1.0;
  return margin * cost < *c.saving_per_token * ExpectedTokensLeft(c.emitted, c.room);
}

double DrafterCatchUp::ExpectedTokensLeft(int64_t emitted, int64_t room) const {
  const double e = static_cast<double>(emitted);
  // A request that already outlived the typical one is expected to go on about as long again.
  const double left = mean_output_tokens_ > 0.0 ? std::max(mean_output_tokens_ - e, e) : e;
  return std::clamp(left, 0.0, static_cast<double>(std::max<int64_t>(0, room)));
}

void DrafterCatchUp::ObserveCatchUp(int64_t tokens, double seconds) {
  // Small catch-ups are mostly the fixed cost of a forward: they would understate a prompt's.
  if (tokens <= kCurrent || !(seconds > 0.0)) return;
  seconds_per_token_ = Blend(seconds_per_token_, seconds / static_cast<double>(tokens));
}

void DrafterCatchUp::ObserveFinished(int64_t output_tokens) {
  if (output_tokens > 0) mean_output_tokens_ = Blend(mean_output_tokens_, static_cast<double>(output_tokens));
}

}  // namespace ember
