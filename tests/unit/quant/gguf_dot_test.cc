// Dot-product variants against the scalar reference and against exact arithmetic.
//
// Three bounds per (type, k, row), with S = sum_i |w_hat_i * x_hat_i| (dequantized weights and
// dequantized activations, in double):
//  1. every variant vs the scalar reference: |v - r| <= 1e-5 * S. Both compute the same exact
//     integer block sums; they differ only in the order of the f32 scale products and additions
//     (at most k / 32 rounded terms, each within 2^-24 relative), ~1e-6 * S even for k = 4096.
//  2. reference vs sum_i w_hat_i * x_hat_i in double: |r - D| <= 1e-5 * S. Same argument: the
//     dequantized values are the ones the integer arithmetic multiplies, to f32 rounding.
//  3. reference vs the dot with the *unquantized* activations: |r - sum w_hat_i x_i| <=
//     sum_i |w_hat_i| * e_i + 1e-5 * S, where e_i bounds the activation rounding of element i
//     (0.5625 d for Q8_0's f16-rounded scale, 0.50003 d for Q8_K; d = block amax / 127; derived
//     in quant_test_util.h). This is the worst case, not a statistical estimate, so it holds for
//     every input.
#include "quant/gguf_dot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "formats/ggml_type.h"
#include "quant/gguf_dot_variants.h"
#include "quant_test_util.h"

