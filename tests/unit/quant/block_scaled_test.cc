// Block-scaled formats: the scalar codecs on every code, the OCP MX shared scale, the reference
// quantizers and DequantizeRow against values computed independently here (from the formats'
// definitions, not from the code under test), and shape validation.
#include "quant/block_scaled.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace ember::quant {
namespace {

// e2m1 magnitudes by code, from the OCP MX v1.0 table.
constexpr float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// e4m3fn from its definition: bias 7, subnormals m * 2^-9, S.1111.111 NaN.
float E4m3Definition(uint8_t code) {
  const int sign = code >> 7, e = (code >> 3) & 0xf, m = code & 7;
  if (e == 15 && m == 7) return std::nanf("");
  const double v = e == 0 ? m * std::ldexp(1.0, -9) : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
  return static_cast<float>(sign ? -v : v);
}

bool SameFloat(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0; }

TEST(BlockScaledCodecs, E2m1AllSixteenCodes) {
  for (int code = 0; code < 16; ++code) {
    const float expected = (code & 8) ? -kE2m1[code & 7] : kE2m1[code & 7];
    EXPECT_TRUE(SameFloat(E2m1ToFloat(static_cast<uint8_t>(code)), expected)) << code;
    // High bits are ignored.
    EXPECT_TRUE(SameFloat(E2m1ToFloat(static_cast<uint8_t>(code | 0xf0)), expected)) << code;
    EXPECT_EQ(FloatToE2m1(expected), code) << code;  // -0 encodes as 8
  }
  EXPECT_EQ(FloatToE2m1(-0.0f), 8);
}

TEST(BlockScaledCodecs, E2m1RoundsToNearestEvenAndSaturates) {
  // Midpoints go to the neighbour with an even code (mantissa bit 0).
  const struct {
    float x;
    uint8_t code;
  } cases[] = {{0.25f, 0},  {0.2500001f, 1}, {0.75f, 2}, {1.25f, 2}, {1.75f, 4}, {2.5f, 4},     {3.5f, 6},
               {5.0f, 6},   {5.0001f, 7},    {6.5f, 7},  {7.0f, 7},  {1e30f, 7}, {INFINITY, 7}, {-5.0f, 14},
               {-0.8f, 10}, {-INFINITY, 15}, {0.74f, 1}, {2.4f, 4},  {2.6f, 5}};
  for (const auto& c : cases) EXPECT_EQ(FloatToE2m1(c.x), c.code) << c.x;
  EXPECT_EQ(FloatToE2m1(std::nanf("")), 0);
}

TEST(BlockScaledCodecs, E8m0AllCodes) {
  for (int code = 0; code < 256; ++code) {
    const float v = E8m0ToFloat(static_cast<uint8_t>(code));
    if (code == 255) {
      EXPECT_TRUE(std::isnan(v));
    } else {
      EXPECT_EQ(v, std::ldexp(1.0f, code - 127)) << code;
    }
  }
}

TEST(BlockScaledCodecs, E8m0SharedScaleIsFloorLog2MinusEmax) {
  // OCP MX v1.0: X = 2^(floor(log2(amax)) - 2) for e2m1 elements.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-120.0f, 120.0f);
  for (int i = 0; i < 2000; ++i) {
    const float amax = std::exp2(exponent(rng));
    const int expected = static_cast<int>(std::floor(std::log2(static_cast<double>(amax)))) - 2 + 127;
    EXPECT_EQ(FloatToE8m0(amax), expected) << amax;
  }
  EXPECT_EQ(FloatToE8m0(6.0f), 127);  // 2^(2 - 2) = 1
  EXPECT_EQ(FloatToE8m0(4.0f), 127);
  EXPECT_EQ(FloatToE8m0(3.99f), 126);
  EXPECT_EQ(FloatToE8m0(8.0f, /*emax_elem=*/8), 127 + 3 - 8);  // e4m3 elements
  EXPECT_EQ(FloatToE8m0(0.0f), 0);                             // all-zero block: the smallest scale
  EXPECT_EQ(FloatToE8m0(1e-40f), 0);                           // clamped at 2^-127
  EXPECT_EQ(FloatToE8m0(3e38f), 127 + 127 - 2);                // floor(log2) = 127
  EXPECT_EQ(FloatToE8m0(INFINITY), 0xff);
  EXPECT_EQ(FloatToE8m0(std::nanf("")), 0xff);
}

// Quark's default "even" scale: amax rounded to one mantissa bit first (so [1.75, 2) * 2^k counts as
// 2^(k+1)), then floor(log2) - 2. Expected codes from the rule written with doubles.
TEST(BlockScaledCodecs, Mxfp4EvenScaleRoundsAmaxToOneMantissaBit) {
  using R = Mxfp4ScaleRounding;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> exponent(-120.0f, 120.0f);
  for (int i = 0; i < 2000; ++i) {
    const float amax = std::exp2(exponent(rng));
    const double k = std::floor(std::log2(static_cast<double>(amax)));
    const double mantissa = amax / std::exp2(k);  // [1, 2)
    const int expected = static_cast<int>(k) + (mantissa >= 1.75 ? 1 : 0) - 2 + 127;
    EXPECT_EQ(Mxfp4ScaleCode(amax, R::kEven), expected) << amax;
    EXPECT_EQ(Mxfp4ScaleCode(amax, R::kFloor), FloatToE8m0(amax)) << amax;
  }
  EXPECT_EQ(Mxfp4ScaleCode(6.0f, R::kEven), 127);      // 1.5 * 4: stays at 2^2, scale 1
  EXPECT_EQ(Mxfp4ScaleCode(6.99f, R::kEven), 127);     // 1.7475 * 4
  EXPECT_EQ(Mxfp4ScaleCode(7.0f, R::kEven), 128);      // 1.75 * 4 -> 8: scale 2, 7 -> 3.5 -> 4 (not 6)
  EXPECT_EQ(Mxfp4ScaleCode(7.0f, R::kFloor), 127);     // floor: scale 1, 7 saturates to 6
  EXPECT_EQ(Mxfp4ScaleCode(-7.0f, R::kEven), 128);     // magnitude
  EXPECT_EQ(Mxfp4ScaleCode(0.0f, R::kEven), 0);        // all-zero block: the smallest scale
  EXPECT_EQ(Mxfp4ScaleCode(1e-40f, R::kEven), 0);      // subnormal: clamped at 2^-127
  EXPECT_EQ(Mxfp4ScaleCode(3.4e38f, R::kEven), 0xfe);  // rounds past FLT_MAX: Quark clamps at 2^127
  EXPECT_EQ(Mxfp4ScaleCode(INFINITY, R::kEven), 0xff);
  EXPECT_EQ(Mxfp4ScaleCode(std::nanf(""), R::kEven), 0xff);
  EXPECT_EQ(Mxfp4ScaleRoundingName(R::kEven), "even");
  EXPECT_EQ(Mxfp4ScaleRoundingName(R::kFloor), "floor");

  // A block whose amax is 7: floor saturates it to 6, even keeps it as 4 * 2 = 8 (nearest on the
  // coarser grid); the other elements follow their block's scale.
  std::vector<float> x(32, 0.0f);
  x[0] = 7.0f;
  x[1] = 1.0f;
  uint8_t codes[16], scales[1];
  ASSERT_TRUE(QuantizeMxfp4(x.data(), 1, 32, codes, scales, R::kFloor).ok());
  EXPECT_EQ(scales[0], 127);
  EXPECT_EQ(E2m1ToFloat(codes[0] & 0xf), 6.0f);
  ASSERT_TRUE(QuantizeMxfp4(x.data(), 1, 32, codes, scales, R::kEven).ok());
  EXPECT_EQ(scales[0], 128);
  EXPECT_EQ(E2m1ToFloat(codes[0] & 0xf), 4.0f);
  EXPECT_EQ(E2m1ToFloat(codes[0] >> 4), 0.5f);
}

TEST(BlockScaledCodecs, E4m3AllCodesAndRoundTrip) {
  for (int code = 0; code < 256; ++code) {
    const float v = E4m3ToFloat(static_cast<uint8_t>(code));
    EXPECT_TRUE(SameFloat(v, E4m3Definition(static_cast<uint8_t>(code)))) << code;
    if (!std::isnan(v)) {
      EXPECT_EQ(FloatToE4m3(v), code) << code;
    }
  }
  EXPECT_EQ(E4m3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(E4m3ToFloat(0x01), std::ldexp(1.0f, -9));
}

TEST(BlockScaledCodecs, E4m3RoundsToNearestEvenAndSaturates) {
  // Every midpoint between neighbouring finite codes goes to the even code.
  for (int code = 0; code < 0x7e; ++code) {
    const float lo = E4m3ToFloat(static_cast<uint8_t>(code)), hi = E4m3ToFloat(static_cast<uint8_t>(code + 1));
    const float mid = 0.5f * (lo + hi);
    EXPECT_EQ(FloatToE4m3(mid), (code % 2 == 0) ? code : code + 1) << mid;
    EXPECT_EQ(FloatToE4m3(-mid), ((code % 2 == 0) ? code : code + 1) | 0x80) << mid;
    EXPECT_EQ(FloatToE4m3(std::nextafter(mid, 0.0f)), code) << mid;
    EXPECT_EQ(FloatToE4m3(std::nextafter(mid, 1e9f)), code + 1) << mid;
  }
  EXPECT_EQ(FloatToE4m3(449.0f), 0x7e);
  EXPECT_EQ(FloatToE4m3(1e9f), 0x7e);
  EXPECT_EQ(FloatToE4m3(-INFINITY), 0xfe);
  EXPECT_EQ(FloatToE4m3(std::nanf("")) & 0x7f, 0x7f);
}

// Random [rows, cols] values with a spread of magnitudes per block, some exact zeros.
std::vector<float> RandomMatrix(int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-6.0f, 2.0f);
  std::vector<float> x(rows * cols);
  for (int64_t i = 0; i < rows * cols; i += 16) {
    const float scale = std::exp2(log_scale(rng));
    for (int64_t j = i; j < i + 16 && j < rows * cols; ++j) x[j] = (rng() % 13 == 0) ? 0.0f : scale * normal(rng);
  }
  return x;
}

// Nearest e2m1 magnitude by exhaustive search, ties to the even code.
int NearestE2m1(float magnitude) {
  int best = 0;
  for (int c = 1; c < 8; ++c) {
    const float d = std::fabs(kE2m1[c] - magnitude), db = std::fabs(kE2m1[best] - magnitude);
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  return best;
}

TEST(BlockScaledQuantize, Mxfp4MatchesTheSpecAndDequantizes) {
  std::mt19937 rng(1);
  const int64_t rows = 5, cols = 96;
  const std::vector<float> x = RandomMatrix(rows, cols, rng);
  std::vector<uint8_t> codes(rows * cols / 2), scales(rows * cols / 32);
  ASSERT_TRUE(QuantizeMxfp4(x.data(), rows, cols, codes.data(), scales.data()).ok());
  const BlockScaledMatrix w = DenseBlockScaledMatrix(WeightFormat::kMxfp4, rows, cols, codes.data(), scales.data());
  ASSERT_TRUE(ValidateBlockScaledMatrix(w).ok());
  EXPECT_EQ(w.PackedBytes(), rows * cols / 2 + rows * cols / 32);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(w, r, row.data());
    for (int64_t b = 0; b < cols / 32; ++b) {
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[r * cols + b * 32 + i]));
      const int shared = amax == 0.0f ? -127 : std::max(-127, std::ilogb(amax) - 2);
      ASSERT_EQ(scales[r * cols / 32 + b], shared + 127);
      for (int i = 0; i < 32; ++i) {
        const int64_t k = b * 32 + i;
        const float v = x[r * cols + k] / std::ldexp(1.0f, shared);
        const int magnitude = NearestE2m1(std::fabs(v));
        const uint8_t code = (codes[r * cols / 2 + k / 2] >> (4 * (k % 2))) & 0xf;
        EXPECT_EQ(code & 7, magnitude) << r << " " << k << " " << v;
        if (magnitude != 0) {
          EXPECT_EQ(code >> 3, v < 0 ? 1 : 0);
        }
        EXPECT_EQ(row[k], (v < 0 ? -1.0f : 1.0f) * kE2m1[magnitude] * std::ldexp(1.0f, shared));
      }
    }
  }
}

