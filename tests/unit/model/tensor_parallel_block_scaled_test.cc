// model/tensor_parallel.h for block-scaled weights: a rank's cut of an NVFP4 / MXFP4 / FP8 matrix
// or expert stack dequantizes to exactly the matching block of the whole (the codes and scales are
// copied, never requantized), load-time quantization of a shard equals the shard of the whole
// quantized matrix, and cuts through a scale block are refused.
#include <gtest/gtest.h>

#include <vector>

#include "model/quantized_weights.h"
#include "model/tensor_parallel.h"
#include "support/random_values.h"

namespace ember {
namespace {

using quant::WeightFormat;

constexpr int64_t kRows = 256, kCols = 256;
constexpr WeightFormat kFormats[] = {WeightFormat::kNvfp4, WeightFormat::kMxfp4, WeightFormat::kFp8E4m3};

struct Quantized {
  std::vector<float> values;
  std::shared_ptr<const QuantizedStack> stack;
  ExpertWeights experts;
};

Quantized Quantize(WeightFormat format, int64_t experts, int64_t rows, int64_t cols, int64_t halves) {
  Quantized q;
  q.values = test::NormalValues(experts * rows * cols, 7);
  const TensorView t{DType::kF32, Shape{experts, rows, cols}, q.values.data()};
  auto stack = QuantizeStack(t, format, halves);
  EMBER_CHECK(stack.ok(), "{}", stack.status().message());
  q.stack = *stack;
  q.experts = q.stack->View(q.stack, PackForGemm::kNo);
  return q;
}

// Row r of the whole expert, columns [col0, col0 + cols).
std::vector<float> WholeRow(const ExpertWeights& w, int64_t expert, int64_t r, int64_t col0, int64_t cols) {
  std::vector<float> row(w.cols());
  w.DequantizeRow(expert, r, row.data());
  return {row.begin() + col0, row.begin() + col0 + cols};
}

std::vector<float> Row(const ExpertWeights& w, int64_t expert, int64_t r) {
  std::vector<float> row(w.cols());
  w.DequantizeRow(expert, r, row.data());
  return row;
}

std::vector<float> Row(const quant::BlockScaledMatrix& m, int64_t r) {
  std::vector<float> row(m.cols);
  quant::DequantizeRow(m, r, row.data());
  return row;
}

TEST(SliceBlockScaled, RowAndColumnBlocksDequantizeToTheWholesBlocks) {
  for (WeightFormat format : kFormats) {
    SCOPED_TRACE(quant::WeightFormatName(format));
    const Quantized q = Quantize(format, 1, kRows, kCols, 1);
    const quant::BlockScaledMatrix& whole = q.experts.parts(0).front();
    auto rows = SliceBlockScaled(whole, MatrixSplit::Rows({128, 128}));
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    auto cols = SliceBlockScaled(whole, MatrixSplit::Columns({128, 128}));
    ASSERT_TRUE(cols.ok()) << cols.status().ToString();
    EXPECT_EQ(rows->matrix.rows, 128);
    EXPECT_EQ(cols->matrix.cols, 128);
    for (int64_t r = 0; r < 128; r += 7) {
      EXPECT_EQ(Row(rows->matrix, r), WholeRow(q.experts, 0, 128 + r, 0, kCols)) << r;
      EXPECT_EQ(Row(cols->matrix, r), WholeRow(q.experts, 0, r, 128, 128)) << r;
    }
    // Row-parallel halves multiply to the whole product up to the split of each dot product.
    const std::vector<float> x = test::NormalValues(3 * kCols, 11);
    std::vector<float> y(3 * kRows), left(3 * kRows), right(3 * kRows), xl(3 * 128), xr(3 * 128);
    for (int64_t i = 0; i < 3; ++i) {
      std::copy_n(x.begin() + i * kCols, 128, xl.begin() + i * 128);
      std::copy_n(x.begin() + i * kCols + 128, 128, xr.begin() + i * 128);
    }
    auto first = SliceBlockScaled(whole, MatrixSplit::Columns({0, 128}));
    ASSERT_TRUE(first.ok());
    quant::BlockScaledMatMul(x.data(), 3, whole, y.data());
    quant::BlockScaledMatMul(xl.data(), 3, first->matrix, left.data());
    quant::BlockScaledMatMul(xr.data(), 3, cols->matrix, right.data());
    for (int64_t i = 0; i < 3 * kRows; ++i) EXPECT_NEAR(left[i] + right[i], y[i], 1e-3f * (1 + std::abs(y[i]))) << i;
  }
}

TEST(SliceBlockScaled, CutsThroughScaleBlocksAreRefused) {
  const Quantized mx = Quantize(WeightFormat::kMxfp4, 1, kRows, kCols, 1);
  auto torn = SliceBlockScaled(mx.experts.parts(0).front(), MatrixSplit::Columns({16, 48}));
  ASSERT_FALSE(torn.ok());
  EXPECT_NE(torn.status().message().find("would cut its 32-wide scale blocks"), std::string::npos)
      << torn.status().message();
  const Quantized fp8 = Quantize(WeightFormat::kFp8E4m3, 1, kRows, kCols, 1);
  EXPECT_FALSE(SliceBlockScaled(fp8.experts.parts(0).front(), MatrixSplit::Rows({64, 64})).ok());
  EXPECT_FALSE(SliceBlockScaled(fp8.experts.parts(0).front(), MatrixSplit::Columns({64, 64})).ok());
  // NVFP4's 16-wide blocks allow what MXFP4's refuse.
  const Quantized nv = Quantize(WeightFormat::kNvfp4, 1, kRows, kCols, 1);
  EXPECT_TRUE(SliceBlockScaled(nv.experts.parts(0).front(), MatrixSplit::Columns({16, 48})).ok());
}

TEST(SliceBlockScaledExperts, GateUpKeepsEachHalfsBlockAndItsGlobalScale) {
  constexpr int64_t kExperts = 3, kInter = 128, kLatent = 128;
  for (WeightFormat format : kFormats) {
    SCOPED_TRACE(quant::WeightFormatName(format));
    // NVFP4 stores gate and up as two parts with their own global scales, the others as one.
    const Quantized q = Quantize(format, kExperts, 2 * kInter, kLatent, 2);
    const ShardRange block = format == WeightFormat::kFp8E4m3 ? ShardRange{0, 128} : ShardRange{64, 64};
    auto shard = SliceBlockScaledExperts(q.experts, MatrixSplit::Rows(block), 2);
    ASSERT_TRUE(shard.ok()) << shard.status().ToString();
    ASSERT_EQ(shard->rows(), 2 * block.count);
    for (int64_t e = 0; e < kExperts; ++e) {
      for (int64_t h = 0; h < 2; ++h) {
        for (int64_t r = 0; r < block.count; r += 5) {
          EXPECT_EQ(Row(*shard, e, h * block.count + r), Row(q.experts, e, h * kInter + block.begin + r))
              << e << " " << h << " " << r;
        }
      }
    }
    auto down = SliceBlockScaledExperts(q.experts, MatrixSplit::Columns({0, 128}), 1);
    ASSERT_TRUE(down.ok()) << down.status().ToString();
    EXPECT_EQ(Row(*down, 2, 200), Row(q.experts, 2, 200));
  }
}

TEST(QuantizeLinear, AShardIsTheWholeQuantizedMatrixsShard) {
  for (WeightFormat format : kFormats) {
    SCOPED_TRACE(quant::WeightFormatName(format));
    const Quantized q = Quantize(format, 1, kRows, kCols, 1);
    const TensorView matrix{DType::kF32, Shape{kRows, kCols}, q.values.data()};
    auto shard = QuantizeLinear(matrix, format, quant::Mxfp4ScaleRounding::kEven, MatrixSplit::Columns({128, 128}));
    ASSERT_TRUE(shard.ok()) << shard.status().ToString();
    std::vector<float> row(128);
    ASSERT_TRUE(shard->ReadRow(9, row.data()).ok());
    // NVFP4's global scale is the whole matrix's amax, not the shard's.
    EXPECT_EQ(row, WholeRow(q.experts, 0, 9, 128, 128));
  }
}

}  // namespace
}  // namespace ember