namespace ember::quant {
namespace {

using test_util::Dequantized;
using test_util::Dot;
using test_util::QuantizeActivations;
using test_util::RandomActivations;
using test_util::RandomRow;

constexpr double kRelative = 1e-5;

struct Case {
  GgmlType type;
  std::vector<int64_t> ks;
};

std::vector<Case> Cases() {
  const std::vector<int64_t> k32 = {32, 64, 96, 160, 544, 576, 1024, 1536, 4096};
  const std::vector<int64_t> k256 = {256, 512, 768, 1024, 1280, 2304, 4096};
  return {
      {GgmlType::kQ4_0, k32},
      {GgmlType::kQ4_1, k32},
      {GgmlType::kQ5_0, k32},
      {GgmlType::kQ5_1, k32},
      {GgmlType::kQ8_0, k32},
      {GgmlType::kQ4_K, k256},
      {GgmlType::kQ5_K, k256},
      {GgmlType::kQ6_K, k256},
      {GgmlType::kF32, {1, 7, 64, 1000}},
      {GgmlType::kF16, {1, 7, 64, 1000}},
      {GgmlType::kBF16, {1, 7, 64, 1000}},
  };
}

std::string Name(GgmlType type) { return std::string(GgmlTypeInfo(static_cast<uint32_t>(type))->name); }

TEST(GgufDot, ActivationFormats) {
  EXPECT_EQ(ActivationFormatFor(GgmlType::kQ4_1), GgmlType::kQ8_0);
  EXPECT_EQ(ActivationFormatFor(GgmlType::kQ5_0), GgmlType::kQ8_0);
  EXPECT_EQ(ActivationFormatFor(GgmlType::kQ4_K), GgmlType::kQ8_K);
  EXPECT_EQ(ActivationFormatFor(GgmlType::kQ6_K), GgmlType::kQ8_K);
  EXPECT_EQ(ActivationFormatFor(GgmlType::kBF16), GgmlType::kF32);
  EXPECT_FALSE(ActivationFormatFor(GgmlType::kQ2_K).has_value());
  EXPECT_FALSE(ActivationFormatFor(GgmlType::kI8).has_value());
  EXPECT_EQ(ActivationRowBytes(GgmlType::kQ4_0, 4096), 4096 / 32 * (34 + 8));  // + Q8_0BlockSum
  EXPECT_EQ(ActivationRowBytes(GgmlType::kQ8_0, 96), 104 + 3 * 8);             // padded to 8
  EXPECT_EQ(ActivationRowBytes(GgmlType::kQ4_K, 4096), 4096 / 256 * 292);
}

TEST(GgufDot, EveryVariantHasEveryCaseAndNoMore) {
  for (const Isa isa : AvailableIsas()) {
    const DotVariant& v = kDotVariants.For(isa);
    for (const Case& c : Cases()) EXPECT_NE(v.For(c.type), nullptr) << IsaName(isa) << " " << Name(c.type);
    EXPECT_EQ(v.For(GgmlType::kQ3_K), nullptr);
  }
}

// The three bounds of the header comment for every type, k and variant, 3 rows each.
TEST(GgufDot, VariantsMatchReferenceAndExactArithmetic) {
  std::mt19937 rng(1234);
  for (const Case& c : Cases()) {
    for (int64_t k : c.ks) {
      for (int rep = 0; rep < 3; ++rep) {
        const std::vector<uint8_t> w = RandomRow(c.type, k, rng);
        const std::vector<float> x = RandomActivations(k, rng);
        const test_util::QuantizedActivations q = QuantizeActivations(c.type, x);
        const std::vector<float> w_hat = Dequantized(c.type, w.data(), k);
        const auto d_quant = Dot(w_hat, q.values);
        const auto d_exact = Dot(w_hat, x);
        double activation_bound = 0.0;
        for (int64_t i = 0; i < k; ++i) activation_bound += std::fabs(w_hat[i]) * q.error_bound[i];
        const double tolerance = kRelative * d_quant.magnitude + 1e-30;
        const std::string where = Name(c.type) + " k=" + std::to_string(k) + " rep " + std::to_string(rep);

        const float r = kDotRef.For(c.type)(k, w.data(), q.bytes.data());
        EXPECT_NEAR(r, d_quant.value, tolerance) << where << ": reference vs dequantized dot";
        EXPECT_NEAR(r, d_exact.value, activation_bound + tolerance) << where << ": reference vs exact dot";
        for (const Isa isa : AvailableIsas()) {
          const DotVariant* v = &kDotVariants.For(isa);
          const float got = v->For(c.type)(k, w.data(), q.bytes.data());
          EXPECT_NEAR(got, r, tolerance) << where << ": " << IsaName(isa) << " vs reference";
        }
      }
    }
  }
}

// Extreme quants: every quant byte 0x00, 0x7f, 0x80 or 0xff (all-max nibbles and 6-bit
// scales, Q8_0 weights of -128 and +127) against activations of one sign that quantize to +-127,
// so every product in a block has the same sign: int16 saturation or int32 overflow anywhere in
// a SIMD path would show.
TEST(GgufDot, ExtremeQuantsDoNotOverflow) {
  std::mt19937 rng(99);
  const int64_t k = 4096;
  for (const Case& c : Cases()) {
    if (c.type == GgmlType::kF32 || c.type == GgmlType::kF16 || c.type == GgmlType::kBF16) continue;
    for (uint8_t fill : {uint8_t{0x00}, uint8_t{0x7f}, uint8_t{0x80}, uint8_t{0xff}}) {
      for (float sign : {1.0f, -1.0f}) {
        std::vector<uint8_t> w(static_cast<size_t>(test_util::RowBytes(c.type, k)), fill);
        test_util::RandomizeScales(c.type, w, k, rng);
        const std::vector<float> x(static_cast<size_t>(k), sign);
        const test_util::QuantizedActivations q = QuantizeActivations(c.type, x);
        const auto d_quant = Dot(Dequantized(c.type, w.data(), k), q.values);
        const double tolerance = kRelative * d_quant.magnitude;
        const std::string where =
            Name(c.type) + " fill " + std::to_string(fill) + " sign " + std::to_string(sign);
        const float r = kDotRef.For(c.type)(k, w.data(), q.bytes.data());
        EXPECT_NEAR(r, d_quant.value, tolerance) << where;
        for (const Isa isa : AvailableIsas()) {
          const DotVariant* v = &kDotVariants.For(isa);
          EXPECT_NEAR(v->For(c.type)(k, w.data(), q.bytes.data()), r, tolerance) << where << " " << IsaName(isa);
        }
      }
    }
  }
}

// A multi-row dot gives, for every row, the bits of the one-row dot of the same variant (the
// engine's batch invariance rests on it), for 1 .. kMaxDotRows rows, odd and even block counts,
// and activation rows spaced wider than one row.
TEST(GgufDot, MultiRowDotsAreBitIdenticalToOneRowDots) {
  std::mt19937 rng(17);
  int checked = 0;
  for (const Case& c : Cases()) {
    for (const Isa isa : AvailableIsas()) {
      const DotVariant* v = &kDotVariants.For(isa);
      const VecDotRowsFn dot_rows = v->RowsFor(c.type);
      if (dot_rows == nullptr) continue;
      for (int64_t k : c.ks) {
        const std::vector<uint8_t> w = RandomRow(c.type, k, rng);
        const int64_t stride = ActivationRowBytes(c.type, k) + 8;
        std::vector<uint8_t> acts(static_cast<size_t>(stride * kMaxDotRows), 0);
        for (int r = 0; r < kMaxDotRows; ++r) {
          const test_util::QuantizedActivations q = QuantizeActivations(c.type, RandomActivations(k, rng));
          std::copy(q.bytes.begin(), q.bytes.end(), acts.begin() + r * stride);
        }
        for (int rows = 1; rows <= kMaxDotRows; ++rows) {
          float out[kMaxDotRows];
          dot_rows(k, w.data(), acts.data(), stride, rows, out);
          for (int r = 0; r < rows; ++r) {
            const float one = v->For(c.type)(k, w.data(), acts.data() + r * stride);
            EXPECT_EQ(std::memcmp(&out[r], &one, sizeof(float)), 0)
                << IsaName(isa) << " " << Name(c.type) << " k=" << k << " rows=" << rows << " row " << r << ": "
                << out[r] << " vs " << one;
          }
        }
        ++checked;
      }
    }
  }
  // The 32-element formats have multi-row dots on AVX-512 hosts; elsewhere nothing to compare.
  if (checked == 0) GTEST_SKIP() << "no variant on this host has multi-row dots";
}

}  // namespace
}  // namespace ember::quant
