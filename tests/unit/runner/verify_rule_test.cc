// The standard speculative-sampling rule (runner/sampler/verify.h) on its own: over many
// counter-based draws, the emitted token follows the target distribution p exactly (chi-square),
// whatever the drafter's q, and the acceptance rate is sum_x min(p(x), q(x)), the rule's known
// acceptance (Leviathan et al. 2023, Theorem 3.5's alpha).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runner/sampler/top_k_top_p.h"
#include "runner/sampler/verify.h"

namespace ember {
namespace {

constexpr int kVocab = 12;
constexpr int kDraws = 60000;

// Chi-square critical value at tail 1e-3 (Wilson-Hilferty).
double Critical(int df) {
  const double z = 3.0902, k = df;
  const double t = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
  return k * t * t * t;
}

struct Case {
  const char* name;
  float temperature;
  int32_t top_k;
  std::vector<float> q;  // the drafter's distribution (normalised below)
};

class VerifyRule : public ::testing::TestWithParam<int> {};

TEST_P(VerifyRule, EmitsTheTargetDistributionAndAcceptsSumOfMinima) {
  std::mt19937 rng(GetParam());
  std::vector<float> logits(kVocab);
  for (float& l : logits) l = std::normal_distribution<float>(0.0f, 1.5f)(rng);
  const std::vector<Case> cases = {
      {"q close to p", 1.0f, 0, {}},
      {"q concentrated elsewhere", 0.7f, 0, {}},
      {"q on tokens top-k removed", 1.0f, 4, {}},
  };
  for (Case c : cases) {
    FilterScratch scratch;
    FilteredDistribution p;
    ASSERT_TRUE(FilterDistribution(logits, c.temperature, c.top_k, 1.0f, 0.0f, &scratch, &p));
    std::vector<double> pd(kVocab, 0.0);
    for (int64_t i = 0; i < p.size(); ++i) pd[p.id(i)] = p.weights[i] / p.total;
    // The drafter's q for this case.
    std::vector<float> q(kVocab);
    for (int v = 0; v < kVocab; ++v) {
      if (std::string(c.name) == "q close to p") q[v] = static_cast<float>(pd[v] * 0.8 + 0.2 / kVocab);
      else q[v] = (v * 7 + GetParam()) % kVocab < 3 ? 1.0f : 0.01f;  // most mass on three tokens
    }
    double qs = 0;
    for (float x : q) qs += x;
    for (float& x : q) x = static_cast<float>(x / qs);
    std::discrete_distribution<int> draw_q(q.begin(), q.end());

    std::vector<int> emitted(kVocab, 0);
    int accepted = 0;
    std::vector<double> residual;
    for (int n = 0; n < kDraws; ++n) {
      const int32_t x = draw_q(rng);
      const VerifyDecision d = VerifyAgainstDistribution(p, x, q, 12345 + GetParam(), n, &residual);
      accepted += d.accepted;
      if (d.accepted) {
        EXPECT_EQ(d.token_id, x);
      }
      ++emitted[d.token_id];
    }
    double chi = 0;
    int df = -1;
    for (int v = 0; v < kVocab; ++v) {
      const double expected = pd[v] * kDraws;
      if (expected == 0) {
        EXPECT_EQ(emitted[v], 0) << c.name << ": a token the target removed was emitted";
        continue;
      }
      chi += (emitted[v] - expected) * (emitted[v] - expected) / expected;
      ++df;
    }
    EXPECT_LT(chi, Critical(df)) << c.name << ": chi-square " << chi << " on " << df << " df";
    double alpha = 0;
    for (int v = 0; v < kVocab; ++v) alpha += std::min<double>(pd[v], q[v]);
    // Binomial standard error at 60k draws is under 0.21%: 1% is many of them.
    EXPECT_NEAR(static_cast<double>(accepted) / kDraws, alpha, 0.01) << c.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, VerifyRule, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace ember
