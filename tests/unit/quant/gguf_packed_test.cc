// The packed GEMMs (gguf_packed.h): the packing round-trips, the kernel matches the
// reference dots within the gguf_dot_test bound, and its results do not depend on m, on which
// rows share a tile, on the thread count or on n's padding (batch invariance).
#include "quant/gguf_packed.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "quant/gguf_dequant.h"
#include "quant/gguf_dot.h"
#include "quant/gguf_dot_variants.h"
#include "quant/gguf_type_kernels.h"
#include "quant_test_util.h"

namespace ember::quant {
namespace {

using Packed = test_util::PackedTestMatrix;

Packed RandomPacked(GgmlType type, int64_t n, int64_t k, std::mt19937& rng) {
  return test_util::RandomPackedMatrix(type, n, k, /*pad=*/0, rng);
}

std::vector<float> RandomX(int64_t m, int64_t k, std::mt19937& rng) { return test_util::RandomActivationRows(m, k, rng); }

// Every test runs under the avx512 level (AVX-512 tiles) and the avx2 one (AVX2 tiles, for the
// types that have them), each where the host has it.
template <typename Level>
class GgufPackedTest : public Level {};
using Levels = ::testing::Types<test_util::LevelTest<Isa::kAvx512>, test_util::LevelTest<Isa::kAvx2>>;
TYPED_TEST_SUITE(GgufPackedTest, Levels);

// The types with a packed form that the active level multiplies with: every one under avx512,
// those with AVX2 tiles under avx2.
std::vector<GgmlType> PackedTypes() {
  std::vector<GgmlType> types;
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
                        GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    if (ActiveIsa() >= Isa::kAvx512 || FindGgufKernels(type)->packed->rows_avx2 != nullptr) types.push_back(type);
  }
  return types;
}

uint16_t F16At(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Low four bits of element l (< 32) of row c in the nibble vectors at p (gguf_packed.h).
int PackedNibble(const uint8_t* p, int64_t c, int l) {
  const int t = l / 8, nibble = (l % 8) / 4;
  return (p[64 * t + 4 * c + l % 4] >> (4 * nibble)) & 0x0f;
}

// 16 if the fifth bit of element l (< 32) of row c is set in the eight u64 masks at p.
int PackedFifthBit(const uint8_t* p, int64_t c, int l) {
  uint64_t mask;
  std::memcpy(&mask, p + 8 * (l / 4), sizeof(mask));
  return static_cast<int>(((mask >> (4 * c + l % 4)) & 1) << 4);
}

// Element e of row c from block b of group g, decoded from the documented layout by hand and
// evaluated in DequantizeRow's (gguf-py's) order of roundings.
float PackedElement(GgmlType type, const uint8_t* packed, int64_t nb, int64_t g, int64_t c, int64_t b, int e) {
  switch (type) {
    case GgmlType::kQ4_0: {
      const uint8_t* block = packed + (g * nb + b) * kPackedQ4_0BlockBytes;
      return F16ToF32(F16At(block + 2 * c)) * static_cast<float>(PackedNibble(block + 32, c, e) - 8);
    }
    case GgmlType::kQ4_1: {
      const uint8_t* block = packed + (g * nb + b) * kPackedQ4_1BlockBytes;
      return F16ToF32(F16At(block + 2 * c)) * static_cast<float>(PackedNibble(block + 64, c, e)) +
             F16ToF32(F16At(block + 32 + 2 * c));
    }
    case GgmlType::kQ5_0: {
      const uint8_t* block = packed + (g * nb + b) * kPackedQ5_0BlockBytes;
      const int q = PackedNibble(block + 32, c, e) | PackedFifthBit(block + 288, c, e);
      return F16ToF32(F16At(block + 2 * c)) * static_cast<float>(q - 16);
    }
    case GgmlType::kQ5_1: {
      const uint8_t* block = packed + (g * nb + b) * kPackedQ5_1BlockBytes;
      const int q = PackedNibble(block + 64, c, e) | PackedFifthBit(block + 320, c, e);
      return F16ToF32(F16At(block + 2 * c)) * static_cast<float>(q) + F16ToF32(F16At(block + 32 + 2 * c));
    }
    case GgmlType::kQ8_0: {
      const uint8_t* block = packed + (g * nb + b) * kPackedQ8_0BlockBytes;
      const auto q = static_cast<int8_t>(block[32 + 64 * (e / 4) + 4 * c + e % 4] ^ 0x80);
      return static_cast<float>(q) * F16ToF32(F16At(block + 2 * c));
    }
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: {
      const bool q5 = type == GgmlType::kQ5_K;
      const uint8_t* block = packed + (g * nb + b) * (q5 ? kPackedQ5_KBlockBytes : kPackedQ4_KBlockBytes);
      const int sb = e / 32;
      const int q = PackedNibble(block + 320 + 256 * sb, c, e % 32) |
                    (q5 ? PackedFifthBit(block + kPackedQ4_KBlockBytes + 64 * sb, c, e % 32) : 0);
      // gguf-py's order of roundings: (d * sc) * q - (dmin * m).
      return F16ToF32(F16At(block + 2 * c)) * static_cast<float>(block[64 + 16 * sb + c]) * static_cast<float>(q) -
             F16ToF32(F16At(block + 32 + 2 * c)) * static_cast<float>(block[192 + 16 * sb + c]);
    }
    case GgmlType::kQ6_K: {
      const uint8_t* block = packed + (g * nb + b) * kPackedQ6_KBlockBytes;
      const int sb = e / 32, l = e % 32, j = l / 4, u = j / 4, s = j % 4;
      const uint8_t* sub = block + 288 + 384 * sb;
      const int top = (sub[256 + 64 * u + 4 * c + l % 4] >> (2 * s)) & 3;
      const int q = PackedNibble(sub, c, l) | top << 4;
      const int group = e / 16;
      const auto scale = static_cast<int8_t>(block[32 + 32 * (group / 2) + 2 * c + group % 2]);
      return F16ToF32(F16At(block + 2 * c)) * static_cast<float>(scale) * static_cast<float>(q - 32);
    }
    default:
      ADD_FAILURE() << "no packed layout for type " << static_cast<int>(type);
      return 0.0f;
  }
}

// Unpacking each layout by hand gives back every row's dequantized values.
TYPED_TEST(GgufPackedTest, LayoutHoldsEveryElement) {
  for (GgmlType type : PackedTypes()) {
    SCOPED_TRACE(static_cast<int>(type));
    std::mt19937 rng(3);
    const int64_t block = test_util::BlockElements(type);
    const int64_t n = 21, k = 2 * block, nb = k / block;
    const Packed w = RandomPacked(type, n, k, rng);
    const auto* packed = static_cast<const uint8_t*>(w.packed.get());
    ASSERT_NE(packed, nullptr);
    for (int64_t row = 0; row < n; ++row) {
      std::vector<float> want(k);
      ASSERT_TRUE(DequantizeRow(type, w.bytes.data() + row * w.matrix.row_bytes, k, want.data()).ok());
      for (int64_t b = 0; b < nb; ++b) {
        for (int e = 0; e < block; ++e) {
          ASSERT_EQ(PackedElement(type, packed, nb, row / kPackRows, row % kPackRows, b, e), want[b * block + e])
              << "row " << row << " e " << b * block + e;
        }
      }
    }
  }
}

TYPED_TEST(GgufPackedTest, MatchesReferenceDots) {
  std::mt19937 rng(11);
  ThreadPool::SetGlobalThreads(2);
  for (GgmlType type : PackedTypes()) {
  for (int64_t k : test_util::BlockElements(type) == 32 ? std::vector<int64_t>{32, 96, 640, 4096}
                                                        : std::vector<int64_t>{256, 1024, 2048}) {
    for (int64_t n : {1, 16, 33, 100}) {
      const Packed w = RandomPacked(type, n, k, rng);
      for (int64_t m : {1, 5, 9}) {
        const std::vector<float> x = RandomX(m, k, rng);
        std::vector<float> y(static_cast<size_t>(m * n), -1.0f);
        GgufMatMul(x.data(), m, w.matrix, y.data());
        for (int64_t i = 0; i < m; ++i) {
          const std::vector<float> xi(x.begin() + i * k, x.begin() + (i + 1) * k);
          const test_util::QuantizedActivations q = test_util::QuantizeActivations(type, xi);
          for (int64_t j = 0; j < n; ++j) {
            const uint8_t* wj = w.bytes.data() + j * w.matrix.row_bytes;
            const float want = kDotRef.For(type)(k, wj, q.bytes.data());
            const double magnitude = test_util::Dot(test_util::Dequantized(type, wj, k), q.values).magnitude;
            ASSERT_NEAR(y[i * n + j], want, 1e-5 * magnitude + 1e-30)
                << "type " << static_cast<int>(type) << " k=" << k << " n=" << n << " m=" << m;
          }
        }
      }
    }
  }
  }
}

// Row i of a batch (4-row tiles and a 2- or 3-row tail, 2 threads) equals that row alone on one
// thread, and a matrix's leading rows give the same bits as the same rows inside a taller one.
TYPED_TEST(GgufPackedTest, BitIdenticalAcrossBatchingThreadsAndPadding) {
  for (GgmlType type : PackedTypes()) {
  SCOPED_TRACE(static_cast<int>(type));
  std::mt19937 rng(5);
  const int64_t k = test_util::BlockElements(type) == 32 ? 640 : 1024, n = 300, m = 19;
  const Packed w = RandomPacked(type, n, k, rng);
  const std::vector<float> x = RandomX(m, k, rng);
  std::vector<float> batched(static_cast<size_t>(m * n));
  // 19 rows: four 4-row tiles and a 3-row one; the first 6: a 4-row and a 2-row tile.
  std::vector<float> six(static_cast<size_t>(6 * n));
  ThreadPool::SetGlobalThreads(2);
  GgufMatMul(x.data(), m, w.matrix, batched.data());
  GgufMatMul(x.data(), 6, w.matrix, six.data());
  ThreadPool::SetGlobalThreads(1);
  for (int64_t i = 0; i < m; ++i) {
    std::vector<float> single(static_cast<size_t>(n));
    GgufMatMul(x.data() + i * k, 1, w.matrix, single.data());
    EXPECT_EQ(std::memcmp(single.data(), batched.data() + i * n, n * sizeof(float)), 0) << "row " << i;
    if (i < 6) {
      EXPECT_EQ(std::memcmp(single.data(), six.data() + i * n, n * sizeof(float)), 0) << "row " << i << " of 6";
    }
  }
  QuantMatrix head{type, w.bytes.data(), 37, k, w.matrix.row_bytes};
  const std::shared_ptr<const void> head_packed = PackQuantMatrix(head);
  head.packed = head_packed.get();
  std::vector<float> head_y(static_cast<size_t>(m * 37));
  GgufMatMul(x.data(), m, head, head_y.data());
  for (int64_t i = 0; i < m; ++i) {
    EXPECT_EQ(std::memcmp(head_y.data() + i * 37, batched.data() + i * n, 37 * sizeof(float)), 0) << "row " << i;
  }
  }
}

// The AVX2 tiles give the AVX-512 tiles' bits (same integers, same f32 sequence per lane), so a
// model's logits do not depend on which of the two a host runs. Needs an AVX-512 host.
TEST(GgufPackedAvx2Test, SameBitsAsTheAvx512Tiles) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "no avx512 level here: " << IsaUnavailableReason(Isa::kAvx512);
  test::IsaLevelRestorer restore;
  ThreadPool::SetGlobalThreads(2);
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0}) {
    SCOPED_TRACE(static_cast<int>(type));
    std::mt19937 rng(17);
    const int64_t n = 45, k = 640;
    ASSERT_TRUE(SelectIsa("avx512").ok());
    const Packed w = RandomPacked(type, n, k, rng);  // the layout is the same under both levels
    ASSERT_NE(w.packed, nullptr);
    for (int64_t m : {1, 3, 7}) {
      const std::vector<float> x = RandomX(m, k, rng);
      std::vector<float> avx512(static_cast<size_t>(m * n)), avx2(static_cast<size_t>(m * n));
      ASSERT_TRUE(SelectIsa("avx512").ok());
      GgufMatMul(x.data(), m, w.matrix, avx512.data());
      ASSERT_TRUE(SelectIsa("avx2").ok());
      GgufMatMul(x.data(), m, w.matrix, avx2.data());
      EXPECT_EQ(std::memcmp(avx512.data(), avx2.data(), avx2.size() * sizeof(float)), 0) << "m=" << m;
    }
  }
}

