// The AVX-512 and AVX2 activation quantizers produce the scalar quantizers' bytes exactly (the scalar
// Q8_0 one is checked against gguf-py in gguf_dequant_test.cc), on random rows and on the
// values where rounding, clamping and NaN handling can go wrong.
#include "quant/gguf_quantize_simd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "quant/gguf_dequant.h"
#include "quant/gguf_dot.h"

namespace ember::quant {
namespace {

// Blocks of 256 (a multiple of both block sizes): random rows at several scales, then blocks
// whose amax is 127 * 2^e so that d = 2^e and x * (1 / d) lands exactly on halves, next to
// halves, on the clamp, and on NaN / inf / -0 / subnormal inputs.
std::vector<float> Inputs() {
  std::vector<float> x;
  std::mt19937 rng(7);
  for (float scale : {1e-30f, 1e-3f, 1.0f, 30.0f, 1e30f}) {
    std::normal_distribution<float> dist(0.0f, scale);
    for (int j = 0; j < 1024; ++j) x.push_back(dist(rng));
  }
  const float below_half = std::nextafter(0.5f, 0.0f);
  for (float e : {1.0f, 0.25f, 1024.0f}) {
    std::vector<float> block(256);
    for (int j = 0; j < 256; ++j) {
      const float k = static_cast<float>(j % 127 - 63);
      switch (j % 4) {
        case 0: block[j] = (k + 0.5f) * e; break;
        case 1: block[j] = (k - 0.5f) * e; break;
        case 2: block[j] = (k + below_half) * e; break;
        default: block[j] = -(k + below_half) * e; break;
      }
    }
    block[0] = 127.0f * e;
    block[5] = -0.0f;
    block[9] = 126.5f * e;
    block[10] = -126.5f * e;
    x.insert(x.end(), block.begin(), block.end());
  }
  std::vector<float> odd(256, 0.0f);  // an all-zero block (d = 0), then specials
  x.insert(x.end(), odd.begin(), odd.end());
  odd[3] = std::numeric_limits<float>::quiet_NaN();
  odd[40] = std::numeric_limits<float>::infinity();
  odd[41] = -std::numeric_limits<float>::infinity();
  odd[42] = 1e-40f;
  odd[100] = 2.0f;
  x.insert(x.end(), odd.begin(), odd.end());
  std::fill(odd.begin(), odd.end(), 1e-44f);  // subnormal amax: 1 / d overflows to inf
  odd[7] = std::numeric_limits<float>::quiet_NaN();
  x.insert(x.end(), odd.begin(), odd.end());
  return x;
}

// Each vectorised quantizer, where the host runs it.
struct Quantizers {
  const char* name;
  bool (*available)();
  void (*q8_0)(const float* x, int64_t n, BlockQ8_0* blocks, uint8_t* sums);
  void (*q8_k)(const float* x, int64_t n, BlockQ8_K* out);
};

class GgufQuantizeSimdTest : public ::testing::TestWithParam<Quantizers> {
 protected:
  void SetUp() override {
    if (!GetParam().available()) GTEST_SKIP() << "no " << GetParam().name << " on this host";
  }
};

INSTANTIATE_TEST_SUITE_P(
    Isas, GgufQuantizeSimdTest,
    ::testing::Values(Quantizers{"avx512", [] { return HostCpuFeatures().HasAvx512Set(); },
                                 &QuantizeActivationQ8_0Avx512, &QuantizeRowQ8_KAvx512},
                      Quantizers{"avx2", [] { return HostCpuFeatures().HasAvx2Set(); }, &QuantizeActivationQ8_0Avx2,
                                 &QuantizeRowQ8_KAvx2}),
    [](const ::testing::TestParamInfo<Quantizers>& info) { return std::string(info.param.name); });

TEST_P(GgufQuantizeSimdTest, Q8_0ActivationRowIsBitExact) {
  const std::vector<float> x = Inputs();
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t bytes = ActivationRowBytes(GgmlType::kQ8_0, n);
  const int64_t sums_at = Q8_0BlockSumsOffset(n / 32);
  std::vector<uint8_t> scalar(bytes, 0xaa), simd(bytes, 0xaa);
  QuantizeActivationQ8_0(x.data(), n, reinterpret_cast<BlockQ8_0*>(scalar.data()), scalar.data() + sums_at);
  GetParam().q8_0(x.data(), n, reinterpret_cast<BlockQ8_0*>(simd.data()), simd.data() + sums_at);
  for (int64_t i = 0; i < bytes; ++i) ASSERT_EQ(scalar[i], simd[i]) << "byte " << i << " (block " << i / 34 << ")";
}

TEST_P(GgufQuantizeSimdTest, Q8_KRowIsBitExact) {
  const std::vector<float> x = Inputs();
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<BlockQ8_K> scalar(n / 256), simd(n / 256);
  std::memset(scalar.data(), 0xaa, scalar.size() * sizeof(BlockQ8_K));
  std::memset(simd.data(), 0xaa, simd.size() * sizeof(BlockQ8_K));
  QuantizeRowQ8_K(x.data(), n, scalar.data());
  GetParam().q8_k(x.data(), n, simd.data());
  for (size_t b = 0; b < scalar.size(); ++b)
    ASSERT_EQ(0, std::memcmp(&scalar[b], &simd[b], sizeof(BlockQ8_K))) << "block " << b;
}

TEST_P(GgufQuantizeSimdTest, HalfwayValuesRoundAwayFromZero) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // d = 1
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = -0.5f;
  x[5] = std::nextafter(0.5f, 0.0f);
  std::vector<uint8_t> row(ActivationRowBytes(GgmlType::kQ8_0, 32));
  GetParam().q8_0(x.data(), 32, reinterpret_cast<BlockQ8_0*>(row.data()), row.data() + Q8_0BlockSumsOffset(1));
  const auto& block = *reinterpret_cast<const BlockQ8_0*>(row.data());
  EXPECT_EQ(block.qs[0], 127);
  EXPECT_EQ(block.qs[1], 3);
  EXPECT_EQ(block.qs[2], -3);
  EXPECT_EQ(block.qs[3], 1);
  EXPECT_EQ(block.qs[4], -1);
  EXPECT_EQ(block.qs[5], 0);
}

}  // namespace
}  // namespace ember::quant
