// The row ops against straightforward double-precision formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/ops.h"

namespace ember::kernels {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(OpsTest, RmsNormVariantsMatchFormula) {
  const int64_t rows = 3, n = 37;
  const auto x = Random(rows * n, 1, 3.0f);
  const auto gain = Random(n, 2);
  std::vector<float> plain(rows * n), with_gain(rows * n), gain_first(rows * n);
  RmsNorm(x.data(), rows, n, 1e-5f, plain.data());
  RmsNormGain(x.data(), rows, n, 1e-5f, gain.data(), with_gain.data());
  GainRmsNorm(x.data(), rows, n, 1e-8f, gain.data(), gain_first.data());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0, ss_gain = 0;
    for (int64_t i = 0; i < n; ++i) {
      ss += double(x[r * n + i]) * x[r * n + i];
      const double t = double(x[r * n + i]) * gain[i];
      ss_gain += t * t;
    }
    const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
    const double inv_gain = 1.0 / std::sqrt(ss_gain / n + 1e-8);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(plain[r * n + i], x[r * n + i] * inv, 1e-5);
      EXPECT_NEAR(with_gain[r * n + i], x[r * n + i] * inv * gain[i], 1e-5);
      EXPECT_NEAR(gain_first[r * n + i], x[r * n + i] * gain[i] * inv_gain, 1e-5);
    }
  }
}

TEST(OpsTest, RopeRotatesHalvesByPositionAngle) {
  const int64_t heads = 2, d = 8;
  std::vector<float> inv_freq(d / 2);
  RopeInverseFrequencies(10000.0, d, inv_freq.data());
  EXPECT_FLOAT_EQ(inv_freq[0], 1.0f);
  EXPECT_NEAR(inv_freq[1], std::pow(10000.0, -0.25), 1e-7);
  auto x = Random(2 * heads * d, 3);
  const auto original = x;
  const int64_t positions[2] = {0, 5};
  RopeRotateHalf(x.data(), 2, heads, d, positions, inv_freq.data());
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t j = 0; j < d / 2; ++j) {
        const double angle = positions[r] * double(inv_freq[j]);
        const float* in = original.data() + (r * heads + h) * d;
        const float* out = x.data() + (r * heads + h) * d;
        EXPECT_NEAR(out[j], in[j] * std::cos(angle) - in[j + d / 2] * std::sin(angle), 1e-5);
        EXPECT_NEAR(out[j + d / 2], in[j + d / 2] * std::cos(angle) + in[j] * std::sin(angle), 1e-5);
      }
    }
  }
}

TEST(OpsTest, InterleavedRopeEqualsRotateHalfOnPermutedRows) {
  // GGUF llama converters permute each head's rows from [x0..x(d/2-1), y0..] to [x0, y0, x1, y1, ..]:
  // interleaved RoPE on the permuted layout must equal rotate-half RoPE on the original.
  const int64_t heads = 3, d = 16;
  std::vector<float> inv_freq(d / 2);
  RopeInverseFrequencies(500000.0, d, inv_freq.data());
  const auto x = Random(heads * d, 11);
  std::vector<float> permuted(x.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < d / 2; ++j) {
      permuted[h * d + 2 * j] = x[h * d + j];
      permuted[h * d + 2 * j + 1] = x[h * d + j + d / 2];
    }
  auto half = x;
  const int64_t position = 37;
  RopeRotateHalf(half.data(), 1, heads, d, &position, inv_freq.data());
  RopeInterleaved(permuted.data(), 1, heads, d, &position, inv_freq.data());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < d / 2; ++j) {
      EXPECT_FLOAT_EQ(permuted[h * d + 2 * j], half[h * d + j]);
      EXPECT_FLOAT_EQ(permuted[h * d + 2 * j + 1], half[h * d + j + d / 2]);
    }
}

TEST(OpsTest, GeGluTanhMatchesFormula) {
  const float gate[3] = {-3.0f, 0.5f, 2.0f};
  const float up[3] = {1.0f, 2.0f, -1.5f};
  float out[3];
  GeGluTanh(gate, up, 1, 3, out);
  for (int i = 0; i < 3; ++i) {
    const double g = gate[i];
    const double gelu = 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
    EXPECT_NEAR(out[i], gelu * up[i], 1e-6);
  }
}

TEST(OpsTest, SwiGluAndSoftcap) {
  const float gate_up[4] = {1.0f, -2.0f, 3.0f, 0.5f};  // one row: gate {1,-2}, up {3,0.5}
  float out[2];
  SwiGluHalves(gate_up, 1, 2, out);
  EXPECT_NEAR(out[0], 1.0 / (1 + std::exp(-1.0)) * 3.0, 1e-6);
  EXPECT_NEAR(out[1], -2.0 / (1 + std::exp(2.0)) * 0.5, 1e-6);
  float logits[3] = {0.0f, 100.0f, -1000.0f};
  ScaleSoftcapInPlace(logits, 3, 0.5f, 20.0f);
  EXPECT_FLOAT_EQ(logits[0], 0.0f);
  EXPECT_NEAR(logits[1], 20.0 * std::tanh(50.0 / 20.0), 1e-5);
  EXPECT_NEAR(logits[2], -20.0, 1e-5);
}

}  // namespace
}  // namespace ember::kernels
