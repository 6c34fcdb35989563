// BlockScaledMatMul with every available variant against a double-precision dot of the
// dequantized weights (DequantizeRow) and the dequantized activations, on odd shapes; the int8
// activation error against the unquantized product; and batch / thread invariance.
//
// Tolerance. The integer block sums are exact, so a variant differs from the exact dot of
// w_hat and x_hat only by f32 rounding: two roundings per scale product and one per addition.
// The longest addition chain is below min(k, 128) + k/8 + 16 (per-lane accumulation over chunks
// or per-16 groups, the horizontal sum, the scalar tail; for FP8 ref, 128 elements of a block and
// then one per block), so the standard bound is (min(k, 128) + k/8 + 18) * 2^-24 * sum|w_hat*x_hat|.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "quant/block_scaled.h"
#include "quant/block_scaled_dot.h"

namespace ember::quant {
namespace {

struct Case {
  WeightFormat format;
  Fp8ScaleKind kind;
};
constexpr Case kCases[] = {{WeightFormat::kMxfp4, Fp8ScaleKind::kPerTensor},
                           {WeightFormat::kNvfp4, Fp8ScaleKind::kPerTensor},
                           {WeightFormat::kFp8E4m3, Fp8ScaleKind::kPerTensor},
                           {WeightFormat::kFp8E4m3, Fp8ScaleKind::kPerChannel},
                           {WeightFormat::kFp8E4m3, Fp8ScaleKind::kBlock128}};

std::string Name(const Case& c) {
  std::string name(WeightFormatName(c.format));
  if (c.format == WeightFormat::kFp8E4m3) {
    name += '/';
    name += Fp8ScaleKindName(c.kind);
  }
  return name;
}

// A quantized matrix owning its bytes, with rows padded (strided) to test the strides too.
struct Matrix {
  std::vector<uint8_t> codes;
  std::vector<float> fp8_scales;
  std::vector<uint8_t> fp4_scales;
  BlockScaledMatrix view;
};

Matrix MakeMatrix(const Case& c, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-4.0f, 1.0f);
  std::vector<float> x(rows * cols);
  for (int64_t i = 0; i < rows * cols; i += 16) {
    const float scale = std::exp2(log_scale(rng));
    for (int64_t j = i; j < i + 16; ++j) x[j] = scale * normal(rng);
  }
  Matrix m;
  const int64_t pad = 16;
  const int64_t row_bytes = CodesRowBytes(c.format, cols), scale_bytes = ScalesRowBytes(c.format, cols);
  std::vector<uint8_t> dense_codes(rows * row_bytes), dense_scales(rows * scale_bytes);
  float global = 1.0f;
  switch (c.format) {
    case WeightFormat::kMxfp4:
      EXPECT_TRUE(QuantizeMxfp4(x.data(), rows, cols, dense_codes.data(), dense_scales.data()).ok());
      break;
    case WeightFormat::kNvfp4:
      global = Nvfp4GlobalScale(AbsMax(x.data(), rows * cols));
      EXPECT_TRUE(QuantizeNvfp4(x.data(), rows, cols, global, dense_codes.data(), dense_scales.data()).ok());
      break;
    case WeightFormat::kFp8E4m3:
      m.fp8_scales.resize(Fp8ScaleCount(c.kind, rows, cols));
      EXPECT_TRUE(QuantizeFp8(x.data(), rows, cols, c.kind, dense_codes.data(), m.fp8_scales.data(), &global).ok());
      break;
  }
  m.codes.assign(rows * (row_bytes + pad), 0xAA);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(m.codes.data() + r * (row_bytes + pad), dense_codes.data() + r * row_bytes, row_bytes);
  m.fp4_scales.assign(rows * (scale_bytes + pad), 0x7f);
  // FP8 keeps its scales apart (scale_bytes == 0, dense_scales empty): no copy from a null pointer.
  for (int64_t r = 0; r < rows && scale_bytes > 0; ++r)
    std::memcpy(m.fp4_scales.data() + r * (scale_bytes + pad), dense_scales.data() + r * scale_bytes, scale_bytes);
  const void* scales = c.format == WeightFormat::kFp8E4m3 ? static_cast<const void*>(m.fp8_scales.data())
                                                          : static_cast<const void*>(m.fp4_scales.data());
  m.view = DenseBlockScaledMatrix(c.format, rows, cols, m.codes.data(), scales, global, c.kind);
  m.view.codes_row_stride = row_bytes + pad;
  if (c.format != WeightFormat::kFp8E4m3) m.view.scales_row_stride = scale_bytes + pad;
  EXPECT_TRUE(ValidateBlockScaledMatrix(m.view).ok());
  return m;
}

std::vector<float> RandomActivations(int64_t m, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(m * k);
  for (float& v : x) v = normal(rng);
  for (int64_t i = 0; i < m * k; i += 37) x[i] *= 20.0f;  // outliers, as real activations have
  return x;
}

// What the FP4 kernels multiply: the int8 activations times their scales.
std::vector<float> DequantizedActivations(const float* x, int64_t k) {
  const ActivationLayout l = Int8ActivationLayout(k);
  std::vector<uint8_t> buffer(l.bytes + 64);
  uint8_t* act = buffer.data() + (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64;
  QuantizeActivationInt8(x, k, act);
  std::vector<float> out(k);
  for (int64_t i = 0; i < k; ++i) {
    float scale;
    std::memcpy(&scale, act + l.scale + i / 16 * 4, 4);
    out[i] = static_cast<float>(reinterpret_cast<const int8_t*>(act + l.q)[i]) * scale;
  }
  return out;
}

class BlockScaledMatMulTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { ASSERT_TRUE(SelectIsa(IsaName(GetParam())).ok()); }
  void TearDown() override { ASSERT_TRUE(SelectIsa(IsaName(AvailableIsas().back())).ok()); }
};

TEST_P(BlockScaledMatMulTest, MatchesDequantizedDotOnOddShapes) {
  std::mt19937 rng(11);
  for (const Case& c : kCases) {
    for (int64_t cols : {32, 64, 160, 384, 4096 + 96}) {
      for (int64_t rows : {1, 7, 33}) {
        const Matrix w = MakeMatrix(c, rows, cols, rng);
        for (int64_t m : {1, 3, 17}) {
          const std::vector<float> x = RandomActivations(m, cols, rng);
          std::vector<float> y(m * rows);
          BlockScaledMatMul(x.data(), m, w.view, y.data());
          std::vector<float> w_row(cols);
          for (int64_t i = 0; i < m; ++i) {
            const std::vector<float> x_hat = c.format == WeightFormat::kFp8E4m3
                                                 ? std::vector<float>(x.begin() + i * cols, x.begin() + (i + 1) * cols)
                                                 : DequantizedActivations(x.data() + i * cols, cols);
            for (int64_t j = 0; j < rows; ++j) {
              DequantizeRow(w.view, j, w_row.data());
              double exact = 0, magnitude = 0, activation_error = 0;
              for (int64_t k = 0; k < cols; ++k) {
                exact += static_cast<double>(w_row[k]) * x_hat[k];
                magnitude += std::fabs(static_cast<double>(w_row[k]) * x_hat[k]);
                activation_error += std::fabs(static_cast<double>(w_row[k]) * (x[i * cols + k] - x_hat[k]));
              }
              const double tolerance =
                  (std::min<int64_t>(cols, 128) + cols / 8.0 + 18) * std::ldexp(1.0, -24) * magnitude + 1e-30;
              ASSERT_NEAR(y[i * rows + j], exact, tolerance)
                  << IsaName(GetParam()) << " " << Name(c) << " rows " << rows << " cols " << cols << " m " << m << " ("
                  << i << ", " << j << ")";
              // The int8 rounding is at most half a step (amax16 / 254) per element; this sum is
              // its actual effect, which must stay within that worst case.
              if (c.format != WeightFormat::kFp8E4m3) {
                double bound = 0;
                for (int64_t k = 0; k < cols; k += 16) {
                  double amax = 0;
                  for (int64_t e = k; e < k + 16; ++e) amax = std::fmax(amax, std::fabs(x[i * cols + e]));
                  for (int64_t e = k; e < k + 16; ++e) bound += std::fabs(w_row[e]) * amax / 254.0 * 1.0001;
                }
                ASSERT_LE(activation_error, bound);
              }
            }
          }
        }
      }
    }
  }
}

TEST_P(BlockScaledMatMulTest, RowsDoNotDependOnBatchOrThreads) {
  std::mt19937 rng(12);
  const int64_t rows = 45, cols = 4096 + 160, m = 17;
  for (const Case& c : kCases) {
    const Matrix w = MakeMatrix(c, rows, cols, rng);
    const std::vector<float> x = RandomActivations(m, cols, rng);
    std::vector<float> batched(m * rows), single(rows), threaded(m * rows);
    BlockScaledMatMul(x.data(), m, w.view, batched.data());
    for (int64_t i = 0; i < m; ++i) {
      BlockScaledMatMul(x.data() + i * cols, 1, w.view, single.data());
      ASSERT_EQ(0, std::memcmp(single.data(), batched.data() + i * rows, rows * sizeof(float)))
          << IsaName(GetParam()) << " " << Name(c) << " row " << i;
    }
    const int threads = ThreadPool::Global().num_threads();
    ThreadPool::SetGlobalThreads(threads == 1 ? 3 : 1);
    BlockScaledMatMul(x.data(), m, w.view, threaded.data());
    ThreadPool::SetGlobalThreads(threads);
    ASSERT_EQ(0, std::memcmp(threaded.data(), batched.data(), batched.size() * sizeof(float)))
        << IsaName(GetParam()) << " " << Name(c);
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, BlockScaledMatMulTest, ::testing::ValuesIn(AvailableIsas()),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(IsaName(info.param)); });

}  // namespace
}  // namespace ember::quant
