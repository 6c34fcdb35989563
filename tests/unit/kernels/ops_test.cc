// The row ops against straightforward double-precision formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/isa.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace ember::kernels {
namespace cpu {
int64_t ExpfLibmAvx512(const float* x, int64_t count, float* out);  // cpu/avx512/swiglu_avx512.cc
}  // namespace cpu
namespace {

uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}
float FromBits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof(x));
  return x;
}

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

// SwiGlu gives the bits of Silu(g) * up with libm's expf (ops.cc) under every variant, at every
// thread count, in place or not, and on libm's special inputs (|g| >= 88, inf, nan).
TEST(OpsTest, SwiGluIsLibmSiluBitForBit) {
  std::vector<float> gate = Random(5000, 31, 4.0f);
  const std::vector<float> up = Random(5000, 32);
  std::mt19937 rng(33);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000; ++i) gate.push_back(FromBits(bits(rng)));
  for (float x : {88.0f, -88.0f, 87.99f, -87.99f, 100.0f, -104.0f, -1e30f, 1e30f, INFINITY, -INFINITY, NAN, 0.0f,
                  -0.0f, 1e-40f, -1e-40f}) {
    gate.push_back(x);
  }
  const int64_t n = static_cast<int64_t>(gate.size());
  std::vector<float> up_all(up);
  while (static_cast<int64_t>(up_all.size()) < n) up_all.push_back(static_cast<float>(up_all.size() % 7) - 3.0f);
  std::vector<float> want(gate.size());
  for (int64_t i = 0; i < n; ++i) want[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up_all[i];
  const Isa saved = ActiveIsa();
  for (const Isa isa : AvailableIsas()) {
    ASSERT_TRUE(SelectIsa(IsaName(isa)).ok());
    for (int threads : {1, 3}) {
      SCOPED_TRACE(std::string(IsaName(isa)) + " threads " + std::to_string(threads));
      ThreadPool::SetGlobalThreads(threads);
      for (int64_t count : {n, int64_t{1}, int64_t{17}, int64_t{4097}}) {
        std::vector<float> out(static_cast<size_t>(count));
        SwiGlu(gate.data(), up_all.data(), 1, count, out.data());
        std::vector<float> in_place(gate.begin(), gate.begin() + count);
        SwiGlu(in_place.data(), up_all.data(), 1, count, in_place.data());
        for (int64_t i = 0; i < count; ++i) {
          ASSERT_EQ(Bits(out[i]), Bits(want[i])) << "g = " << gate[i] << " i " << i;
          ASSERT_EQ(Bits(in_place[i]), Bits(want[i])) << "in place, g = " << gate[i];
        }
      }
    }
  }
  ThreadPool::SetGlobalThreads(0);
  ASSERT_TRUE(SelectIsa(IsaName(saved)).ok());
}

// The avx512 replica of glibc's expf against this process's expf on its main path (|x| < 88),
// sampled; EMBER_EXHAUSTIVE_EXPF=1 runs every such f32 (~2.2e9, a minute or so).
TEST(OpsTest, LibmExpfReplicaMatchesExpf) {
  if (!HostCpuFeatures().HasAvx512Set()) GTEST_SKIP() << "no AVX-512";
  const bool exhaustive = std::getenv("EMBER_EXHAUSTIVE_EXPF") != nullptr;
  std::vector<float> x, got;
  int64_t mismatches = 0, checked = 0;
  auto flush = [&] {
    got.assign(x.size(), 0.0f);
    ASSERT_GE(cpu::ExpfLibmAvx512(x.data(), static_cast<int64_t>(x.size()), got.data()), 0);
    for (size_t i = 0; i < x.size(); ++i) {
      if (!(std::fabs(x[i]) < 88.0f)) continue;
      ++checked;
      const float want = std::exp(x[i]);
      if (Bits(want) != Bits(got[i]) && ++mismatches < 10) ADD_FAILURE() << "x bits " << Bits(x[i]);
    }
    x.clear();
  };
  const uint32_t step = exhaustive ? 1u : 4093u;  // a prime: every mantissa pattern drifts through
  for (uint64_t b = 0; b < 0x42b00000u; b += step) {
    x.push_back(FromBits(static_cast<uint32_t>(b)));
    x.push_back(FromBits(static_cast<uint32_t>(b) | 0x80000000u));
    if (x.size() >= 1 << 16) flush();
  }
  flush();
  EXPECT_EQ(mismatches, 0) << "of " << checked;
  EXPECT_GT(checked, 500000);
}

}  // namespace
}  // namespace ember::kernels
