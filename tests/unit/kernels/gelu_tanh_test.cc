// Every variant's GeGluTanh against a double-precision GELU, and its per-element independence
// (the same bits wherever an element sits in the array, the batch-invariance contract).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/variants.h"

namespace ember::kernels {
namespace {

double GeluDouble(double g, double* two_u) {
  const double u = std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g);
  *two_u = 2 * u;
  return g / (1 + std::exp(-2 * u));  // = 0.5 g (1 + tanh(u)), without the cancellation
}

// g from -12 to 12 in steps of 1/512, plus 0 and extremes that hit the exp clamp.
std::vector<float> Gates() {
  std::vector<float> g;
  for (int i = -12 * 512; i <= 12 * 512; ++i) g.push_back(static_cast<float>(i) / 512.0f);
  for (float x : {1e-30f, -1e-30f, 30.0f, -30.0f, 1e4f, -1e4f, 3e38f, -3e38f}) g.push_back(x);
  return g;
}

TEST(GeluTanhTest, EveryVariantMatchesDoubleGelu) {
  const std::vector<float> gate = Gates();
  const std::vector<float> up(gate.size(), 1.0f);
  for (const Isa isa : AvailableIsas()) {
    SCOPED_TRACE(IsaName(isa));
    const KernelVariant* v = &kKernelVariants.For(isa);
    std::vector<float> out(gate.size());
    v->geglu_tanh(gate.data(), up.data(), static_cast<int64_t>(gate.size()), out.data());
    double worst = 0;
    const bool simd = isa >= Isa::kAvx2;
    for (size_t i = 0; i < gate.size(); ++i) {
      double two_u;
      const double want = GeluDouble(gate[i], &two_u);
      // libm's 1 + tanh(u) cancels for negative g: only the SIMD variants meet the relative
      // bound there, the reference gets an absolute one. Near the exp clamp (-2u = 88.3) the
      // SIMD result is g / 2e38 rather than ~0.
      const double bound =
          simd ? 2.4e-7 * std::fabs(want) * (1 + std::fabs(std::min(two_u, 200.0))) + 1e-35
               : 2.4e-7 * std::fabs(want) * (1 + std::fabs(std::min(two_u, 200.0))) + 2e-7;
      ASSERT_LE(std::fabs(out[i] - want), bound) << "g = " << gate[i];
      if (std::fabs(want) > 1e-3) worst = std::max(worst, std::fabs(out[i] - want) / std::fabs(want));
    }
    if (simd) {
      EXPECT_LT(worst, 1.5e-6);  // measured 1.08e-6, at g ~ -3.6 where |2u| ~ 11
    }
  }
}

TEST(GeluTanhTest, SimdVariantsStayWithinAFewUlpOfLibmWhereGeluIsNotTiny) {
  const std::vector<float> gate = Gates();
  const std::vector<float> up(gate.size(), 1.0f);
  std::vector<float> libm(gate.size());
  kRefVariant.geglu_tanh(gate.data(), up.data(), static_cast<int64_t>(gate.size()), libm.data());
  for (const Isa isa : AvailableIsas()) {
    SCOPED_TRACE(IsaName(isa));
    const KernelVariant* v = &kKernelVariants.For(isa);
    std::vector<float> out(gate.size());
    v->geglu_tanh(gate.data(), up.data(), static_cast<int64_t>(gate.size()), out.data());
    for (size_t i = 0; i < gate.size(); ++i) {
      if (gate[i] < -1.0f || std::fabs(gate[i]) > 13.0f) continue;  // libm's cancellation region
      EXPECT_NEAR(out[i], libm[i], 8 * std::numeric_limits<float>::epsilon() * std::fabs(libm[i]) + 1e-30)
          << "g = " << gate[i];
    }
  }
}

TEST(GeluTanhTest, ElementResultDoesNotDependOnItsPositionOrTheCount) {
  std::vector<float> gate(37), up(37);
  for (int i = 0; i < 37; ++i) {
    gate[i] = 0.37f * static_cast<float>(i) - 6.0f;
    up[i] = 1.0f + 0.01f * static_cast<float>(i);
  }
  for (const Isa isa : AvailableIsas()) {
    SCOPED_TRACE(IsaName(isa));
    const KernelVariant* v = &kKernelVariants.For(isa);
    std::vector<float> whole(37);
    v->geglu_tanh(gate.data(), up.data(), 37, whole.data());
    for (int start = 0; start < 37; ++start) {
      for (int count : {1, 3, 8, 17}) {
        if (start + count > 37) continue;
        std::vector<float> part(count);
        v->geglu_tanh(gate.data() + start, up.data() + start, count, part.data());
        EXPECT_EQ(0, std::memcmp(part.data(), whole.data() + start, count * sizeof(float)))
            << "start " << start << " count " << count;
      }
    }
  }
}

}  // namespace
}  // namespace ember::kernels
