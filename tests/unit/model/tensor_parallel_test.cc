// model/tensor_parallel.h: which heads and features a rank holds, and that the slices compute what
// the whole matrix does. A block of rows (column-parallel) gives bitwise the matching outputs of
// the whole matrix; blocks of columns (row-parallel) give partial products whose sum over the
// ranks is the whole product up to summation order (each dot product is split in two, so the
// tolerance is a few ulps of the sum of |x||w|).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "core/dtypes.h"
#include "model/tensor_parallel.h"
#include "quant/gguf_blocks.h"
#include "quant/gguf_dequant.h"
#include "support/random_values.h"

namespace ember {
namespace {

constexpr int64_t kOut = 48, kIn = 128;

TEST(ShardHeads, SplitsQueryAndKvHeadsIntoBlocks) {
  auto s = ShardHeads(16, 4, {1, 2});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->q_heads.begin, 8);
  EXPECT_EQ(s->q_heads.count, 8);
  EXPECT_EQ(s->kv_heads.begin, 2);
  EXPECT_EQ(s->kv_heads.count, 2);
}

TEST(ShardHeads, ReplicatesKvHeadsWhenRanksOutnumberThem) {
  // 4 query heads over 1 KV head (Gemma 3 270M), 4 ranks: every rank holds KV head 0.
  for (int64_t r = 0; r < 4; ++r) {
    auto s = ShardHeads(4, 1, {r, 4});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->q_heads.begin, r);
    EXPECT_EQ(s->kv_heads.begin, 0);
    EXPECT_EQ(s->kv_heads.count, 1);
  }
  // 8 query heads over 2 KV heads, 4 ranks: ranks 0-1 read KV head 0, ranks 2-3 KV head 1, and
  // each rank's two query heads belong to that KV head's group (heads 4r/4.. of group size 4).
  for (int64_t r = 0; r < 4; ++r) {
    auto s = ShardHeads(8, 2, {r, 4});
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->kv_heads.begin, r / 2);
    EXPECT_EQ(s->q_heads.begin / 4, s->kv_heads.begin) << "rank " << r;
    EXPECT_EQ((s->q_heads.end() - 1) / 4, s->kv_heads.begin) << "rank " << r;
  }
}

TEST(ShardHeads, RefusesImpossibleShapesAndSaysWhatWorks) {
  // SmolLM2-135M: 9 query heads over 3 KV heads.
  auto s = ShardHeads(9, 3, {0, 2});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("sizes that work for this model: 1, 3, 9"), std::string::npos)
      << s.status().message();
  // 6 heads over 3 KV heads, 2 ranks: the query heads split but the KV heads do not.
  EXPECT_FALSE(ShardHeads(6, 3, {0, 2}).ok());
  EXPECT_TRUE(ShardHeads(6, 3, {0, 3}).ok());
}

TEST(TensorParallelRank, BlocksMustDivide) {
  auto b = TensorParallelRank{2, 3}.Block(96, "features");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->begin, 64);
  EXPECT_EQ(b->count, 32);
  EXPECT_FALSE((TensorParallelRank{0, 3}.Block(100, "features")).ok());
}

TEST(VocabShard, BlocksOrWholeWhenTheSizeDoesNotDivide) {
  EXPECT_EQ(VocabShard(49152, {1, 3}).begin, 16384);
  EXPECT_EQ(VocabShard(49152, {1, 3}).count, 16384);
  EXPECT_EQ(VocabShard(1000, {1, 3}).begin, 0);
  EXPECT_EQ(VocabShard(1000, {1, 3}).count, 1000);
  EXPECT_EQ(VocabShard(1000, {0, 1}).count, 1000);
}

// Column-parallel shards are bitwise the whole matrix's outputs; row-parallel shards sum to them.
void ExpectShardsComputeTheWhole(const Linear& whole, const std::function<Expected<Linear>(MatrixSplit)>& slice,
                                 int64_t ranks) {
  for (const int64_t m : {1, 5}) {
    const std::vector<float> x = test::NormalValues(m * kIn, 11);
    std::vector<float> want(m * kOut);
    whole.Apply(x.data(), m, want.data());
    for (int64_t r = 0; r < ranks; ++r) {
      const int64_t rows = kOut / ranks;
      auto shard = slice(MatrixSplit::Rows({r * rows, rows}));
      ASSERT_TRUE(shard.ok()) << shard.status().ToString();
      std::vector<float> got(m * rows);
      shard->Apply(x.data(), m, got.data());
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < rows; ++j) ASSERT_EQ(got[i * rows + j], want[i * kOut + r * rows + j]);
      }
    }
    std::vector<float> sum(m * kOut, 0.0f);
    const int64_t cols = kIn / ranks;
    for (int64_t r = 0; r < ranks; ++r) {
      auto shard = slice(MatrixSplit::Columns({r * cols, cols}));
      ASSERT_TRUE(shard.ok()) << shard.status().ToString();
      ASSERT_EQ(shard->in_features(), cols);
      std::vector<float> xr(m * cols), part(m * kOut);
      for (int64_t i = 0; i < m; ++i) {
        std::copy_n(x.data() + i * kIn + r * cols, cols, xr.data() + i * cols);
      }
      shard->Apply(xr.data(), m, part.data());
      for (size_t k = 0; k < sum.size(); ++k) sum[k] += part[k];
    }
    for (size_t k = 0; k < sum.size(); ++k) EXPECT_NEAR(sum[k], want[k], 1e-4f * (1.0f + std::abs(want[k])));
  }
}