TEST(BlockScaledQuantize, Nvfp4FollowsModelOpt) {
  std::mt19937 rng(2);
  const int64_t rows = 3, cols = 64;
  std::vector<float> x = RandomMatrix(rows, cols, rng);
  for (int i = 16; i < 32; ++i) x[i] = 0.0f;  // an all-zero block gets scale 1.0
  x[40] = -0.0f;                              // ModelOpt's sign is x < 0: -0 encodes as +0
  const float s2 = Nvfp4GlobalScale(AbsMax(x.data(), rows * cols));
  std::vector<uint8_t> codes(rows * cols / 2), scales(rows * cols / 16);
  ASSERT_TRUE(QuantizeNvfp4(x.data(), rows, cols, s2, codes.data(), scales.data()).ok());
  EXPECT_EQ(E4m3ToFloat(scales[1]), 1.0f);
  EXPECT_EQ(codes[20] & 0xf, 0);
  const BlockScaledMatrix w = DenseBlockScaledMatrix(WeightFormat::kNvfp4, rows, cols, codes.data(), scales.data(), s2);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(w, r, row.data());
    for (int64_t b = 0; b < cols / 16; ++b) {
      float amax = 0.0f;
      for (int i = 0; i < 16; ++i) amax = std::fmax(amax, std::fabs(x[r * cols + b * 16 + i]));
      float want_scale = amax / (6.0f * s2);
      if (want_scale == 0.0f) want_scale = 1.0f;
      want_scale = std::fmin(448.0f, std::fmax(want_scale, 1.0f / 512.0f));
      const float scale = E4m3ToFloat(scales[r * cols / 16 + b]);
      // The stored scale is the e4m3 value nearest the wanted one.
      const float step = std::ldexp(1.0f, std::max(-9, std::ilogb(want_scale) - 3));
      EXPECT_LE(std::fabs(scale - want_scale), 0.5f * step) << want_scale;
      for (int i = 0; i < 16; ++i) {
        const int64_t k = b * 16 + i;
        const float v = x[r * cols + k] / (scale * s2);
        const int magnitude = NearestE2m1(std::fabs(v));
        const uint8_t code = (codes[r * cols / 2 + k / 2] >> (4 * (k % 2))) & 0xf;
        EXPECT_EQ(code, magnitude | (v < 0.0f ? 8 : 0)) << r << " " << k;
        EXPECT_EQ(row[k], (v < 0 ? -1.0f : 1.0f) * kE2m1[magnitude] * (scale * s2));
      }
    }
  }
}

