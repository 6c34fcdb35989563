// The AMX tile GEMMs (gguf_packed_amx.cc) against the avx512 packed tiles: bit for bit, on shapes
// that leave partial weight groups (n % 16 != 0), partial activation tiles (m % 16 != 0), one to
// several blocks or super-blocks of k, strided weight rows and 1-3 threads; called directly (so a
// dispatch change cannot hide a kernel difference) and through GgufMatMul under each variant.
// Skipped on hosts without the amx level (most: it needs Sapphire Rapids or later).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/isa.h"
#include "core/thread_pool.h"
#include "quant/gguf_dot.h"
#include "quant/gguf_packed.h"
#include "quant/gguf_type_kernels.h"
#include "quant_test_util.h"

namespace ember::quant {
namespace {

const std::vector<GgmlType>& RoutedTypes() {
  static const std::vector<GgmlType> types = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                                              GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
  return types;
}

std::string TypeName(GgmlType type) { return std::string(GgmlTypeInfo(static_cast<uint32_t>(type))->name); }

using Weights = test_util::PackedTestMatrix;

// The packed copies are made under a packed level (amx packs as avx512 does).
using GgufPackedAmxTest = test_util::LevelTest<Isa::kAmx>;

// Every 16-row group, m activation rows quantized as GgufMatMul does, through both kernels; the
// activation buffer has the tile padding the AMX kernel's contract asks for, filled with noise.
TEST_F(GgufPackedAmxTest, KernelsAreBitIdenticalToAvx512) {
  std::mt19937 rng(7);
  for (const GgmlType type : RoutedTypes()) {
    SCOPED_TRACE(TypeName(type));
    const GgufPackedForm* form = FindGgufKernels(type)->packed;
    ASSERT_NE(form, nullptr);
    ASSERT_NE(form->rows_amx, nullptr);
    const int64_t block = test_util::BlockElements(type);
    for (const int64_t blocks : {1, 2, 3, 9}) {
      const int64_t k = blocks * block;
      for (const int64_t n : {1, 16, 21, 47}) {
        const Weights w = test_util::RandomPackedMatrix(type, n, k, /*pad=*/0, rng);
        const auto* packed = static_cast<const uint8_t*>(w.packed.get());
        const int64_t groups = (n + kPackRows - 1) / kPackRows;
        for (const int64_t m : {1, 15, 16, 17, 33}) {
          SCOPED_TRACE("k=" + std::to_string(k) + " n=" + std::to_string(n) + " m=" + std::to_string(m));
          const int64_t act_bytes =
              ActivationRowBytes(type, k) + (form->extend_activation ? form->extra_activation_bytes(k) : 0);
          const int64_t tiles = (m + kAmxTileRows - 1) / kAmxTileRows;
          std::vector<uint8_t> act(static_cast<size_t>(tiles * kAmxTileRows * act_bytes));
          for (uint8_t& b : act) b = static_cast<uint8_t>(rng());
          const std::vector<float> x = test_util::RandomActivationRows(m, k, rng);
          for (int64_t i = 0; i < m; ++i) {
            QuantizeActivationRow(type, x.data() + i * k, k, act.data() + i * act_bytes);
            if (form->extend_activation) form->extend_activation(act.data() + i * act_bytes, k);
          }
          std::vector<float> want(static_cast<size_t>(m * n), 1.0f), got(static_cast<size_t>(m * n), 2.0f);
          form->rows_avx512(packed, n, k, 0, groups, act.data(), m, act_bytes, want.data());
          form->rows_amx(packed, n, k, 0, groups, act.data(), m, act_bytes, got.data());
          for (int64_t i = 0; i < m * n; ++i) {
            ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
                << "row " << i / n << " col " << i % n << ": " << got[i] << " vs " << want[i];
          }
        }
      }
    }
  }
}

// GgufMatMul under amx (prefill shapes take the tiles) equals GgufMatMul under avx512 for every m
// around the tile and threshold edges, at 1-3 threads and on a strided matrix; and under amx the
// result does not depend on the thread count or on the batch (row i of m rows = row i alone).
TEST_F(GgufPackedAmxTest, MatMulMatchesAvx512AcrossBatchesThreadsAndStrides) {
  std::mt19937 rng(13);
  for (const GgmlType type : RoutedTypes()) {
    SCOPED_TRACE(TypeName(type));
    const int64_t block = test_util::BlockElements(type);
    const int64_t k = block == 32 ? 7 * 32 : 3 * 256, n = 37;
    const Weights w = test_util::RandomPackedMatrix(type, n, k, /*pad=*/12, rng);
    for (const int64_t m : {1, 15, 16, 17, 33, 64, 200}) {
      const std::vector<float> x = test_util::RandomActivationRows(m, k, rng);
      std::vector<float> want(static_cast<size_t>(m * n));
      ThreadPool::SetGlobalThreads(1);
      ASSERT_TRUE(SelectIsa("avx512").ok());
      GgufMatMul(x.data(), m, w.matrix, want.data());
      ASSERT_TRUE(SelectIsa("amx").ok());
      for (const int threads : {1, 2, 3}) {
        SCOPED_TRACE("m=" + std::to_string(m) + " threads=" + std::to_string(threads));
        ThreadPool::SetGlobalThreads(threads);
        std::vector<float> got(static_cast<size_t>(m * n), -1.0f);
        GgufMatMul(x.data(), m, w.matrix, got.data());
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
      }
    }
  }
}

}  // namespace
}  // namespace ember::quant
