// Exhaustive tests of the scalar dtype conversions (core/dtypes.h, core/dtype_convert.cc) against
// the independent reference of dtype_reference.h.
//
// Every code of every 4-, 8- and 16-bit format is decoded and checked against a value computed
// from the code's sign, exponent and mantissa fields with ldexp, written independently of the
// implementation. Encoding is checked against a round-to-nearest-even reference built on the
// sorted table of representable values (comparing 2|x| with the sum of the two neighbours,
// exactly, in double), at every midpoint between adjacent codes and one f32 ulp either side, at the
// overflow and subnormal boundaries and on random samples. The checks against the CPU's
// conversion instructions and ml_dtypes are in dtypes_crosscheck_test.cc.
#include "core/dtypes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dtype_reference.h"

namespace ember::test {
namespace {

class FormatTest : public ::testing::TestWithParam<Format> {};

// ---- Decoding -----------------------------------------------------------------------------------

TEST_P(FormatTest, DecodeEveryCodeMatchesFieldFormula) {
  const Format& f = GetParam();
  for (uint32_t code = 0; code < f.NumCodes(); ++code) {
    bool nan, inf;
    const double expected = FieldValue(f, code, &nan, &inf);
    const float got = f.decode(code);
    const bool negative = f.has_sign && (code & f.SignBit());
    SCOPED_TRACE(std::string(f.name) + " code " + Hex(code));
    if (std::string(f.name) == "bf16") {
      EXPECT_EQ(Bits(got), code << 16);  // bf16 is the top half of an f32, NaN payloads included
    }
    if (nan) {
      EXPECT_TRUE(std::isnan(got));
      EXPECT_EQ(std::signbit(got), negative);
      if (std::string(f.name) != "bf16") {
        EXPECT_TRUE(Bits(got) & 0x00400000u) << "decoded NaN must be quiet";
      }
    } else if (inf) {
      EXPECT_TRUE(std::isinf(got));
      EXPECT_EQ(std::signbit(got), negative);
    } else {
      EXPECT_EQ(static_cast<double>(got), expected);
      EXPECT_EQ(std::signbit(got), negative);  // -0 decodes to -0.0f
    }
  }
}

TEST_P(FormatTest, DecodedValuesAreStrictlyIncreasingAndSymmetric) {
  const Format& f = GetParam();
  // Magnitude codes 0..max_finite, then (for IEEE formats) infinity, in increasing order.
  for (uint32_t code = 1; code <= f.max_finite; ++code) {
    ASSERT_LT(f.decode(code - 1), f.decode(code)) << f.name << " code " << Hex(code);
  }
  if (f.specials == Specials::kIeee) {
    EXPECT_EQ(f.decode(f.max_finite + 1), std::numeric_limits<float>::infinity());
  }
  if (f.has_sign) {
    for (uint32_t code = 0; code <= f.max_finite + (f.specials == Specials::kIeee); ++code) {
      EXPECT_EQ(f.decode(code | f.SignBit()), -f.decode(code)) << f.name << " " << Hex(code);
    }
  }
}

TEST_P(FormatTest, EveryCodeRoundTripsThroughF32) {
  const Format& f = GetParam();
  for (uint32_t code = 0; code < f.NumCodes(); ++code) {
    const float value = f.decode(code);
    const uint32_t back = f.encode(value);
    if (std::isnan(value)) {
      EXPECT_EQ(back, NaNRoundTrip(f, code)) << f.name << " NaN code " << Hex(code);
    } else if (std::isinf(value)) {  // saturating e5m2 clamps infinities
      EXPECT_EQ(back, (code & f.SignBit()) | f.overflow_code) << f.name << " code " << Hex(code);
    } else {
      EXPECT_EQ(back, code) << f.name << " code " << Hex(code) << " value " << value;
    }
  }
}

// ---- Rounding -----------------------------------------------------------------------------------

// For every pair of adjacent non-negative finite values a < b: values just above a and just below b
// stay, the exact midpoint goes to the even code, one f32 ulp below / above it to the nearer one.
// Includes 0 / the smallest subnormal and the largest subnormal / the smallest normal.
TEST_P(FormatTest, MidpointsBetweenAdjacentCodesRoundToNearestEven) {
  const Format& f = GetParam();
  for (uint32_t lo = 0; lo < f.max_finite; ++lo) {
    const uint32_t hi = lo + 1;
    const float a = f.decode(lo);
    const float b = f.decode(hi);
    const double mid_exact = (static_cast<double>(a) + static_cast<double>(b)) / 2;
    const float mid = static_cast<float>(mid_exact);
    ASSERT_EQ(static_cast<double>(mid), mid_exact) << "midpoint must be an f32";
    const uint32_t even = (lo & 1u) ? hi : lo;
    SCOPED_TRACE(std::string(f.name) + " between " + Hex(lo) + " and " + Hex(hi));
    for (const float sign : {1.0f, -1.0f}) {
      const bool negative = sign < 0;
      auto expect = [&](uint32_t magnitude) -> uint32_t {
        if (!negative) return magnitude;
        return f.has_sign ? (magnitude | f.SignBit()) : 0u;
      };
      EXPECT_EQ(f.encode(sign * a), expect(lo));
      EXPECT_EQ(f.encode(sign * Up(a)), expect(lo));
      EXPECT_EQ(f.encode(sign * Down(mid)), expect(lo));
      EXPECT_EQ(f.encode(sign * mid), expect(even));
      EXPECT_EQ(f.encode(sign * Up(mid)), expect(hi));
      EXPECT_EQ(f.encode(sign * Down(b)), expect(hi));
      EXPECT_EQ(f.encode(sign * b), expect(hi));
    }
  }
}

// The largest finite value M, the next value N of the unbounded format and their midpoint.
TEST_P(FormatTest, OverflowThreshold) {
  const Format& f = GetParam();
  bool nan, inf;
  const double max_value = FieldValue(f, f.max_finite, &nan, &inf);
  const double next = UnboundedNext(f);
  const float mid = static_cast<float>((max_value + next) / 2);
  ASSERT_EQ(static_cast<double>(mid), (max_value + next) / 2);
  const uint32_t at_mid = (f.max_finite & 1u) ? f.overflow_code : f.max_finite;
  SCOPED_TRACE(f.name);
  for (const float sign : {1.0f, -1.0f}) {
    auto expect = [&](uint32_t magnitude) -> uint32_t {
      if (sign > 0) return magnitude;
      return f.has_sign ? (magnitude | f.SignBit()) : 0u;
    };
    EXPECT_EQ(f.encode(sign * static_cast<float>(max_value)), expect(f.max_finite));
    EXPECT_EQ(f.encode(sign * Down(mid)), expect(f.max_finite));
    EXPECT_EQ(f.encode(sign * mid), expect(at_mid));
    EXPECT_EQ(f.encode(sign * Up(mid)), expect(f.overflow_code));
    EXPECT_EQ(f.encode(sign * ToF32(next)), expect(f.overflow_code));
    EXPECT_EQ(f.encode(sign * std::numeric_limits<float>::max()), expect(f.overflow_code));
    EXPECT_EQ(f.encode(sign * std::numeric_limits<float>::infinity()), expect(f.overflow_code));
  }
}

TEST_P(FormatTest, ZerosAndTinyValues) {
  const Format& f = GetParam();
  const uint32_t negative_zero = f.has_sign ? f.SignBit() : 0u;
  EXPECT_EQ(f.encode(0.0f), 0u) << f.name;
  EXPECT_EQ(f.encode(-0.0f), negative_zero) << f.name;
  const float tiny = std::numeric_limits<float>::denorm_min();
  const std::string name = f.name;
  if (name == "bf16") {
    // bf16 shares f32's exponent range: the f32 subnormal 2^-149 is far below bf16's 2^-133.
    EXPECT_EQ(f.encode(tiny), 0u);
    EXPECT_EQ(f.encode(FromBits(0x00008000u)), 0u);  // exactly half of bf16's smallest: tie -> 0
    EXPECT_EQ(f.encode(FromBits(0x00008001u)), 1u);
    EXPECT_EQ(f.encode(FromBits(0x00018000u)), 2u);       // 1.5 * smallest: tie -> even code 2
    EXPECT_EQ(f.encode(FromBits(0x007fffffu)), 0x0080u);  // largest f32 subnormal -> min normal
  } else {
    EXPECT_EQ(f.encode(tiny), 0u) << f.name;
    EXPECT_EQ(f.encode(-tiny), negative_zero) << f.name;
    EXPECT_EQ(f.encode(std::numeric_limits<float>::min()), 0u) << f.name;
  }
}

TEST_P(FormatTest, RandomInputsMatchReferenceEncoder) {
  const Format& f = GetParam();
  const ReferenceEncoder reference(f);
  std::mt19937 rng(12345);
  bool nan, inf;
  const double smallest = FieldValue(f, 1, &nan, &inf);
  const int low_exp = std::ilogb(smallest) - 3;
  const int high_exp = std::ilogb(reference.next()) + 2;
  std::uniform_int_distribution<int> exp_dist(low_exp, high_exp);
  std::uniform_int_distribution<uint32_t> bits_dist;
  int checked = 0;
  for (int i = 0; i < 100000; ++i) {
    // Half: any f32 bit pattern. Half: magnitudes in and around the format's range.
    float x = FromBits(bits_dist(rng));
    if (i & 1) {
      const uint32_t pattern = bits_dist(rng);
      const float significand = 1.0f + std::ldexp(static_cast<float>(pattern & 0x7fffffu), -23);
      x = std::ldexp(significand, exp_dist(rng));
      if (pattern & 0x80000000u) x = -x;
    }
    if (std::isnan(x)) continue;
    ASSERT_EQ(f.encode(x), reference.Encode(x)) << f.name << " x=" << x << " bits " << Hex(Bits(x));
    ++checked;
  }
  EXPECT_GT(checked, 90000);
}

std::string FormatName(const ::testing::TestParamInfo<Format>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(AllNarrowFormats, FormatTest, ::testing::ValuesIn(AllFormats()),
                         FormatName);

// ---- Spot checks with the numbers spelled out ---------------------------------------------------

TEST(DtypesSpot, E4M3Values) {
  EXPECT_EQ(F8E4M3ToF32(0x7e), 448.0f);
  EXPECT_EQ(F8E4M3ToF32(0x08), 0.015625f);     // smallest normal 2^-6
  EXPECT_EQ(F8E4M3ToF32(0x01), 0.001953125f);  // smallest subnormal 2^-9
  EXPECT_EQ(F8E4M3ToF32(0x07), 0.013671875f);  // largest subnormal 7 * 2^-9
  EXPECT_EQ(F8E4M3ToF32(0x38), 1.0f);
  EXPECT_EQ(F8E4M3ToF32(0x78), 256.0f);  // e=15 is an ordinary binade in e4m3
  EXPECT_EQ(F8E4M3ToF32(0xfe), -448.0f);
  EXPECT_TRUE(std::isnan(F8E4M3ToF32(0x7f)));
  EXPECT_TRUE(std::isnan(F8E4M3ToF32(0xff)));
  // 448 = 1.110b * 2^8; 480 would be 1.111b * 2^8 (the NaN code): the tie 464 goes to 448.
  for (const bool saturate : {true, false}) {
    EXPECT_EQ(F32ToF8E4M3(448.0f, saturate), 0x7e);
    EXPECT_EQ(F32ToF8E4M3(460.0f, saturate), 0x7e);
    EXPECT_EQ(F32ToF8E4M3(464.0f, saturate), 0x7e);
    EXPECT_EQ(F32ToF8E4M3(-464.0f, saturate), 0xfe);
  }
  EXPECT_EQ(F32ToF8E4M3(Up(464.0f), true), 0x7e);
  EXPECT_EQ(F32ToF8E4M3(Up(464.0f), false), 0x7f);
  EXPECT_EQ(F32ToF8E4M3(-Up(464.0f), false), 0xff);
  EXPECT_EQ(F32ToF8E4M3(1e30f, true), 0x7e);
  EXPECT_EQ(F32ToF8E4M3(-1e30f, true), 0xfe);
  EXPECT_EQ(F32ToF8E4M3(std::numeric_limits<float>::infinity(), true), 0x7e);
  EXPECT_EQ(F32ToF8E4M3(-std::numeric_limits<float>::infinity(), true), 0xfe);
  EXPECT_EQ(F32ToF8E4M3(std::numeric_limits<float>::infinity(), false), 0x7f);
  EXPECT_EQ(F32ToF8E4M3(-std::numeric_limits<float>::infinity(), false), 0xff);
  // Subnormal boundary: 2^-10 is half the smallest subnormal (tie -> 0), 2^-6 - 2^-10 is the tie
  // between the largest subnormal (7 * 2^-9, odd) and the smallest normal (even).
  EXPECT_EQ(F32ToF8E4M3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(F32ToF8E4M3(Up(std::ldexp(1.0f, -10))), 0x01);
  EXPECT_EQ(F32ToF8E4M3(-std::ldexp(1.0f, -10)), 0x80);
  EXPECT_EQ(F32ToF8E4M3(std::ldexp(15.0f, -10)), 0x08);
  EXPECT_EQ(F32ToF8E4M3(Down(std::ldexp(15.0f, -10))), 0x07);
  // Carry into the next binade: 1.1111b rounds up to 2.0.
  EXPECT_EQ(F32ToF8E4M3(1.9375f), 0x40);
  EXPECT_EQ(F32ToF8E4M3(Down(1.9375f)), 0x3f);
}

TEST(DtypesSpot, E5M2Values) {
  EXPECT_EQ(F8E5M2ToF32(0x7b), 57344.0f);
  EXPECT_EQ(F8E5M2ToF32(0x04), std::ldexp(1.0f, -14));
  EXPECT_EQ(F8E5M2ToF32(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(F8E5M2ToF32(0x3c), 1.0f);
  EXPECT_EQ(F8E5M2ToF32(0x7c), std::numeric_limits<float>::infinity());
  EXPECT_EQ(F8E5M2ToF32(0xfc), -std::numeric_limits<float>::infinity());
  for (const uint8_t code : {0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff}) {
    EXPECT_TRUE(std::isnan(F8E5M2ToF32(code))) << Hex(code);
  }
  EXPECT_EQ(F32ToF8E5M2(61439.0f, false), 0x7b);
  EXPECT_EQ(F32ToF8E5M2(61440.0f, false), 0x7c);  // tie with 65536 (even) -> overflow
  EXPECT_EQ(F32ToF8E5M2(61440.0f, true), 0x7b);
  EXPECT_EQ(F32ToF8E5M2(-61440.0f, false), 0xfc);
  EXPECT_EQ(F32ToF8E5M2(std::numeric_limits<float>::infinity(), false), 0x7c);
  EXPECT_EQ(F32ToF8E5M2(std::numeric_limits<float>::infinity(), true), 0x7b);
  EXPECT_EQ(F32ToF8E5M2(-std::numeric_limits<float>::infinity(), true), 0xfb);
  EXPECT_EQ(F32ToF8E5M2(-std::numeric_limits<float>::infinity(), false), 0xfc);
}

TEST(DtypesSpot, E2M1Values) {
  const float expected[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t code = 0; code < 8; ++code) {
    EXPECT_EQ(F4E2M1ToF32(code), expected[code]);
    EXPECT_EQ(F4E2M1ToF32(code | 0x8), -expected[code]);
    // The high nibble is ignored.
    EXPECT_EQ(Bits(F4E2M1ToF32(code | 0xf0)), Bits(F4E2M1ToF32(code)));
    EXPECT_EQ(Bits(F4E2M1ToF32(code | 0x58)), Bits(F4E2M1ToF32(code | 0x8)));
  }
  EXPECT_TRUE(std::signbit(F4E2M1ToF32(0x8)));
  // Ties between neighbours go to the even code.
  EXPECT_EQ(F32ToF4E2M1(0.25f), 0x0);
  EXPECT_EQ(F32ToF4E2M1(0.75f), 0x2);
  EXPECT_EQ(F32ToF4E2M1(1.25f), 0x2);
  EXPECT_EQ(F32ToF4E2M1(1.75f), 0x4);
  EXPECT_EQ(F32ToF4E2M1(2.5f), 0x4);
  EXPECT_EQ(F32ToF4E2M1(3.5f), 0x6);
  EXPECT_EQ(F32ToF4E2M1(5.0f), 0x6);
  EXPECT_EQ(F32ToF4E2M1(Up(5.0f)), 0x7);
  EXPECT_EQ(F32ToF4E2M1(-5.0f), 0xe);
  EXPECT_EQ(F32ToF4E2M1(7.0f), 0x7);
  EXPECT_EQ(F32ToF4E2M1(1e9f), 0x7);
  EXPECT_EQ(F32ToF4E2M1(-1e9f), 0xf);
  EXPECT_EQ(F32ToF4E2M1(std::numeric_limits<float>::infinity()), 0x7);
  EXPECT_EQ(F32ToF4E2M1(-std::numeric_limits<float>::infinity()), 0xf);
  EXPECT_EQ(F32ToF4E2M1(-0.1f), 0x8);  // rounds to -0
}

TEST(DtypesSpot, UE4M3Values) {
  EXPECT_EQ(UE4M3ToF32(0x7e), 448.0f);
  EXPECT_EQ(UE4M3ToF32(0x38), 1.0f);
  EXPECT_EQ(UE4M3ToF32(0x00), 0.0f);
  EXPECT_FALSE(std::signbit(UE4M3ToF32(0x00)));
  EXPECT_TRUE(std::isnan(UE4M3ToF32(0x7f)));
  for (uint32_t code = 0x80; code < 0x100; ++code) {
    EXPECT_TRUE(std::isnan(UE4M3ToF32(static_cast<uint8_t>(code)))) << Hex(code);
  }
  EXPECT_EQ(F32ToUE4M3(-1.0f), 0x00);
  EXPECT_EQ(F32ToUE4M3(-0.0f), 0x00);
  EXPECT_EQ(F32ToUE4M3(-std::numeric_limits<float>::infinity()), 0x00);
  EXPECT_EQ(F32ToUE4M3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(F32ToUE4M3(464.0f), 0x7e);
  EXPECT_EQ(F32ToUE4M3(1e6f), 0x7e);
  // Where it is defined, ue4m3 is e4m3 with the sign bit 0.
  for (uint32_t code = 0; code < 0x7f; ++code) {
    EXPECT_EQ(Bits(UE4M3ToF32(static_cast<uint8_t>(code))),
              Bits(F8E4M3ToF32(static_cast<uint8_t>(code))));
  }
}

TEST(DtypesSpot, F16AndBF16Values) {
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToF32(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F32ToF16(65519.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);
  EXPECT_EQ(F32ToF16(-65520.0f), 0xfc00);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(F32ToF16(Up(std::ldexp(1.0f, -25))), 0x0001);
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(BF16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(F32ToBF16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(F32ToBF16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);
  EXPECT_EQ(F32ToBF16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(RoundToBF16(1.00390625f), 1.0f);
}

TEST(DtypesSpot, NaNInputs) {
  const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
                           0x7fffffffu, 0xffffffffu, 0x7fa00000u, 0x7fe00000u};
  for (const uint32_t pattern : nans) {
    const float x = FromBits(pattern);
    const uint32_t sign = pattern >> 31;
    const uint32_t abs = pattern & 0x7fffffffu;
    SCOPED_TRACE(Hex(pattern));
    EXPECT_EQ(F32ToF16(x), (sign << 15) | 0x7e00u | ((abs >> 13) & 0x3ffu));
    EXPECT_EQ(F32ToBF16(x), (pattern >> 16) | 0x40u);
    EXPECT_EQ(F32ToF8E4M3(x, true), (sign << 7) | 0x7fu);
    EXPECT_EQ(F32ToF8E4M3(x, false), (sign << 7) | 0x7fu);
    EXPECT_EQ(F32ToF8E5M2(x, true), (sign << 7) | 0x7eu | ((abs >> 21) & 1u));
    EXPECT_EQ(F32ToF8E5M2(x, false), (sign << 7) | 0x7eu | ((abs >> 21) & 1u));
    EXPECT_EQ(F32ToF4E2M1(x), 0x0);  // no NaN in e2m1
    EXPECT_EQ(F32ToUE4M3(x), 0x7f);
    EXPECT_EQ(F32ToE8M0(x), 0xff);
  }
  // Decoded NaNs keep the sign and (f16, e5m2) the payload, with the quiet bit set.
  EXPECT_EQ(Bits(F16ToF32(0x7c01)), 0x7fc02000u);
  EXPECT_EQ(Bits(F16ToF32(0xfe00)), 0xffc00000u);
  EXPECT_EQ(Bits(F8E5M2ToF32(0x7d)), 0x7fe00000u);
  EXPECT_EQ(Bits(F8E5M2ToF32(0xfe)), 0xffc00000u);
  EXPECT_EQ(Bits(F8E4M3ToF32(0xff)), 0xffc00000u);
  EXPECT_EQ(Bits(E8M0ToF32(0xff)), 0x7fc00000u);
}

// ---- e8m0 ---------------------------------------------------------------------------------------

TEST(DtypesE8M0, DecodeEveryCode) {
  for (uint32_t code = 0; code < 255; ++code) {
    const float value = E8M0ToF32(static_cast<uint8_t>(code));
    EXPECT_EQ(static_cast<double>(value), std::ldexp(1.0, static_cast<int>(code) - 127)) << code;
    if (code > 0) {
      EXPECT_LT(E8M0ToF32(static_cast<uint8_t>(code - 1)), value);
    }
  }
  EXPECT_EQ(Bits(E8M0ToF32(0)), 0x00400000u);  // 2^-127 is an f32 subnormal
  EXPECT_EQ(E8M0ToF32(127), 1.0f);
  EXPECT_EQ(E8M0ToF32(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(E8M0ToF32(255)));
}

TEST(DtypesE8M0, EncodeEveryPowerOfTwoAndItsNeighbours) {
  using R = E8M0Rounding;
  for (uint32_t c = 0; c < 255; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    const uint8_t up = static_cast<uint8_t>(c < 254 ? c + 1 : 254);
    const float v = E8M0ToF32(code);
    SCOPED_TRACE("code " + std::to_string(c));
    for (const R r : {R::kFloor, R::kCeil, R::kNearest}) {
      EXPECT_EQ(F32ToE8M0(v, r), code);  // round trip
    }
    EXPECT_EQ(F32ToE8M0(Up(v), R::kFloor), code);
    EXPECT_EQ(F32ToE8M0(Up(v), R::kCeil), up);
    EXPECT_EQ(F32ToE8M0(Up(v), R::kNearest), code);
    if (c > 0) {
      EXPECT_EQ(F32ToE8M0(Down(v), R::kFloor), code - 1);
      EXPECT_EQ(F32ToE8M0(Down(v), R::kCeil), code);
      EXPECT_EQ(F32ToE8M0(Down(v), R::kNearest), code);
    }
    // 1.5 * 2^k is the linear midpoint of 2^k and 2^(k+1): ties go up; either side goes to the
    // nearer one.
    const float mid = v * 1.5f;
    EXPECT_EQ(F32ToE8M0(mid, R::kNearest), up);
    EXPECT_EQ(F32ToE8M0(Down(mid), R::kNearest), code);
    EXPECT_EQ(F32ToE8M0(Up(mid), R::kNearest), up);
    EXPECT_EQ(F32ToE8M0(mid, R::kFloor), code);
    EXPECT_EQ(F32ToE8M0(mid, R::kCeil), up);
  }
}

TEST(DtypesE8M0, SpecialInputs) {
  using R = E8M0Rounding;
  const float inf = std::numeric_limits<float>::infinity();
  for (const R r : {R::kFloor, R::kCeil, R::kNearest}) {
    EXPECT_EQ(F32ToE8M0(0.0f, r), 0x00);
    EXPECT_EQ(F32ToE8M0(-0.0f, r), 0x00);
    EXPECT_EQ(F32ToE8M0(std::numeric_limits<float>::denorm_min(), r), 0x00);
    EXPECT_EQ(F32ToE8M0(std::ldexp(1.0f, -130), r), 0x00);
    EXPECT_EQ(F32ToE8M0(inf, r), 0xfe);
    EXPECT_EQ(F32ToE8M0(std::numeric_limits<float>::max(), r), 0xfe);
    EXPECT_EQ(F32ToE8M0(-1.0f, r), 0xff);
    EXPECT_EQ(F32ToE8M0(-inf, r), 0xff);
    EXPECT_EQ(F32ToE8M0(std::numeric_limits<float>::quiet_NaN(), r), 0xff);
  }
  // OCP MX scale selection for an e2m1 block with amax 6 (emax_elem = 2):
  // 2^(floor(log2 6) - 2) = 2^0.
  EXPECT_EQ(F32ToE8M0(6.0f, R::kFloor) - 2, 127);
  EXPECT_EQ(F32ToE8M0(6.0f, R::kNearest), 130);  // 6 = 1.5 * 4: the tie goes up to 8
  EXPECT_EQ(F32ToE8M0(5.0f, R::kNearest), 129);  // nearer to 4 than to 8
  EXPECT_EQ(F32ToE8M0(6.0f, R::kCeil), 130);
}

}  // namespace
}  // namespace ember::test
