// Every variant's softmax exp (KernelVariant::softmax_exp: what paged attention computes its
// weights with) against a double exp over its whole domain, x <= 0, and at the values the
// online softmax relies on exactly: e^0 = 1 (an unchanged running max rescales by exactly 1),
// e^-inf = 0 (keys a query does not see, and a query's first chunk), 0 below the polynomial's
// range, NaN kept.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/gelu_tanh.h"
#include "kernels/matmul.h"
#include "kernels/variants.h"

namespace ember::kernels {
namespace {

// x from kExpMin to 0: a uniform sweep, every float in [-2^-10, 0] near 0 (where the relative
// error of e^x is that of the polynomial alone) and random points.
std::vector<float> Inputs() {
  std::vector<float> x;
  for (int i = 0; i <= 1 << 20; ++i) x.push_back(cpu::kExpMin * static_cast<float>(i) / static_cast<float>(1 << 20));
  for (float v = -std::ldexp(1.0f, -10); v < 0; v = std::nextafter(v, 0.0f)) {
    if (x.size() > (4u << 20)) break;
    x.push_back(v);
  }
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(cpu::kExpMin, 0.0f);
  for (int i = 0; i < 1 << 20; ++i) x.push_back(uniform(rng));
  return x;
}

TEST(SoftmaxExpTest, EveryVariantIsWithinTwoUlpOfExp) {
  const std::vector<float> x = Inputs();
  for (const Isa isa : AvailableIsas()) {
    SCOPED_TRACE(IsaName(isa));
    std::vector<float> out(x.size());
    kKernelVariants.For(isa).softmax_exp(x.data(), static_cast<int64_t>(x.size()), out.data());
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = std::exp(static_cast<double>(x[i]));
      const double error = std::fabs(out[i] - want) / want;
      worst = std::max(worst, error);
      // 2 ulp of a float in [1, 2): 2^-22 relative. Measured: ~1.2e-7 (1 ulp) for the
      // polynomial variants, 0.5 ulp for libm (ref).
      ASSERT_LE(error, std::ldexp(1.0, -22)) << "x = " << x[i] << " got " << out[i] << " want " << want;
    }
    std::printf("[ %s ] worst relative error of e^x on [kExpMin, 0]: %.3g\n", std::string(IsaName(isa)).c_str(),
                worst);
  }
}

TEST(SoftmaxExpTest, ExactWhereTheOnlineSoftmaxNeedsIt) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {0.0f, -inf, -88.0f, -100.0f, -1e30f, std::nanf(""), -0.0f};
  for (const Isa isa : AvailableIsas()) {
    SCOPED_TRACE(IsaName(isa));
    std::vector<float> out(x.size());
    kKernelVariants.For(isa).softmax_exp(x.data(), static_cast<int64_t>(x.size()), out.data());
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[1], 0.0f);
    EXPECT_TRUE(std::isnan(out[5]));
    EXPECT_EQ(out[6], 1.0f);
    if (isa != Isa::kRef) {  // libm returns the subnormal e^-88, ~0 for the others
      EXPECT_EQ(out[2], 0.0f);
      EXPECT_EQ(out[3], 0.0f);
      EXPECT_EQ(out[4], 0.0f);
    }
  }
}

// Each element's result depends on its value only, not where it sits in the array (tails).
TEST(SoftmaxExpTest, ElementsAreIndependent) {
  std::vector<float> x(37);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -0.37f * static_cast<float>(i);
  for (const Isa isa : AvailableIsas()) {
    SCOPED_TRACE(IsaName(isa));
    std::vector<float> all(x.size());
    kKernelVariants.For(isa).softmax_exp(x.data(), static_cast<int64_t>(x.size()), all.data());
    for (size_t i = 0; i < x.size(); ++i) {
      float one;
      kKernelVariants.For(isa).softmax_exp(x.data() + i, 1, &one);
      EXPECT_EQ(std::memcmp(&one, &all[i], sizeof(float)), 0) << i;
    }
  }
}

}  // namespace
}  // namespace ember::kernels