// Mutation guard for the level switch above: under avx2 with a packed copy, GgufMatMul runs the
// AVX2 tiles, not the row dots (whose f32 order differs, so the bits would too).
TYPED_TEST(GgufPackedTest, Avx2RunsTheTilesNotTheRowDots) {
  if (ActiveIsa() != Isa::kAvx2) GTEST_SKIP() << "the avx2 level only";
  std::mt19937 rng(23);
  const int64_t n = 64, k = 4096, m = 2;
  int differ = 0;
  for (GgmlType type : PackedTypes()) {
    const Packed w = RandomPacked(type, n, k, rng);
    ASSERT_NE(w.packed, nullptr) << static_cast<int>(type);
    const std::vector<float> x = RandomX(m, k, rng);
    std::vector<float> tiles(static_cast<size_t>(m * n)), dots(static_cast<size_t>(m * n));
    GgufMatMul(x.data(), m, w.matrix, tiles.data());
    QuantMatrix plain = w.matrix;
    plain.packed = nullptr;
    GgufMatMul(x.data(), m, plain, dots.data());
    differ += std::memcmp(tiles.data(), dots.data(), tiles.size() * sizeof(float)) != 0;
  }
  EXPECT_EQ(differ, static_cast<int>(PackedTypes().size()));
}

}  // namespace
}  // namespace ember::quant
