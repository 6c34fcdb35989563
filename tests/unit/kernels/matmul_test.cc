// Tests for the matmul variants (kernels/cpu/*) against the scalar oracle (kernels/ref), and
// for the determinism properties the model relies on: results independent of how the output
// columns are split across threads, and of whether a row was computed alone or in a batch.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtypes.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/ref/ref.h"

namespace ember::kernels {
namespace {

constexpr int64_t kMs[] = {1, 2, 3, 5, 17, 64};
constexpr int64_t kKs[] = {1, 7, 16, 31, 64, 100, 1000, 4096};
constexpr int64_t kNs[] = {1, 3, 17, 64, 100};

// The variants differ from the oracle only in the order of f32 additions (vector lanes, FMA
// instead of multiply-then-add, a reduction tree). Reordering a sum of k terms changes it by at
// most ~k * 2^-24 * sum_k |x * w| in the worst case and by ~sqrt(k) * 2^-24 of it typically;
// products of f32 activations and bf16 weights are exact in f32. Relative to sum_k |x * w|,
// 1e-5 therefore has ample margin for k <= 4096 on random data, while any real bug (a dropped
// or doubled term, a wrong row, a bad tail) shows up as an error of order 1.
constexpr double kTolerance = 1e-5;

std::vector<float> RandomF32(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values) v = dist(rng);
  return values;
}

std::vector<uint16_t> RandomBF16(int64_t count, uint32_t seed) {
  std::vector<uint16_t> values(static_cast<size_t>(count));
  const std::vector<float> f = RandomF32(count, seed);
  for (size_t i = 0; i < values.size(); ++i) values[i] = F32ToBF16(f[i]);
  return values;
}

float WeightValue(const uint16_t* w, int64_t i) { return BF16ToF32(w[i]); }
float WeightValue(const float* w, int64_t i) { return w[i]; }

// Weights of either dtype with the matching variant entry points.
struct BF16Weights {
  static constexpr const char* kName = "bf16";
  static std::vector<uint16_t> Random(int64_t count, uint32_t seed) { return RandomBF16(count, seed); }
  static MatMulBF16Fn Fn(const KernelVariant& v) { return v.matmul_bf16; }
  static constexpr MatMulBF16Fn kRef = &ref::MatMulBF16;
  static constexpr DType kDType = DType::kBF16;
};
struct F32Weights {
  static constexpr const char* kName = "f32";
  static std::vector<float> Random(int64_t count, uint32_t seed) { return RandomF32(count, seed); }
  static MatMulF32Fn Fn(const KernelVariant& v) { return v.matmul_f32; }
  static constexpr MatMulF32Fn kRef = &ref::MatMulF32;
  static constexpr DType kDType = DType::kF32;
};

const KernelVariant& VariantByName(const std::string& name) { return kKernelVariants.For(*ParseIsa(name)); }

// Every level the host runs (core/isa.h).
std::vector<std::string> VariantNames() {
  std::vector<std::string> names;
  for (const Isa isa : AvailableIsas()) names.emplace_back(IsaName(isa));
  return names;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class MatMulVariantTest : public ::testing::TestWithParam<std::string> {
 protected:
  const KernelVariant& variant() const { return VariantByName(GetParam()); }

  // Every shape of the grid, output written with a padded row stride so that writes outside
  // the [n_begin, n_end) columns are caught.
  template <typename Weights>
  void CheckAgainstReference() {
    const auto fn = Weights::Fn(variant());
    ASSERT_NE(fn, nullptr);
    uint32_t seed = 1;
    for (int64_t m : kMs) {
      for (int64_t k : kKs) {
        for (int64_t n : kNs) {
          SCOPED_TRACE(testing::Message() << Weights::kName << " m=" << m << " k=" << k << " n=" << n);
          const std::vector<float> x = RandomF32(m * k, seed++);
          const auto w = Weights::Random(n * k, seed++);
          const int64_t ldy = n + 3;
          std::vector<float> expected(static_cast<size_t>(m * ldy), 0.0f);
          Weights::kRef(x.data(), m, k, w.data(), 0, n, expected.data(), ldy);
          std::vector<float> got(static_cast<size_t>(m * ldy), NAN);
          fn(x.data(), m, k, w.data(), 0, n, got.data(), ldy);
          int failures = 0;
          for (int64_t i = 0; i < m && failures < 5; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double abs_sum = 0.0;
              for (int64_t p = 0; p < k; ++p) {
                abs_sum += std::fabs(static_cast<double>(x[i * k + p]) * WeightValue(w.data(), j * k + p));
              }
              const double err = std::fabs(static_cast<double>(got[i * ldy + j]) - expected[i * ldy + j]);
              if (!(err <= kTolerance * abs_sum + 1e-30)) {
                ADD_FAILURE() << "y[" << i << "," << j << "] = " << got[i * ldy + j] << ", ref "
                              << expected[i * ldy + j] << ", sum|x*w| " << abs_sum;
                ++failures;
              }
            }
            for (int64_t j = n; j < ldy; ++j) {
              EXPECT_TRUE(std::isnan(got[i * ldy + j])) << "wrote padding column " << j << " of row " << i;
            }
          }
        }
      }
    }
  }

  // Splitting [0, n) into pieces (as the thread pool would, but at arbitrary points, including
  // ones that break up the variant's row tiles) must give bitwise the same output.
  template <typename Weights>
  void CheckSplitIndependence() {
    const auto fn = Weights::Fn(variant());
    ASSERT_NE(fn, nullptr);
    std::mt19937 rng(7);
    for (int64_t m : {1, 2, 7, 17}) {
      for (int64_t k : {5, 33, 1000, 2063}) {
        const int64_t n = 61;
        SCOPED_TRACE(testing::Message() << Weights::kName << " m=" << m << " k=" << k);
        const std::vector<float> x = RandomF32(m * k, 11);
        const auto w = Weights::Random(n * k, 12);
        std::vector<float> whole(static_cast<size_t>(m * n));
        fn(x.data(), m, k, w.data(), 0, n, whole.data(), n);
        std::vector<float> again(whole.size());
        fn(x.data(), m, k, w.data(), 0, n, again.data(), n);
        EXPECT_TRUE(BitwiseEqual(whole, again)) << "not deterministic";
        // One range alone writes exactly its own columns.
        std::vector<float> range(whole.size(), NAN);
        fn(x.data(), m, k, w.data(), 5, 23, range.data(), n);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            const float v = range[i * n + j];
            if (j >= 5 && j < 23) {
              ASSERT_EQ(std::memcmp(&v, &whole[i * n + j], sizeof(float)), 0) << i << "," << j;
            } else {
              ASSERT_TRUE(std::isnan(v)) << "wrote outside [5, 23) at " << i << "," << j;
            }
          }
        }
        for (int trial = 0; trial < 20; ++trial) {
          std::vector<float> pieces(whole.size(), NAN);
          for (int64_t begin = 0; begin < n;) {
            const int64_t end = std::min<int64_t>(n, begin + 1 + static_cast<int64_t>(rng() % 13));
            fn(x.data(), m, k, w.data(), begin, end, pieces.data(), n);
            begin = end;
          }
          ASSERT_TRUE(BitwiseEqual(whole, pieces)) << "trial " << trial;
        }
      }
    }
  }

  // Row i of a batched (prefill) call equals a single-row (decode) call on row i, bitwise: the
  // variants accumulate each element the same way whatever tile computes it.
  template <typename Weights>
  void CheckRowIndependence() {
    const auto fn = Weights::Fn(variant());
    ASSERT_NE(fn, nullptr);
    for (int64_t k : {3, 100, 1000, 2063}) {
      const int64_t m = 17;
      const int64_t n = 37;
      SCOPED_TRACE(testing::Message() << Weights::kName << " k=" << k);
      const std::vector<float> x = RandomF32(m * k, 21);
      const auto w = Weights::Random(n * k, 22);
      std::vector<float> batched(static_cast<size_t>(m * n));
      fn(x.data(), m, k, w.data(), 0, n, batched.data(), n);
      for (int64_t i = 0; i < m; ++i) {
        std::vector<float> single(static_cast<size_t>(n));
        fn(x.data() + i * k, 1, k, w.data(), 0, n, single.data(), n);
        const std::vector<float> row(batched.begin() + i * n, batched.begin() + (i + 1) * n);
        ASSERT_TRUE(BitwiseEqual(row, single)) << "row " << i;
      }
    }
  }
};