TEST(BlockScaledQuantize, Fp8AllScaleKinds) {
  std::mt19937 rng(3);
  const int64_t rows = 130, cols = 144;  // partial 128x128 blocks in both directions
  const std::vector<float> x = RandomMatrix(rows, cols, rng);
  for (Fp8ScaleKind kind : {Fp8ScaleKind::kPerTensor, Fp8ScaleKind::kPerChannel, Fp8ScaleKind::kBlock128}) {
    std::vector<uint8_t> codes(rows * cols);
    std::vector<float> scales(Fp8ScaleCount(kind, rows, cols));
    float global = 0.0f;
    ASSERT_TRUE(QuantizeFp8(x.data(), rows, cols, kind, codes.data(), scales.data(), &global).ok());
    const BlockScaledMatrix w =
        DenseBlockScaledMatrix(WeightFormat::kFp8E4m3, rows, cols, codes.data(), scales.data(), global, kind);
    ASSERT_TRUE(ValidateBlockScaledMatrix(w).ok()) << Fp8ScaleKindName(kind);
    std::vector<float> row(cols);
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(w, r, row.data());
      for (int64_t k = 0; k < cols; ++k) {
        // Independent scale: amax / 448 over the kind's region.
        int64_t r0 = 0, r1 = rows, k0 = 0, k1 = cols;
        if (kind == Fp8ScaleKind::kPerChannel) r0 = r, r1 = r + 1;
        if (kind == Fp8ScaleKind::kBlock128) {
          r0 = r / 128 * 128, r1 = std::min(rows, r0 + 128), k0 = k / 128 * 128, k1 = std::min(cols, k0 + 128);
        }
        float amax = 0.0f;
        for (int64_t rr = r0; rr < r1; ++rr)
          for (int64_t kk = k0; kk < k1; ++kk) amax = std::fmax(amax, std::fabs(x[rr * cols + kk]));
        const float scale = amax / 448.0f;
        const uint8_t code = codes[r * cols + k];
        EXPECT_EQ(code, FloatToE4m3(x[r * cols + k] / scale));
        EXPECT_EQ(row[k], E4m3Definition(code) * scale) << r << " " << k;
      }
    }
  }
}

