// The packed FP4 GEMM (quant/block_scaled_packed.h): the layout round trip, and bit equality with
// the row dots (the same BlockScaledMatMul without the packed copy) for every m, odd shapes and
// tails, 1 and 2 threads, per-matrix and grouped, under every level the host runs (a level
// without a packed GEMM must fall back to its row dots).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/isa.h"
#include "core/thread_pool.h"
#include "quant/block_scaled.h"
#include "quant/block_scaled_dot.h"
#include "quant/block_scaled_matmul.h"
#include "quant/block_scaled_packed.h"
#include "quant/grouped_block_scaled_matmul.h"

namespace ember::quant {
namespace {

struct Fp4Matrix {
  std::vector<uint8_t> codes, scales;
  BlockScaledMatrix view;
};

// A random FP4 matrix with padded (strided) rows.
Fp4Matrix MakeFp4(WeightFormat format, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-4.0f, 1.0f);
  std::vector<float> x(rows * cols);
  for (int64_t i = 0; i < rows * cols; i += 16) {
    const float scale = std::exp2(log_scale(rng));
    for (int64_t j = i; j < i + 16; ++j) x[j] = scale * normal(rng);
  }
  const int64_t row_bytes = CodesRowBytes(format, cols), scale_bytes = ScalesRowBytes(format, cols);
  std::vector<uint8_t> codes(rows * row_bytes), scales(rows * scale_bytes);
  float global = 1.0f;
  if (format == WeightFormat::kMxfp4) {
    EXPECT_TRUE(QuantizeMxfp4(x.data(), rows, cols, codes.data(), scales.data()).ok());
  } else {
    global = Nvfp4GlobalScale(AbsMax(x.data(), rows * cols));
    EXPECT_TRUE(QuantizeNvfp4(x.data(), rows, cols, global, codes.data(), scales.data()).ok());
  }
  Fp4Matrix m;
  const int64_t pad = 8;
  m.codes.assign(rows * (row_bytes + pad), 0x5a);
  m.scales.assign(rows * (scale_bytes + pad), 0x33);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(m.codes.data() + r * (row_bytes + pad), codes.data() + r * row_bytes, row_bytes);
    std::memcpy(m.scales.data() + r * (scale_bytes + pad), scales.data() + r * scale_bytes, scale_bytes);
  }
  m.view = DenseBlockScaledMatrix(format, rows, cols, m.codes.data(), m.scales.data(), global);
  m.view.codes_row_stride = row_bytes + pad;
  m.view.scales_row_stride = scale_bytes + pad;
  EXPECT_TRUE(ValidateBlockScaledMatrix(m.view).ok());
  return m;
}

std::vector<float> Activations(int64_t m, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(m * k);
  for (float& v : x) v = normal(rng);
  for (int64_t i = 0; i < m * k; i += 29) x[i] *= 30.0f;
  for (int64_t i = 5; i < m * k; i += 211) x[i] = 0.0f;
  return x;
}

constexpr WeightFormat kFormats[] = {WeightFormat::kMxfp4, WeightFormat::kNvfp4};

TEST(BlockScaledPacked, LayoutRoundTrip) {
  std::mt19937 rng(1);
  for (WeightFormat format : kFormats) {
    for (int64_t cols : {32, 128, 160, 384, 1024 + 96}) {
      for (int64_t rows : {1, 16, 21, 47}) {
        const Fp4Matrix w = MakeFp4(format, rows, cols, rng);
        const PackedBuffer packed = PackFp4Matrix(w.view);
        ASSERT_NE(packed, nullptr);
        const int64_t group_bytes = PackedFp4GroupBytes(format, cols);
        EXPECT_EQ(group_bytes, 16 * (CodesRowBytes(format, cols) + ScalesRowBytes(format, cols)));
        const int64_t chunks = cols / 128;
        for (int64_t r = 0; r < (rows + 15) / 16 * 16; ++r) {
          const uint8_t* group = packed.get() + r / 16 * group_bytes;
          const int64_t o = r % 16;
          for (int64_t word = 0; word < cols / 8; ++word) {
            // Whole chunks: lane pair p = j / 2 outermost, then the chunk, then j % 2.
            const int64_t c = word / 16, j = word % 16;
            const int64_t slot = word < chunks * 16 ? ((j / 2) * chunks + c) * 2 + j % 2 : word;
            for (int b = 0; b < 4; ++b) {
              const uint8_t expected = r < rows ? w.view.codes[r * w.view.codes_row_stride + word * 4 + b] : 0;
              ASSERT_EQ(group[slot * 64 + o * 4 + b], expected) << "row " << r << " word " << word;
            }
          }
          for (int64_t block = 0; block < cols / KBlockSize(format); ++block) {
            const uint8_t expected = r < rows ? w.scales[r * w.view.scales_row_stride + block] : 0;
            ASSERT_EQ(group[8 * cols + block * 16 + o], expected) << "row " << r << " block " << block;
          }
        }
      }
    }
  }
  // FP8 has no packed form.
  BlockScaledMatrix fp8;
  fp8.format = WeightFormat::kFp8E4m3;
  fp8.rows = 4;
  fp8.cols = 16;
  EXPECT_EQ(PackFp4Matrix(fp8), nullptr);
}

class BlockScaledPackedTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { ASSERT_TRUE(SelectIsa(IsaName(GetParam())).ok()); }
  void TearDown() override {
    ASSERT_TRUE(SelectIsa(IsaName(AvailableIsas().back())).ok());
    ThreadPool::SetGlobalThreads(threads_);
  }
  int threads_ = ThreadPool::Global().num_threads();
};

bool LevelHasPackedGemm(Isa isa) { return isa == Isa::kAvx512 || isa == Isa::kAmx; }

TEST_P(BlockScaledPackedTest, BitIdenticalToRowDotsForEveryM) {
  std::mt19937 rng(2);
  struct Shape {
    int64_t rows, cols;
    std::vector<int64_t> ms;
  };
  std::vector<int64_t> every;
  for (int64_t m = 1; m <= 40; ++m) every.push_back(m);
  every.push_back(64);
  every.push_back(100);
  const bool slow = GetParam() == Isa::kRef || GetParam() == Isa::kGeneric;
  const std::vector<Shape> shapes = {{21, 160, every},
                                     {47, 384, slow ? std::vector<int64_t>{1, 2, 9, 17, 64} : every},
                                     {16, 32, {1, 2, 3, 8, 9, 100}},
                                     {33, 4096 + 96, {1, 2, 5, 8, 16, 17, 40}}};
  for (WeightFormat format : kFormats) {
    for (const Shape& shape : shapes) {
      const Fp4Matrix w = MakeFp4(format, shape.rows, shape.cols, rng);
      const PackedBuffer packed = PackFp4Matrix(w.view);
      BlockScaledMatrix with = w.view;
      with.packed = packed.get();
      for (int64_t m : shape.ms) {
        EXPECT_EQ(UsesPackedGemm(with, m), LevelHasPackedGemm(GetParam()) && m >= kPackedMinRows);
        EXPECT_FALSE(UsesPackedGemm(w.view, m));
        const std::vector<float> x = Activations(m, shape.cols, rng);
        std::vector<float> rows_y(m * shape.rows), packed_y(m * shape.rows, -1.0f);
        for (int threads : {1, 2}) {
          ThreadPool::SetGlobalThreads(threads);
          BlockScaledMatMul(x.data(), m, w.view, rows_y.data());
          BlockScaledMatMul(x.data(), m, with, packed_y.data());
          for (int64_t i = 0; i < m * shape.rows; ++i) {
            ASSERT_EQ(std::memcmp(&rows_y[i], &packed_y[i], 4), 0)
                << IsaName(GetParam()) << " " << WeightFormatName(format) << " [" << shape.rows << ", " << shape.cols
                << "] m " << m << " threads " << threads << " output (" << i / shape.rows << ", " << i % shape.rows
                << "): " << rows_y[i] << " vs " << packed_y[i];
          }
        }
      }
    }
  }
}

