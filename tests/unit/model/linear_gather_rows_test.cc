// Linear::GatherRows (a drafter's lm_head over its draft vocabulary): the gathered matrix's
// products are bitwise the selected columns of the full matrix's, for dense (f32, bf16) and GGUF
// (Q8_0, repacked for the AVX-512 GEMM where that variant runs) weights, at one row and at several.
#include <gtest/gtest.h>

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

TEST(LinearGatherRows, RowsOutsideTheMatrixAreErrors) {
  const std::vector<float> w = Random(kOut * kIn, 4);
  const Linear full = Linear::Dense({DType::kF32, Shape({kOut, kIn}), w.data()});
  EXPECT_FALSE(full.GatherRows(std::vector<int32_t>{0, kOut}).ok());
  EXPECT_FALSE(full.GatherRows(std::vector<int32_t>{-1}).ok());
}

}  // namespace
}  // namespace ember