TEST(BlockScaledMatrix, StridedViewsAndGateUpHalves) {
  // Two halves of one NVFP4 tensor with separate global scales, as the Muse gate_up_proj stores
  // them: each half is a view with its own global_scale.
  std::mt19937 rng(4);
  const int64_t rows = 8, cols = 32;
  const std::vector<float> x = RandomMatrix(rows, cols, rng);
  const float s_gate = Nvfp4GlobalScale(AbsMax(x.data(), rows / 2 * cols));
  const float s_up = Nvfp4GlobalScale(AbsMax(x.data() + rows / 2 * cols, rows / 2 * cols));
  std::vector<uint8_t> codes(rows * cols / 2), scales(rows * cols / 16);
  ASSERT_TRUE(QuantizeNvfp4(x.data(), rows / 2, cols, s_gate, codes.data(), scales.data()).ok());
  ASSERT_TRUE(QuantizeNvfp4(x.data() + rows / 2 * cols, rows / 2, cols, s_up, codes.data() + rows / 2 * cols / 2,
                            scales.data() + rows / 2 * cols / 16)
                  .ok());
  const BlockScaledMatrix fused = DenseBlockScaledMatrix(WeightFormat::kNvfp4, rows, cols, codes.data(), scales.data());
  Expected<BlockScaledMatrix> up_view = SliceRows(fused, rows / 2, rows / 2);
  ASSERT_TRUE(up_view.ok());
  BlockScaledMatrix up = *up_view;
  up.global_scale = s_up;
  EXPECT_EQ(up.codes, codes.data() + rows / 2 * cols / 2);
  EXPECT_EQ(up.scales, scales.data() + rows / 2 * cols / 16);
  EXPECT_FALSE(SliceRows(fused, rows / 2, rows / 2 + 1).ok());
  uint8_t fp8_codes[256 * 16] = {};
  float block_scales[2] = {1.0f, 2.0f};
  const BlockScaledMatrix fp8 =
      DenseBlockScaledMatrix(WeightFormat::kFp8E4m3, 256, 16, fp8_codes, block_scales, 1.0f, Fp8ScaleKind::kBlock128);
  EXPECT_FALSE(SliceRows(fp8, 64, 64).ok());
  ASSERT_TRUE(SliceRows(fp8, 128, 128).ok());
  EXPECT_EQ(SliceRows(fp8, 128, 128)->scales, &block_scales[1]);
  std::vector<float> row(cols);
  DequantizeRow(up, 1, row.data());
  const float* want = x.data() + (rows / 2 + 1) * cols;
  for (int64_t k = 0; k < cols; ++k) {
    // Half of the widest e2m1 step (4 -> 6) in units of the block scale amax16 / 6, plus the e4m3
    // rounding of that scale (2^-4 relative).
    const float amax = AbsMax(want + k / 16 * 16, 16);
    EXPECT_NEAR(row[k], want[k], amax / 6.0f * (1.0f + 1.0f / 16) * 1.0001f) << k;
  }
}