TEST_P(BlockScaledPackedTest, RowRangesAndSlicesMatchTheWholeMatrix) {
  std::mt19937 rng(3);
  const int64_t rows = 53, cols = 256 + 64, m = 11;
  for (WeightFormat format : kFormats) {
    const Fp4Matrix w = MakeFp4(format, rows, cols, rng);
    const PackedBuffer packed = PackFp4Matrix(w.view);
    BlockScaledMatrix with = w.view;
    with.packed = packed.get();
    const std::vector<float> x = Activations(m, cols, rng);
    std::vector<float> whole(m * rows);
    BlockScaledMatMul(x.data(), m, w.view, whole.data());
    // Row ranges that start and end inside groups, on the calling thread.
    const int64_t act_bytes = PreparedActivationRowBytes(format, cols);
    std::vector<uint8_t> buffer(m * act_bytes + 64);
    uint8_t* act = buffer.data() + (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64;
    PrepareActivations(format, x.data(), m, cols, act, UsesPackedGemm(with, m));
    std::vector<float> ranged(m * rows, -7.0f);
    for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 5}, {5, 16}, {16, 37}, {37, 38}, {38, 53}}) {
      BlockScaledMatMulRows(with, x.data(), act, m, begin, end, ranged.data(), rows);
    }
    ASSERT_EQ(std::memcmp(whole.data(), ranged.data(), whole.size() * 4), 0) << WeightFormatName(format);
    // Slices: from a group boundary the packed copy follows, elsewhere the row dots run.
    for (int64_t begin : {16, 21}) {
      const BlockScaledMatrix slice = *SliceRows(with, begin, rows - begin);
      EXPECT_EQ(slice.packed != nullptr, begin % 16 == 0);
      std::vector<float> y(m * slice.rows);
      BlockScaledMatMul(x.data(), m, slice, y.data());
      for (int64_t i = 0; i < m; ++i) {
        ASSERT_EQ(std::memcmp(y.data() + i * slice.rows, whole.data() + i * rows + begin, slice.rows * 4), 0)
            << WeightFormatName(format) << " slice from " << begin << " row " << i;
      }
    }
  }
}

TEST_P(BlockScaledPackedTest, GroupedMatchesRowDots) {
  std::mt19937 rng(4);
  const int64_t cols = 512 + 32, hidden = 37;
  for (WeightFormat format : kFormats) {
    std::vector<Fp4Matrix> experts;
    std::vector<PackedBuffer> copies;
    for (int e = 0; e < 4; ++e) {
      experts.push_back(MakeFp4(format, 2 * hidden + e * 16, cols, rng));
      copies.push_back(PackFp4Matrix(experts.back().view));
    }
    const int64_t ms[] = {1, 3, 18, 40};
    std::vector<std::vector<float>> xs;
    for (int64_t m : ms) xs.push_back(Activations(m, cols, rng));
    for (int threads : {1, 2}) {
      ThreadPool::SetGlobalThreads(threads);
      std::vector<std::vector<float>> plain_y(4), packed_y(4);
      for (int pass = 0; pass < 2; ++pass) {
        std::vector<BlockScaledGroup> groups;
        std::vector<std::vector<float>>& ys = pass == 0 ? plain_y : packed_y;
        for (int e = 0; e < 4; ++e) {
          BlockScaledMatrix w = experts[e].view;
          if (pass == 1) w.packed = copies[e].get();
          ys[e].assign(ms[e] * w.rows, -3.0f);
          // Two halves sharing the input, as gate / up: the second from row 48 (a group boundary,
          // packed) or from `hidden` (not one: row dots), written side by side.
          const int64_t split = e % 2 == 0 ? 48 : hidden;
          groups.push_back({*SliceRows(w, 0, split), xs[e].data(), ms[e], ys[e].data(), w.rows});
          groups.push_back({*SliceRows(w, split, w.rows - split), xs[e].data(), ms[e], ys[e].data() + split, w.rows});
        }
        GroupedBlockScaledMatMul(groups);
      }
      for (int e = 0; e < 4; ++e) {
        ASSERT_EQ(std::memcmp(plain_y[e].data(), packed_y[e].data(), plain_y[e].size() * 4), 0)
            << IsaName(GetParam()) << " " << WeightFormatName(format) << " expert " << e << " threads " << threads;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, BlockScaledPackedTest, ::testing::ValuesIn(AvailableIsas()),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(IsaName(info.param)); });

}  // namespace
}  // namespace ember::quant
