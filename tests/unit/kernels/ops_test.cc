// The row ops and attention against straightforward double-precision formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/attention.h"
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

// Naive attention in double for one query row, used as the oracle.
std::vector<double> NaiveAttention(const std::vector<float>& q, int64_t row, int64_t position,
                                   const std::vector<float>& k, const std::vector<float>& v,
                                   const AttentionShape& s) {
  const int64_t d = s.head_dim, kv_width = s.num_kv_heads * d;
  std::vector<double> out(s.num_heads * d, 0.0);
  for (int64_t h = 0; h < s.num_heads; ++h) {
    const int64_t kvh = h / (s.num_heads / s.num_kv_heads);
    std::vector<double> scores;
    std::vector<int64_t> keys;
    for (int64_t j = 0; j <= position; ++j) {
      if (s.window > 0 && j <= position - s.window) continue;
      double dot = 0;
      for (int64_t t = 0; t < d; ++t) dot += double(q[row * s.num_heads * d + h * d + t]) * k[j * kv_width + kvh * d + t];
      scores.push_back(dot * s.scale);
      keys.push_back(j);
    }
    double mx = -1e300, total = 0;
    for (double sc : scores) mx = std::max(mx, sc);
    for (double& sc : scores) total += (sc = std::exp(sc - mx));
    for (size_t i = 0; i < keys.size(); ++i) {
      for (int64_t t = 0; t < d; ++t) out[h * d + t] += scores[i] / total * v[keys[i] * kv_width + kvh * d + t];
    }
  }
  return out;
}

TEST(AttentionTest, CausalSlidingWindowAndGqaMatchNaive) {
  AttentionShape s;
  s.num_heads = 6;
  s.num_kv_heads = 2;
  s.head_dim = 16;
  s.scale = 0.25f;
  const int64_t total = 23, first = 9, m = total - first;
  const auto k = Random(total * s.num_kv_heads * s.head_dim, 4);
  const auto v = Random(total * s.num_kv_heads * s.head_dim, 5);
  const auto q = Random(m * s.num_heads * s.head_dim, 6);
  for (int64_t window : {-1, 1, 4, 9, 100}) {
    s.window = window;
    std::vector<float> out(m * s.num_heads * s.head_dim);
    CausalAttention(q.data(), m, first, k.data(), v.data(), s.num_kv_heads * s.head_dim, s, out.data());
    for (int64_t r = 0; r < m; ++r) {
      const auto expected = NaiveAttention(q, r, first + r, k, v, s);
      for (size_t i = 0; i < expected.size(); ++i) {
        ASSERT_NEAR(out[r * s.num_heads * s.head_dim + i], expected[i], 1e-5) << "window " << window;
      }
    }
  }
}

// A window of 1 sees only the query's own key: the output is exactly its value row.
TEST(AttentionTest, WindowOfOneReturnsOwnValue) {
  AttentionShape s{2, 1, 4, 1.0f, 1};
  const auto k = Random(5 * 4, 7);
  const auto v = Random(5 * 4, 8);
  const auto q = Random(2 * 8, 9);
  std::vector<float> out(2 * 8);
  CausalAttention(q.data(), 2, 3, k.data(), v.data(), 4, s, out.data());
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t t = 0; t < 4; ++t) EXPECT_FLOAT_EQ(out[r * 8 + h * 4 + t], v[(3 + r) * 4 + t]);
}

}  // namespace
}  // namespace ember::kernels
