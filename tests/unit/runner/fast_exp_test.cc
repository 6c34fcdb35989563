#include "runner/sampler/fast_exp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace ember {
namespace {

TEST(FastExpTest, WithinTwoUlpsOverTheWholeRange) {
  double worst = 0.0;
  for (float x = -87.29f; x <= 88.0f; x += 0.000917f) {
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(FastExp(x) - want) / want);
  }
  EXPECT_LT(worst, 2.5e-7);  // 2 float ulps are 2.4e-7 at worst
  EXPECT_EQ(FastExp(0.0f), 1.0f);
}

TEST(FastExpTest, TinyAndMaskedInputsGiveZero) {
  EXPECT_EQ(FastExp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(FastExp(-87.31f), 0.0f);
  EXPECT_EQ(FastExp(-1e30f), 0.0f);
  EXPECT_GT(FastExp(-87.3f), 0.0f);
}

TEST(FastExpTest, RowHelpersMatchScalarLoops) {
  std::vector<float> in(3001);
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(static_cast<float>(i)) * 20.0f;
  in[17] = -std::numeric_limits<float>::infinity();
  std::vector<float> out(in.size());
  ExpShifted(in, 20.0f, 0.5f, out.data());
  double sum = 0.0;
  float max = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i], FastExp((in[i] - 20.0f) * 0.5f)) << i;
    sum += out[i];
    max = std::max(max, in[i]);
  }
  EXPECT_NEAR(LaneSum(out.data(), static_cast<int64_t>(out.size())), sum, 1e-12 * sum);
  EXPECT_NEAR(SumExpShifted(in, 20.0f, 0.5f), sum, 1e-12 * sum);
  EXPECT_EQ(MaxValue(in), max);
  EXPECT_EQ(MaxValue(std::vector<float>{-3.5f, -0.25f, -7.0f, -0.5f}), -0.25f);
  EXPECT_EQ(MaxValue(std::vector<float>{-1e-30f, -0.0f, -2.0f}), 0.0f);
  EXPECT_EQ(MaxValue(std::vector<float>{}), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(MaxValue(std::vector<float>(5, -std::numeric_limits<float>::infinity())),
            -std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace ember
