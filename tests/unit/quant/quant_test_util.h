// Shared helpers for the GGUF quant tests: random rows of each block format and the error
// bounds the dot-product tests assert.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/dtypes.h"
#include "core/isa.h"
#include "core/thread_pool.h"
#include "formats/ggml_type.h"
#include "quant/gguf_blocks.h"
#include "quant/gguf_dequant.h"
#include "quant/gguf_dot.h"
#include "quant/gguf_matmul.h"
#include "quant/gguf_packed.h"
#include "support/isa_level_restorer.h"

namespace ember::quant::test_util {

inline int64_t RowBytes(GgmlType type, int64_t n) {
  return *GgmlRowBytes(*GgmlTypeInfo(static_cast<uint32_t>(type)), n);
}

inline int64_t BlockElements(GgmlType type) {
  return GgmlTypeInfo(static_cast<uint32_t>(type))->block_elements;
}

// An f16 bit pattern for a value with magnitude in [lo, hi), random sign if `signed_value`.
inline uint16_t RandomF16(std::mt19937& rng, float lo, float hi, bool signed_value) {
  std::uniform_real_distribution<float> mag(std::log(lo), std::log(hi));
  float v = std::exp(mag(rng));
  if (signed_value && (rng() & 1)) v = -v;
  return F32ToF16(v);
}

// Gives the f16 scale fields of a quantized row realistic random values (so products stay in
// the ranges real models produce), leaving the quant bytes as they are.
inline void RandomizeScales(GgmlType type, std::vector<uint8_t>& row, int64_t n, std::mt19937& rng) {
  const int64_t nb = n / BlockElements(type);
  for (int64_t i = 0; i < nb; ++i) {
    switch (type) {
      case GgmlType::kQ4_0:
        reinterpret_cast<BlockQ4_0*>(row.data())[i].d = RandomF16(rng, 1e-3f, 0.1f, true);
        break;
      case GgmlType::kQ4_1: {
        auto& b = reinterpret_cast<BlockQ4_1*>(row.data())[i];
        b.d = RandomF16(rng, 1e-3f, 0.1f, false);
        b.m = RandomF16(rng, 1e-3f, 0.5f, true);
        break;
      }
      case GgmlType::kQ5_0:
        reinterpret_cast<BlockQ5_0*>(row.data())[i].d = RandomF16(rng, 1e-3f, 0.1f, true);
        break;
      case GgmlType::kQ5_1: {
        auto& b = reinterpret_cast<BlockQ5_1*>(row.data())[i];
        b.d = RandomF16(rng, 1e-3f, 0.1f, false);
        b.m = RandomF16(rng, 1e-3f, 0.5f, true);
        break;
      }
      case GgmlType::kQ8_0:
        reinterpret_cast<BlockQ8_0*>(row.data())[i].d = RandomF16(rng, 1e-4f, 1e-2f, true);
        break;
      case GgmlType::kQ4_K: {
        auto& b = reinterpret_cast<BlockQ4_K*>(row.data())[i];
        b.d = RandomF16(rng, 1e-4f, 1e-2f, false);
        b.dmin = RandomF16(rng, 1e-4f, 1e-2f, false);
        break;
      }
      case GgmlType::kQ5_K: {
        auto& b = reinterpret_cast<BlockQ5_K*>(row.data())[i];
        b.d = RandomF16(rng, 1e-4f, 1e-2f, false);
        b.dmin = RandomF16(rng, 1e-4f, 1e-2f, false);
        break;
      }
      case GgmlType::kQ6_K:
        reinterpret_cast<BlockQ6_K*>(row.data())[i].d = RandomF16(rng, 1e-5f, 1e-3f, true);
        break;
      default:
        return;
    }
  }
}

// A row of `n` elements of `type`: random quant bytes with RandomizeScales' scales or, for
// F32/F16/BF16, values in [-1, 1).
inline std::vector<uint8_t> RandomRow(GgmlType type, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> row(static_cast<size_t>(RowBytes(type, n)));
  for (uint8_t& b : row) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  if (type == GgmlType::kF32) {
    auto* f = reinterpret_cast<float*>(row.data());
    for (int64_t i = 0; i < n; ++i) f[i] = unit(rng);
  } else if (type == GgmlType::kF16 || type == GgmlType::kBF16) {
    auto* h = reinterpret_cast<uint16_t*>(row.data());
    for (int64_t i = 0; i < n; ++i)
      h[i] = type == GgmlType::kF16 ? F32ToF16(unit(rng)) : F32ToBF16(unit(rng));
  } else {
    RandomizeScales(type, row, n, rng);
  }
  return row;
}

// Activations whose blocks have different magnitudes (so per-block scales matter), with some
// all-zero blocks (d = 0) and a few spikes. Block magnitudes stay >= 1e-2 so that Q8_0's f16 d
// is a normal f16 number (relative rounding error <= 2^-11, the bound below assumes it).
inline std::vector<float> RandomActivations(int64_t n, std::mt19937& rng) {
  std::vector<float> x(static_cast<size_t>(n));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(std::log(1e-2f), std::log(10.0f));
  for (int64_t b = 0; b < n; b += 32) {
    const int kind = static_cast<int>(rng() % 16);
    const float scale = kind == 0 ? 0.0f : std::exp(log_scale(rng));
    const int64_t end = std::min<int64_t>(n, b + 32);
    for (int64_t i = b; i < end; ++i) x[i] = scale * unit(rng);
    if (kind == 1) x[b + static_cast<int64_t>(rng() % static_cast<uint32_t>(end - b))] = 20.0f * scale;
  }
  return x;
}

// A test that runs under one kernel level (SetUp selects it, or skips the test naming why the
// host cannot run it); the previous level and the default thread count come back afterwards.
template <Isa kIsa>
class LevelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IsaSupported(kIsa)) GTEST_SKIP() << "no " << IsaName(kIsa) << " level here: " << IsaUnavailableReason(kIsa);
    restorer_.emplace();
    ASSERT_TRUE(SelectIsa(IsaName(kIsa)).ok());
  }

 private:
  std::optional<test::IsaLevelRestorer> restorer_;
};