TEST(SliceDense, RowsAreViewsAndColumnsCopies) {
  const std::vector<float> f = test::NormalValues(kOut * kIn, 1);
  std::vector<uint16_t> w(f.size());
  for (size_t i = 0; i < f.size(); ++i) w[i] = F32ToBF16(f[i]);
  const TensorView view{DType::kBF16, Shape({kOut, kIn}), w.data()};
  const Linear whole = Linear::Dense(view);
  ExpectShardsComputeTheWhole(whole, [&](MatrixSplit s) { return SliceDense(view, s); }, 2);
  auto sliced = SliceTensor(view, MatrixSplit::Rows({8, 4}));
  ASSERT_TRUE(sliced.ok());
  EXPECT_EQ(sliced->view.data, w.data() + 8 * kIn) << "a block of rows is a view into the file";
  EXPECT_EQ(sliced->owner, nullptr);
  EXPECT_FALSE(SliceDense(view, MatrixSplit::Columns({120, 16})).ok()) << "past the last column";
}

TEST(SliceQuantized, GgufColumnsAreWholeBlocks) {
  const std::vector<float> f = test::NormalValues(kOut * kIn, 2);
  const int64_t blocks = kIn / 32;
  std::vector<quant::BlockQ8_0> w(kOut * blocks);
  for (int64_t r = 0; r < kOut; ++r) quant::QuantizeRowQ8_0(f.data() + r * kIn, kIn, w.data() + r * blocks);
  const quant::QuantMatrix m{GgmlType::kQ8_0, w.data(), kOut, kIn,
                             blocks * static_cast<int64_t>(sizeof(quant::BlockQ8_0))};
  const Linear whole = Linear::Quantized(m);
  ExpectShardsComputeTheWhole(whole, [&](MatrixSplit s) { return SliceQuantized(m, s); }, 2);
  ExpectShardsComputeTheWhole(whole, [&](MatrixSplit s) { return SliceQuantized(m, s); }, 4);
  // The copied columns dequantize to the whole row's.
  auto right = SliceQuantized(m, MatrixSplit::Columns({64, 64}));
  ASSERT_TRUE(right.ok());
  std::vector<float> row(64), whole_row(kIn);
  ASSERT_TRUE(right->ReadRow(5, row.data()).ok());
  ASSERT_TRUE(whole.ReadRow(5, whole_row.data()).ok());
  EXPECT_EQ(row, std::vector<float>(whole_row.begin() + 64, whole_row.end()));
  auto torn = SliceQuantized(m, MatrixSplit::Columns({0, 48}));
  ASSERT_FALSE(torn.ok());
  EXPECT_NE(torn.status().message().find("not whole q8_0 blocks of 32"), std::string::npos) << torn.status().message();
}

TEST(SliceExpertStack, GateUpKeepsBothHalvesAndDownItsColumns) {
  constexpr int64_t kExperts = 3, kInter = 8, kLatent = 4;
  std::vector<float> gate_up(kExperts * 2 * kInter * kLatent);
  for (size_t i = 0; i < gate_up.size(); ++i) gate_up[i] = static_cast<float>(i);
  const TensorView stack{DType::kF32, Shape({kExperts, 2 * kInter, kLatent}), gate_up.data()};
  auto shard = SliceExpertStack(stack, MatrixSplit::Rows({4, 4}), /*halves=*/2);
  ASSERT_TRUE(shard.ok()) << shard.status().ToString();
  ASSERT_EQ(shard->view.shape[1], 8);
  const float* got = shard->view.As<float>();
  for (int64_t e = 0; e < kExperts; ++e) {
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t r = 0; r < 4; ++r) {
        const int64_t source_row = e * 2 * kInter + h * kInter + 4 + r;
        EXPECT_EQ(got[((e * 8) + h * 4 + r) * kLatent], gate_up[source_row * kLatent]) << e << " " << h << " " << r;
      }
    }
  }
  std::vector<float> down(kExperts * kLatent * kInter);
  for (size_t i = 0; i < down.size(); ++i) down[i] = static_cast<float>(i);
  const TensorView down_stack{DType::kF32, Shape({kExperts, kLatent, kInter}), down.data()};
  auto cols = SliceExpertStack(down_stack, MatrixSplit::Columns({2, 2}), 1);
  ASSERT_TRUE(cols.ok());
  EXPECT_EQ(cols->view.shape[2], 2);
  EXPECT_EQ(cols->view.As<float>()[0], 2.0f);
  EXPECT_EQ(cols->view.As<float>()[3], 11.0f);  // expert 0, latent row 1, columns 2 and 3: 10, 11
}

}  // namespace
}  // namespace ember
