// GgufMatMul: every variant against per-element reference dots, on odd shapes, and the
// determinism properties the model relies on (result independent of m, of the thread count and
// of the row split).
#include "quant/gguf_matmul.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "quant/gguf_dot.h"
#include "quant/gguf_dot_variants.h"
#include "quant_test_util.h"

namespace ember::quant {
namespace {

constexpr int64_t kMs[] = {1, 3, 17};
constexpr int64_t kNs[] = {1, 7, 33, 100};

struct Weights {
  std::vector<uint8_t> bytes;
  QuantMatrix matrix;
};

Weights RandomWeights(GgmlType type, int64_t n, int64_t k, std::mt19937& rng) {
  Weights w;
  const int64_t row_bytes = test_util::RowBytes(type, k);
  for (int64_t j = 0; j < n; ++j) {
    const std::vector<uint8_t> row = test_util::RandomRow(type, k, rng);
    w.bytes.insert(w.bytes.end(), row.begin(), row.end());
  }
  w.matrix = QuantMatrix{type, w.bytes.data(), n, k, row_bytes};
  return w;
}

// Restores the active variant and the global pool size after a test changes them.
class GgufMatMulTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = ActiveIsa(); }
  void TearDown() override {
    ASSERT_TRUE(SelectIsa(IsaName(saved_)).ok());
    ThreadPool::SetGlobalThreads(0);
  }

 private:
  Isa saved_ = Isa::kRef;
};

// y against reference dots of the same quantized activation rows (1e-5 * sum |w_hat x_hat|: the
// argument of gguf_dot_test.cc), for all variants, m in {1, 3, 17} and several n and k.
TEST_F(GgufMatMulTest, MatchesReferenceDotsForEveryVariant) {
  std::mt19937 rng(42);
  const GgmlType types[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                            GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K,
                            GgmlType::kQ5_1, GgmlType::kQ5_K, GgmlType::kF16};
  ThreadPool::SetGlobalThreads(2);
  for (GgmlType type : types) {
    const int64_t block = test_util::BlockElements(type) == 1 ? 32 : test_util::BlockElements(type);
    for (int64_t k : {block, 3 * block, 4096 / block * block}) {
      for (int64_t n : kNs) {
        const Weights w = RandomWeights(type, n, k, rng);
        for (int64_t m : kMs) {
          std::vector<float> x;
          for (int64_t i = 0; i < m; ++i) {
            const std::vector<float> row = test_util::RandomActivations(k, rng);
            x.insert(x.end(), row.begin(), row.end());
          }
          // Expected: reference dot per (i, j), and the magnitude for the tolerance.
          std::vector<float> want(static_cast<size_t>(m * n));
          std::vector<double> magnitude(static_cast<size_t>(m * n));
          for (int64_t i = 0; i < m; ++i) {
            const std::vector<float> xi(x.begin() + i * k, x.begin() + (i + 1) * k);
            const test_util::QuantizedActivations q = test_util::QuantizeActivations(type, xi);
            for (int64_t j = 0; j < n; ++j) {
              const uint8_t* wj = w.bytes.data() + j * w.matrix.row_bytes;
              want[i * n + j] = kDotRef.For(type)(k, wj, q.bytes.data());
              magnitude[i * n + j] = test_util::Dot(test_util::Dequantized(type, wj, k), q.values).magnitude;
            }
          }
          for (const Isa isa : AvailableIsas()) {
            ASSERT_TRUE(SelectIsa(IsaName(isa)).ok());
            std::vector<float> y(static_cast<size_t>(m * n), -1.0f);
            GgufMatMul(x.data(), m, w.matrix, y.data());
            for (int64_t e = 0; e < m * n; ++e) {
              ASSERT_NEAR(y[e], want[e], 1e-5 * magnitude[e] + 1e-30)
                  << IsaName(isa) << " " << GgmlTypeInfo(static_cast<uint32_t>(type))->name << " k=" << k
                  << " n=" << n << " m=" << m << " element " << e;
            }
          }
        }
      }
    }
  }
}

// Row i of a batched call equals a call with that row alone, bit for bit, with 1 or 2 threads:
// every output is the same dot product over the same quantized activation row, whatever the
// split, and whether it came from a multi-row dot (groups of kMaxDotRows rows; m = 17 leaves a
// one-row tail) or a one-row one.
TEST_F(GgufMatMulTest, BitIdenticalAcrossBatchingAndThreads) {
  std::mt19937 rng(5);
  const int64_t k = 1024, n = 300, m = 17;
  for (GgmlType type : {GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const Weights w = RandomWeights(type, n, k, rng);
    std::vector<float> x;
    for (int64_t i = 0; i < m; ++i) {
      const std::vector<float> row = test_util::RandomActivations(k, rng);
      x.insert(x.end(), row.begin(), row.end());
    }
    std::vector<float> batched(static_cast<size_t>(m * n));
    ThreadPool::SetGlobalThreads(2);
    GgufMatMul(x.data(), m, w.matrix, batched.data());
    ThreadPool::SetGlobalThreads(1);
    for (int64_t i = 0; i < m; ++i) {
      std::vector<float> single(static_cast<size_t>(n));
      GgufMatMul(x.data() + i * k, 1, w.matrix, single.data());
      EXPECT_EQ(std::memcmp(single.data(), batched.data() + i * n, n * sizeof(float)), 0) << "row " << i;
    }
  }
}

// A row stride larger than the dense row (a view into a wider buffer) is honoured.
TEST_F(GgufMatMulTest, HonoursRowStride) {
  std::mt19937 rng(8);
  const int64_t k = 512, n = 40;
  const Weights dense = RandomWeights(GgmlType::kQ4_K, n, k, rng);
  const int64_t stride = dense.matrix.row_bytes + 64;
  std::vector<uint8_t> padded(static_cast<size_t>(n * stride), 0xcd);
  for (int64_t j = 0; j < n; ++j) {
    std::memcpy(padded.data() + j * stride, dense.bytes.data() + j * dense.matrix.row_bytes,
                dense.matrix.row_bytes);
  }
  const QuantMatrix strided{GgmlType::kQ4_K, padded.data(), n, k, stride};
  const std::vector<float> x = test_util::RandomActivations(k, rng);
  std::vector<float> y_dense(n), y_strided(n);
  GgufMatMul(x.data(), 1, dense.matrix, y_dense.data());
  GgufMatMul(x.data(), 1, strided, y_strided.data());
  EXPECT_EQ(y_dense, y_strided);
}

TEST(GgufMatMul, SupportedTypes) {
  EXPECT_TRUE(GgufMatMulSupports(GgmlType::kQ4_1));
  EXPECT_TRUE(GgufMatMulSupports(GgmlType::kQ6_K));
  EXPECT_TRUE(GgufMatMulSupports(GgmlType::kF32));
  EXPECT_FALSE(GgufMatMulSupports(GgmlType::kQ3_K));
  EXPECT_FALSE(GgufMatMulSupports(GgmlType::kI32));
}

}  // namespace
}  // namespace ember::quant
