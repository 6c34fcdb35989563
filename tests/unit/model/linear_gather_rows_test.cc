// Linear::GatherRows (a drafter's lm_head over its draft vocabulary): the gathered matrix's
// products are bitwise the selected columns of the full matrix's, for dense (f32, bf16) and GGUF
// (Q8_0, repacked for the packed GEMM where the variant has one) weights, at one row and at several.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dtypes.h"
#include "model/linear.h"
#include "quant/gguf_blocks.h"
#include "quant/gguf_dequant.h"
#include "support/random_values.h"

namespace ember {
namespace {

constexpr int64_t kOut = 40, kIn = 64;
const std::vector<int32_t> kRows = {7, 0, 39, 12, 13, 5, 22, 31, 1, 38, 17, 20, 3, 26, 9, 33, 11};

std::vector<float> Random(int64_t n, uint32_t seed) { return test::NormalValues(n, seed); }

void ExpectGatheredColumns(const Linear& full) {
  auto gathered = full.GatherRows(kRows);
  ASSERT_TRUE(gathered.ok()) << gathered.status().ToString();
  ASSERT_EQ(gathered->out_features(), static_cast<int64_t>(kRows.size()));
  ASSERT_EQ(gathered->in_features(), kIn);
  for (const int64_t m : {1, 7}) {
    const std::vector<float> x = Random(m * kIn, 9);
    std::vector<float> want(m * kOut), got(m * kRows.size());
    full.Apply(x.data(), m, want.data());
    gathered->Apply(x.data(), m, got.data());
    for (int64_t i = 0; i < m; ++i) {
      for (size_t j = 0; j < kRows.size(); ++j) {
        ASSERT_EQ(got[i * kRows.size() + j], want[i * kOut + kRows[j]]) << "m " << m << " row " << i << " col " << j;
      }
    }
  }
  std::vector<float> row(kIn), want_row(kIn);
  ASSERT_TRUE(gathered->ReadRow(3, row.data()).ok());
  ASSERT_TRUE(full.ReadRow(kRows[3], want_row.data()).ok());
  EXPECT_EQ(row, want_row);
}

TEST(LinearGatherRows, DenseF32) {
  const std::vector<float> w = Random(kOut * kIn, 1);
  ExpectGatheredColumns(Linear::Dense({DType::kF32, Shape({kOut, kIn}), w.data()}));
}

TEST(LinearGatherRows, DenseBf16) {
  const std::vector<float> f = Random(kOut * kIn, 2);
  std::vector<uint16_t> w(f.size());
  for (size_t i = 0; i < f.size(); ++i) w[i] = F32ToBF16(f[i]);
  ExpectGatheredColumns(Linear::Dense({DType::kBF16, Shape({kOut, kIn}), w.data()}));
}

TEST(LinearGatherRows, GgufQ8_0) {
  const std::vector<float> f = Random(kOut * kIn, 3);
  const int64_t blocks = kIn / 32;
  std::vector<quant::BlockQ8_0> w(kOut * blocks);
  for (int64_t r = 0; r < kOut; ++r) quant::QuantizeRowQ8_0(f.data() + r * kIn, kIn, w.data() + r * blocks);
  const quant::QuantMatrix m{GgmlType::kQ8_0, w.data(), kOut, kIn,
                             blocks * static_cast<int64_t>(sizeof(quant::BlockQ8_0))};
  ExpectGatheredColumns(Linear::Quantized(m));
}

// QuantizedQ8_0: the rows are gguf-py's Q8_0 of the original's (bitwise what QuantizeRowQ8_0
// writes), and products stay within Q8_0's error of the dense ones.
TEST(LinearQuantizedQ8_0, RowsAreTheQ8_0OfTheOriginal) {
  const std::vector<float> f = Random(kOut * kIn, 5);
  std::vector<uint16_t> w(f.size());
  for (size_t i = 0; i < f.size(); ++i) w[i] = F32ToBF16(f[i]);
  const Linear dense = Linear::Dense({DType::kBF16, Shape({kOut, kIn}), w.data()});
  auto q = dense.QuantizedQ8_0();
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  std::vector<float> row(kIn), dense_row(kIn), want(kIn);
  std::vector<quant::BlockQ8_0> blocks(kIn / 32);
  for (int64_t r = 0; r < kOut; ++r) {
    ASSERT_TRUE(dense.ReadRow(r, dense_row.data()).ok());
    quant::QuantizeRowQ8_0(dense_row.data(), kIn, blocks.data());
    ASSERT_TRUE(quant::DequantizeRow(GgmlType::kQ8_0, blocks.data(), kIn, want.data()).ok());
    ASSERT_TRUE(q->ReadRow(r, row.data()).ok());
    ASSERT_EQ(row, want) << "row " << r;
  }
  const std::vector<float> x = Random(3 * kIn, 6);
  std::vector<float> exact(3 * kOut), got(3 * kOut);
  dense.Apply(x.data(), 3, exact.data());
  q->Apply(x.data(), 3, got.data());
  // Each weight and activation is off by at most 0.6 of its 32-block's step amax / 127 (half a
  // step, plus the step's own f16 rounding over 127 steps), so each product is off by at most
  // the sum of |x| dw + |w| dx + dx dw.
  auto step = [](const float* v) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(v[j]));
    return 0.6f * amax / 127.0f;
  };
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t r = 0; r < kOut; ++r) {
      ASSERT_TRUE(dense.ReadRow(r, dense_row.data()).ok());
      double bound = 0.0;
      for (int64_t b = 0; b < kIn; b += 32) {
        const float* xb = x.data() + i * kIn + b;
        const double dx = step(xb), dw = step(dense_row.data() + b);
        for (int j = 0; j < 32; ++j) bound += std::abs(xb[j]) * dw + std::abs(dense_row[b + j]) * dx + dx * dw;
      }
      EXPECT_NEAR(got[i * kOut + r], exact[i * kOut + r], bound + 1e-4) << "row " << i << " output " << r;
    }
  }
  const std::vector<float> narrow = Random(4 * 40, 7);
  EXPECT_FALSE(Linear::Dense({DType::kF32, Shape({4, 40}), narrow.data()}).QuantizedQ8_0().ok())
      << "40 columns are not whole 32-weight blocks";
}

TEST(LinearGatherRows, RowsOutsideTheMatrixAreErrors) {
  const std::vector<float> w = Random(kOut * kIn, 4);
  const Linear full = Linear::Dense({DType::kF32, Shape({kOut, kIn}), w.data()});
  EXPECT_FALSE(full.GatherRows(std::vector<int32_t>{0, kOut}).ok());
  EXPECT_FALSE(full.GatherRows(std::vector<int32_t>{-1}).ok());
}

}  // namespace
}  // namespace ember