TEST(BlockScaledMatrix, ValidationNamesTheProblem) {
  uint8_t bytes[64] = {};
  BlockScaledMatrix w = DenseBlockScaledMatrix(WeightFormat::kMxfp4, 2, 48, bytes, bytes);
  Status s = ValidateBlockScaledMatrix(w);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("multiple of 32"), std::string::npos) << s.message();
  w = DenseBlockScaledMatrix(WeightFormat::kNvfp4, 2, 48, bytes, bytes);
  EXPECT_TRUE(ValidateBlockScaledMatrix(w).ok());
  w.codes_row_stride = 10;
  EXPECT_NE(ValidateBlockScaledMatrix(w).message().find("row stride"), std::string::npos);
  w = DenseBlockScaledMatrix(WeightFormat::kNvfp4, 2, 48, bytes, nullptr);
  EXPECT_NE(ValidateBlockScaledMatrix(w).message().find("no scales"), std::string::npos);
  w = DenseBlockScaledMatrix(WeightFormat::kFp8E4m3, 2, 24, bytes, nullptr);
  EXPECT_NE(ValidateBlockScaledMatrix(w).message().find("multiple of 16"), std::string::npos);
  w = DenseBlockScaledMatrix(WeightFormat::kFp8E4m3, 2, 32, bytes, nullptr);
  EXPECT_TRUE(ValidateBlockScaledMatrix(w).ok());  // per-tensor needs no scale array
  std::vector<float> x(48);
  uint8_t codes[48], scales[4];
  EXPECT_EQ(QuantizeMxfp4(x.data(), 1, 48, codes, scales).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(QuantizeNvfp4(x.data(), 1, 48, 0.0f, codes, scales).code(), StatusCode::kInvalidArgument);
  // An all-zero tensor: global scale 1, block scales 1, codes 0.
  ASSERT_TRUE(QuantizeNvfp4(x.data(), 1, 48, Nvfp4GlobalScale(AbsMax(x.data(), 48)), codes, scales).ok());
  for (int i = 0; i < 24; ++i) EXPECT_EQ(codes[i], 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(E4m3ToFloat(scales[i]), 1.0f);
}

}  // namespace
}  // namespace ember::quant
