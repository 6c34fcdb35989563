// Linear::ApplyShared (a layer's q/k/v or gate/up on one input, quantized once): every output is
// bitwise what Linear::Apply gives that matrix alone, for GGUF types whose activation rows are
// shared (Q4_1 / Q5_0 / Q8_0 read Q8_0 rows, Q4_K / Q6_K read Q8_K rows), FP4 block-scaled
// matrices (NVFP4 and MXFP4 read the same int8 rows, packed GEMM or row dots), and mixes with
// dense and FP8 matrices that quantize nothing; at one token (decode), a few (verification) and
// a prefill's worth, on every ISA level the host runs.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/dtypes.h"
#include "core/isa.h"
#include "model/linear.h"
#include "model/tensor_parallel.h"
#include "support/isa_level_restorer.h"
#include "support/random_values.h"
#include "unit/quant/quant_test_util.h"

namespace ember {
namespace {

constexpr int64_t kIn = 512;  // a multiple of Q8_K's 256 and every block size

struct Owned {
  std::vector<uint8_t> bytes;
  Linear linear;
};

Owned Gguf(GgmlType type, int64_t out, uint32_t seed) {
  std::mt19937 rng(seed);
  Owned o;
  const int64_t row_bytes = quant::test_util::RowBytes(type, kIn);
  for (int64_t r = 0; r < out; ++r) {
    const std::vector<uint8_t> row = quant::test_util::RandomRow(type, kIn, rng);
    o.bytes.insert(o.bytes.end(), row.begin(), row.end());
  }
  o.linear = Linear::Quantized({type, o.bytes.data(), out, kIn, row_bytes});
  return o;
}

Owned Dense(int64_t out, uint32_t seed) {
  Owned o;
  const std::vector<float> f = test::NormalValues(out * kIn, seed);
  o.bytes.resize(f.size() * 2);
  auto* w = reinterpret_cast<uint16_t*>(o.bytes.data());
  for (size_t i = 0; i < f.size(); ++i) w[i] = F32ToBF16(f[i]);
  o.linear = Linear::Dense({DType::kBF16, Shape({out, kIn}), o.bytes.data()});
  return o;
}

Owned BlockScaled(quant::WeightFormat format, int64_t out, uint32_t seed) {
  const std::vector<float> f = test::NormalValues(out * kIn, seed);
  auto q = QuantizeLinear({DType::kF32, Shape({out, kIn}), f.data()}, format, quant::Mxfp4ScaleRounding::kEven,
                          MatrixSplit::Whole());
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  return {{}, std::move(*q)};
}

// Each matrix applied alone, then all together: the same bits.
void ExpectSharedEqualsSeparate(const std::vector<const Owned*>& mats) {
  std::vector<const Linear*> linears;
  for (const Owned* m : mats) linears.push_back(&m->linear);
  for (const int64_t m : {1, 5, 40}) {
    const std::vector<float> x = test::NormalValues(m * kIn, 11 + static_cast<uint32_t>(m));
    std::vector<std::vector<float>> want, got;
    std::vector<float*> outs;
    for (const Linear* l : linears) {
      want.emplace_back(m * l->out_features());
      l->Apply(x.data(), m, want.back().data());
      got.emplace_back(m * l->out_features(), -1.0f);
    }
    for (auto& g : got) outs.push_back(g.data());
    Linear::ApplyShared(linears, x.data(), m, outs);
    for (size_t i = 0; i < linears.size(); ++i) {
      ASSERT_EQ(0, std::memcmp(want[i].data(), got[i].data(), want[i].size() * sizeof(float)))
          << "matrix " << i << " at m = " << m << " (" << IsaName(ActiveIsa()) << ")";
    }
  }
}

class LinearApplyShared : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!SelectIsa(IsaName(GetParam())).ok()) GTEST_SKIP() << IsaName(GetParam()) << " is not available here";
  }
  test::IsaLevelRestorer restore_;
};

TEST_P(LinearApplyShared, QkvOfTheLegacyTypesShareQ8_0Rows) {
  const Owned q = Gguf(GgmlType::kQ4_1, 48, 1), k = Gguf(GgmlType::kQ5_0, 16, 2), v = Gguf(GgmlType::kQ8_0, 16, 3);
  ExpectSharedEqualsSeparate({&q, &k, &v});
}

TEST_P(LinearApplyShared, KQuantsShareQ8_KRowsBesideALegacyType) {
  const Owned a = Gguf(GgmlType::kQ4_K, 32, 4), b = Gguf(GgmlType::kQ6_K, 24, 5), c = Gguf(GgmlType::kQ4_0, 16, 6);
  ExpectSharedEqualsSeparate({&a, &b, &c});
}

TEST_P(LinearApplyShared, Fp4FormatsShareInt8RowsBesideDenseAndFp8) {
  const Owned nv = BlockScaled(quant::WeightFormat::kNvfp4, 48, 7);
  const Owned mx = BlockScaled(quant::WeightFormat::kMxfp4, 32, 8);
  const Owned fp8 = BlockScaled(quant::WeightFormat::kFp8E4m3, 16, 9);
  const Owned dense = Dense(16, 10);
  ExpectSharedEqualsSeparate({&nv, &mx, &fp8, &dense});
}

TEST_P(LinearApplyShared, GateAndUpOfOneType) {
  const Owned gate = Gguf(GgmlType::kQ4_1, 64, 11), up = Gguf(GgmlType::kQ4_1, 64, 12);
  ExpectSharedEqualsSeparate({&gate, &up});
}

INSTANTIATE_TEST_SUITE_P(Isas, LinearApplyShared, ::testing::Values(Isa::kGeneric, Isa::kAvx2, Isa::kAvx512, Isa::kAmx),
                         [](const auto& info) { return std::string(IsaName(info.param)); });

TEST(LinearApplySharedDeathTest, InputsOfDifferentWidthsAreABug) {
  const Owned a = Dense(8, 1);
  Owned b;
  const std::vector<float> f = test::NormalValues(8 * 256, 2);
  b.linear = Linear::Dense({DType::kF32, Shape({8, 256}), f.data()});
  const Linear* both[] = {&a.linear, &b.linear};
  std::vector<float> x(kIn), y1(8), y2(8);
  float* outs[] = {y1.data(), y2.data()};
  EXPECT_DEATH(Linear::ApplyShared(both, x.data(), 1, outs), "inputs of");
}

}  // namespace
}  // namespace ember