TEST_P(MatMulVariantTest, BF16MatchesReference) { CheckAgainstReference<BF16Weights>(); }
TEST_P(MatMulVariantTest, F32MatchesReference) { CheckAgainstReference<F32Weights>(); }
TEST_P(MatMulVariantTest, BF16IndependentOfColumnSplit) { CheckSplitIndependence<BF16Weights>(); }
TEST_P(MatMulVariantTest, F32IndependentOfColumnSplit) { CheckSplitIndependence<F32Weights>(); }
TEST_P(MatMulVariantTest, BF16BatchedRowsEqualSingleRows) { CheckRowIndependence<BF16Weights>(); }
TEST_P(MatMulVariantTest, F32BatchedRowsEqualSingleRows) { CheckRowIndependence<F32Weights>(); }

// Exact small case: integer-valued data has exact f32 sums whatever the order.
TEST_P(MatMulVariantTest, ExactOnIntegers) {
  const int64_t m = 3, k = 37, n = 5;
  std::vector<float> x(m * k);
  std::vector<uint16_t> w(n * k);
  for (int64_t i = 0; i < m * k; ++i) x[i] = static_cast<float>(i % 7 - 3);
  for (int64_t i = 0; i < n * k; ++i) w[i] = F32ToBF16(static_cast<float>(i % 5 - 2));
  std::vector<float> expected(m * n), got(m * n);
  ref::MatMulBF16(x.data(), m, k, w.data(), 0, n, expected.data(), n);
  variant().matmul_bf16(x.data(), m, k, w.data(), 0, n, got.data(), n);
  EXPECT_TRUE(BitwiseEqual(expected, got));
}

