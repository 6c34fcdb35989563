// ExpertWeights::ApplyGrouped against the per-expert Apply it replaces in the MoE: bitwise equal
// for every expert storage (NVFP4 whole and as separate gate / up halves, MXFP4, FP8 with each
// scale kind, bf16 and f32 dense), odd shapes, empty groups, every block-dot variant, and several
// thread counts; and SplitGroupRows covering every row once on tile boundaries.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/dtypes.h"
#include "core/thread_pool.h"
#include "model/expert_weights.h"
#include "quant/block_scaled_dot.h"
#include "quant/grouped_block_scaled_matmul.h"
#include "quant/matmul_tiling.h"

namespace ember {
namespace {

using quant::Fp8ScaleKind;
using quant::WeightFormat;

enum class Storage { kBf16, kF32, kMxfp4, kNvfp4, kNvfp4Halves, kFp8Tensor, kFp8Channel, kFp8Block };
constexpr Storage kStorages[] = {Storage::kBf16,        Storage::kF32,       Storage::kMxfp4,
                                 Storage::kNvfp4,       Storage::kNvfp4Halves, Storage::kFp8Tensor,
                                 Storage::kFp8Channel,  Storage::kFp8Block};

std::string Name(Storage s) {
  constexpr const char* kNames[] = {"bf16", "f32", "mxfp4", "nvfp4", "nvfp4 halves", "fp8 tensor", "fp8 channel",
                                    "fp8 block"};
  return kNames[static_cast<int>(s)];
}

// One quantized [rows, cols] matrix; `bytes` keeps its codes and scales alive.
quant::BlockScaledMatrix Quantize(Storage s, const float* x, int64_t rows, int64_t cols,
                                  std::vector<std::shared_ptr<std::vector<uint8_t>>>& bytes) {
  const WeightFormat format = s == Storage::kMxfp4 ? WeightFormat::kMxfp4
                              : (s == Storage::kNvfp4 || s == Storage::kNvfp4Halves) ? WeightFormat::kNvfp4
                                                                                        : WeightFormat::kFp8E4m3;
  const Fp8ScaleKind kind = s == Storage::kFp8Channel ? Fp8ScaleKind::kPerChannel
                            : s == Storage::kFp8Block ? Fp8ScaleKind::kBlock128
                                                      : Fp8ScaleKind::kPerTensor;
  auto codes = std::make_shared<std::vector<uint8_t>>(rows * quant::CodesRowBytes(format, cols));
  auto scales = std::make_shared<std::vector<uint8_t>>(
      std::max<int64_t>(4, format == WeightFormat::kFp8E4m3 ? 4 * quant::Fp8ScaleCount(kind, rows, cols)
                                                            : rows * quant::ScalesRowBytes(format, cols)));
  float global = 1.0f;
  if (format == WeightFormat::kMxfp4) {
    EXPECT_TRUE(quant::QuantizeMxfp4(x, rows, cols, codes->data(), scales->data()).ok());
  } else if (format == WeightFormat::kNvfp4) {
    float amax = 0.0f;
    for (int64_t i = 0; i < rows * cols; ++i) amax = std::max(amax, std::fabs(x[i]));
    global = quant::Nvfp4GlobalScale(amax);
    EXPECT_TRUE(quant::QuantizeNvfp4(x, rows, cols, global, codes->data(), scales->data()).ok());
  } else {
    EXPECT_TRUE(quant::QuantizeFp8(x, rows, cols, kind, codes->data(), reinterpret_cast<float*>(scales->data()),
                                   &global)
                    .ok());
  }
  bytes.push_back(codes);
  bytes.push_back(scales);
  return quant::DenseBlockScaledMatrix(format, rows, cols, codes->data(), scales->data(), global, kind);
}

struct Stack {
  ExpertWeights weights;
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
};

std::unique_ptr<Stack> MakeStack(Storage s, int64_t experts, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto stack = std::make_unique<Stack>();
  stack->f32.resize(experts * rows * cols);
  for (float& v : stack->f32) v = normal(rng);
  if (s == Storage::kF32) {
    stack->weights = ExpertWeights::Dense({DType::kF32, Shape({experts, rows, cols}), stack->f32.data()});
    return stack;
  }
  if (s == Storage::kBf16) {
    for (float v : stack->f32) stack->bf16.push_back(F32ToBF16(v));
    stack->weights = ExpertWeights::Dense({DType::kBF16, Shape({experts, rows, cols}), stack->bf16.data()});
    return stack;
  }
  auto bytes = std::make_shared<std::vector<std::shared_ptr<std::vector<uint8_t>>>>();
  std::vector<std::vector<quant::BlockScaledMatrix>> parts(experts);
  for (int64_t e = 0; e < experts; ++e) {
    const float* x = stack->f32.data() + e * rows * cols;
    if (s == Storage::kNvfp4Halves) {
      // Gate and up with their own global scales, the up half 4x larger so the scales differ.
      std::vector<float> up(x + rows / 2 * cols, x + rows * cols);
      for (float& v : up) v *= 4.0f;
      parts[e].push_back(Quantize(s, x, rows / 2, cols, *bytes));
      parts[e].push_back(Quantize(s, up.data(), rows - rows / 2, cols, *bytes));
    } else {
      parts[e].push_back(Quantize(s, x, rows, cols, *bytes));
    }
  }
  stack->weights = ExpertWeights::BlockScaled(rows, cols, std::move(parts), bytes);
  return stack;
}

class ApplyGroupedTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { ASSERT_TRUE(SelectIsa(IsaName(GetParam())).ok()); }
  void TearDown() override {
    ASSERT_TRUE(SelectIsa(IsaName(AvailableIsas().back())).ok());
    ThreadPool::SetGlobalThreads(threads_);
  }
  const int threads_ = ThreadPool::Global().num_threads();
};

TEST_P(ApplyGroupedTest, BitIdenticalToPerExpertApply) {
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr int64_t kExperts = 5;
  // (rows, cols): odd row counts and tails, a K with a partial 128-chunk, rows past one 128-block.
  const std::pair<int64_t, int64_t> shapes[] = {{74, 160}, {37, 1056}, {290, 96}};
  for (Storage s : kStorages) {
    for (auto [rows, cols] : shapes) {
      if (s == Storage::kMxfp4 && cols % 32 != 0) continue;
      const std::unique_ptr<Stack> stack = MakeStack(s, kExperts, rows, cols, rng);
      // Tokens per expert: several groups, an empty one, m past kMaxBlockDotRows.
      const int64_t counts[kExperts] = {1, 6, 0, 3, 1};
      std::vector<std::vector<float>> x(kExperts), expected(kExperts), got(kExperts);
      std::vector<ExpertWeights::Group> groups;
      for (int64_t e = 0; e < kExperts; ++e) {
        x[e].resize(counts[e] * cols);
        for (float& v : x[e]) v = normal(rng);
        expected[e].assign(counts[e] * rows, 0.0f);
        if (counts[e] > 0) stack->weights.Apply(e, x[e].data(), counts[e], expected[e].data());
      }
      // Experts out of index order, one of them twice: groups are independent of each other.
      for (int64_t e : {3, 0, 1, 2, 4, 3}) groups.push_back({e, x[e].data(), counts[e], nullptr});
      for (int threads : {1, 2, 3}) {
        ThreadPool::SetGlobalThreads(threads);
        std::vector<std::vector<float>> outs(groups.size());
        for (size_t g = 0; g < groups.size(); ++g) {
          outs[g].assign(counts[groups[g].expert] * rows, -1.0f);
          groups[g].y = outs[g].data();
        }
        stack->weights.ApplyGrouped(groups);
        for (size_t g = 0; g < groups.size(); ++g) {
          // Bitwise; an expert no row routed to has an empty output (whose data() may be null).
          ASSERT_TRUE(outs[g].empty() || 0 == std::memcmp(outs[g].data(), expected[groups[g].expert].data(),
                                                          outs[g].size() * sizeof(float)))
              << IsaName(GetParam()) << " " << Name(s) << " [" << rows << ", " << cols << "] group " << g << " threads "
              << threads;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, ApplyGroupedTest, ::testing::ValuesIn(AvailableIsas()),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(IsaName(info.param)); });

TEST(SplitGroupRowsTest, CoversEveryRowOnceOnTileBoundaries) {
  const std::vector<int64_t> rows = {1536, 0, 768, 5, 100000};
  const std::vector<int64_t> cost = {432, 432, 216, 10, 1};
  for (int threads : {1, 2, 7}) {
    const std::vector<quant::GroupRowRange> ranges = quant::SplitGroupRows(rows, cost, threads);
    std::vector<int64_t> next(rows.size(), 0);
    int64_t last_group = 0;
    for (const quant::GroupRowRange& r : ranges) {
      ASSERT_GE(r.group, last_group);
      last_group = r.group;
      ASSERT_EQ(r.begin, next[r.group]);
      ASSERT_LT(r.begin, r.end);
      ASSERT_EQ(r.begin % quant::kRowTile, 0);
      next[r.group] = r.end;
    }
    EXPECT_EQ(next, rows);
  }
  // The decode shape of the mid Muse model (4 NVFP4 gate_up experts, 2 threads) splits into
  // several ranges per thread, so the pool can balance them.
  const std::vector<int64_t> decode_rows(4, 1536), decode_cost(4, 432);
  EXPECT_GE(quant::SplitGroupRows(decode_rows, decode_cost, 2).size(), 8u);
}

}  // namespace
}  // namespace ember