// m rows of RandomActivations, row after row.
inline std::vector<float> RandomActivationRows(int64_t m, int64_t k, std::mt19937& rng) {
  std::vector<float> x;
  for (int64_t i = 0; i < m; ++i) {
    const std::vector<float> row = RandomActivations(k, rng);
    x.insert(x.end(), row.begin(), row.end());
  }
  return x;
}

// n RandomRow rows of k columns, `pad` random bytes after each (a strided view), with the packed
// copy PackQuantMatrix makes under the active level (null below avx512) set as the view's.
struct PackedTestMatrix {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const void> packed;
  QuantMatrix matrix;
};
inline PackedTestMatrix RandomPackedMatrix(GgmlType type, int64_t n, int64_t k, int64_t pad, std::mt19937& rng) {
  PackedTestMatrix w;
  for (int64_t j = 0; j < n; ++j) {
    std::vector<uint8_t> row = RandomRow(type, k, rng);
    for (int64_t p = 0; p < pad; ++p) row.push_back(static_cast<uint8_t>(rng()));
    w.bytes.insert(w.bytes.end(), row.begin(), row.end());
  }
  w.matrix = QuantMatrix{type, w.bytes.data(), n, k, RowBytes(type, k) + pad};
  w.packed = PackQuantMatrix(w.matrix);
  w.matrix.packed = w.packed.get();
  return w;
}

inline std::vector<float> Dequantized(GgmlType type, const void* row, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  EXPECT_TRUE(DequantizeRow(type, row, n, out.data()).ok());
  return out;
}

// Quantized activations for `weight_type` and their dequantized values.
struct QuantizedActivations {
  std::vector<uint8_t> bytes;
  std::vector<float> values;       // what the integer dot effectively multiplies by
  std::vector<float> error_bound;  // per element: bound on |x - values| (see ActivationErrorBound)
};

// Per-element bound on the activation rounding error |x - x_hat|, x_hat = d_stored * q:
//   |x - d q| <= (0.5 + 127 * 2^-22) d   (q rounds fl(x * fl(1 / d)), two f32 roundings)
//   |d q - d_stored q| <= 127 * |d - d_stored|
// with d = amax / 127 of the block. For Q8_K d is stored in f32 (second term ~0); for Q8_0 it is
// rounded to f16, |d - d_stored| <= 2^-11 d for normal d, so the bound is 0.5625 d.
inline QuantizedActivations QuantizeActivations(GgmlType weight_type, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  QuantizedActivations q;
  q.bytes.resize(static_cast<size_t>(ActivationRowBytes(weight_type, n)));
  QuantizeActivationRow(weight_type, x.data(), n, q.bytes.data());
  const GgmlType format = *ActivationFormatFor(weight_type);
  q.values = Dequantized(format, q.bytes.data(), n);
  q.error_bound.assign(x.size(), 0.0f);
  if (format == GgmlType::kF32) return q;
  const int64_t block = format == GgmlType::kQ8_0 ? kQK : kQKK;
  const double relative = format == GgmlType::kQ8_0 ? 0.5625 : 0.5 + 127.0 * std::ldexp(1.0, -22) + 1e-6;
  for (int64_t b = 0; b < n; b += block) {
    double amax = 0.0;
    for (int64_t i = b; i < b + block; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
    for (int64_t i = b; i < b + block; ++i) q.error_bound[i] = static_cast<float>(relative * amax / 127.0);
  }
  return q;
}

// sum_i a_i * b_i and sum_i |a_i * b_i| in double.
struct DoubleDot {
  double value = 0.0;
  double magnitude = 0.0;
};
inline DoubleDot Dot(const std::vector<float>& a, const std::vector<float>& b) {
  DoubleDot d;
  for (size_t i = 0; i < a.size(); ++i) {
    const double p = static_cast<double>(a[i]) * static_cast<double>(b[i]);
    d.value += p;
    d.magnitude += std::fabs(p);
  }
  return d;
}

}  // namespace ember::quant::test_util