// k = 0: every output is the empty sum, 0, in both the decode and the prefill paths.
TEST_P(MatMulVariantTest, EmptyReductionGivesZero) {
  const float x[1] = {0.0f};
  const uint16_t w[1] = {0};
  for (int64_t m : {1, 2, 17}) {
    std::vector<float> y(static_cast<size_t>(m * 9), NAN);
    variant().matmul_bf16(x, m, 0, w, 0, 9, y.data(), 9);
    for (float v : y) EXPECT_EQ(v, 0.0f) << "m=" << m;
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, MatMulVariantTest, ::testing::ValuesIn(VariantNames()),
                         [](const testing::TestParamInfo<std::string>& info) { return info.param; });

// The threaded wrapper: same bits as one direct call over all columns, for any pool size.
template <typename Weights>
void CheckThreadedWrapper() {
  const Isa previous = ActiveIsa();
  const int64_t m = 5, k = 300, n = 203;
  const std::vector<float> x = RandomF32(m * k, 31);
  const auto w = Weights::Random(n * k, 32);
  const TensorView view{Weights::kDType, Shape{n, k}, w.data()};
  std::vector<float> reference(static_cast<size_t>(m * n));
  Weights::kRef(x.data(), m, k, w.data(), 0, n, reference.data(), n);
  for (const Isa isa : AvailableIsas()) {
    ASSERT_TRUE(SelectIsa(IsaName(isa)).ok());
    std::vector<float> direct(static_cast<size_t>(m * n));
    const auto fn = Weights::Fn(kKernelVariants.For(isa));
    fn(x.data(), m, k, w.data(), 0, n, direct.data(), n);
    for (int threads : {1, 2, 3, 4, 7}) {
      SCOPED_TRACE(testing::Message() << Weights::kName << " " << IsaName(isa) << " threads=" << threads);
      ThreadPool::SetGlobalThreads(threads);
      std::vector<float> y(static_cast<size_t>(m * n), NAN);
      MatMul(x.data(), m, view, y.data());
      EXPECT_TRUE(BitwiseEqual(direct, y));
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_NEAR(y[i], reference[i], 1e-4) << "element " << i;  // |y| <~ sqrt(k) here
      }
    }
  }
  ThreadPool::SetGlobalThreads(0);
  ASSERT_TRUE(SelectIsa(IsaName(previous)).ok());
}

TEST(MatMulThreadedTest, BF16SameBitsForAnyThreadCount) { CheckThreadedWrapper<BF16Weights>(); }
TEST(MatMulThreadedTest, F32SameBitsForAnyThreadCount) { CheckThreadedWrapper<F32Weights>(); }

}  // namespace
}  // namespace ember::kernels
