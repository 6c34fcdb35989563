#include "runner/sampler/verify.h"

#include <algorithm>

#include "core/check.h"
#include "core/counter_random.h"

namespace ember {
namespace {

// Streams of their own, so the acceptance and residual draws never reuse the plain draw of the
// same token (that one is for the bonus token after a fully accepted draft).
constexpr uint64_t kAcceptStream = 0xA5A5'0D15'7EA1'0001ull;
constexpr uint64_t kResidualStream = 0x5A5A'0D15'7EA1'0002ull;

// Weight of `token` in the filtered distribution (0 when it was filtered out).
double WeightOf(const FilteredDistribution& d, int32_t token) {
  if (d.all_tokens) return d.weights[static_cast<size_t>(token)];
  const auto first = d.ids.begin(), last = d.ids.begin() + d.count;
  const auto it = std::lower_bound(first, last, token);
  return it != last && *it == token ? d.weights[static_cast<size_t>(it - first)] : 0.0;
}

}  // namespace

VerifyDecision VerifyAgainstDistribution(const FilteredDistribution& target, int32_t draft_token,
                                         std::span<const float> q, uint64_t seed, int64_t token_index,
                                         std::vector<double>* residual) {
  EMBER_CHECK(target.total > 0.0);
  EMBER_CHECK(draft_token >= 0 && static_cast<size_t>(draft_token) < q.size());
  const double p_x = WeightOf(target, draft_token) / target.total;
  const double q_x = q[static_cast<size_t>(draft_token)];
  // Accept with probability min(1, p / q): u * q < p. A token the drafter could not have drawn
  // (q = 0) is never accepted.
  if (q_x > 0.0 && SamplingUniform(seed ^ kAcceptStream, token_index) * q_x < p_x) return {true, draft_token};

  // The residual over the target's kept tokens (elsewhere p is 0, so max(p - q, 0) is too).
  const int64_t n = target.size();
  residual->resize(static_cast<size_t>(n));
  double mass = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = target.id(i);
    const double r = std::max(0.0, target.weights[static_cast<size_t>(i)] / target.total - q[static_cast<size_t>(id)]);
    (*residual)[static_cast<size_t>(i)] = r;
    mass += r;
  }
  const double u = SamplingUniform(seed ^ kResidualStream, token_index);
  if (mass <= 1e-8) {
    // p and q agree (up to rounding): the rejection had no residual to come from; draw from p.
    return {false, SampleFromDistribution(target, u)};
  }
  const double goal = u * mass;
  double cumulative = 0.0;
  int64_t last_positive = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double r = (*residual)[static_cast<size_t>(i)];
    if (r <= 0.0) continue;
    last_positive = i;
    cumulative += r;
    if (cumulative > goal) return {false, target.id(i)};
  }
  return {false, target.id(last_positive)};  // u * mass rounded up to the whole mass
}

}  // namespace ember
