// Exhaustive tests of the scalar dtype conversions (core/dtypes.h, core/dtype_convert.cc).
//
// Every code of every 4-, 8- and 16-bit format is decoded and checked against a value computed
// here from the code's sign, exponent and mantissa fields with ldexp, written independently of the
// implementation. Encoding is checked against an independent round-to-nearest-even reference built
// on the sorted table of representable values (comparing 2|x| with the sum of the two neighbours,
// exactly, in double), at every midpoint between adjacent codes and one f32 ulp either side, at the
// overflow and subnormal boundaries and on random samples; f16 and bf16 also against the x86
// F16C / AVX512-BF16 conversion instructions where the CPU has them; e4m3, e5m2, e2m1 and e8m0
// against tables made with ml_dtypes (dtype_golden_tables.h, by scripts/gen_dtype_tables.py).
//
// Set EMBER_DTYPES_EXHAUSTIVE=1 to also run every encoder on all 2^32 f32 inputs against those
// references (about 5 minutes on 2 cores; skipped otherwise).
#include "core/dtypes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu_features.h"
#include "dtype_golden_tables.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>
#define EMBER_TEST_X86 1
#else
#define EMBER_TEST_X86 0
#endif

namespace ember {
namespace {

uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float FromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

float Up(float x) { return std::nextafter(x, std::numeric_limits<float>::infinity()); }
float Down(float x) { return std::nextafter(x, -std::numeric_limits<float>::infinity()); }

std::string Hex(uint32_t value) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "0x%x", value);
  return buffer;
}

bool ExhaustiveRequested() {
  const char* flag = std::getenv("EMBER_DTYPES_EXHAUSTIVE");
  return flag != nullptr && flag[0] != '\0' && std::string(flag) != "0";
}

// ---- Independent description of each format -----------------------------------------------------

enum class Specials {
  kIeee,   // all-ones exponent: mantissa 0 is infinity, otherwise NaN
  kE4M3,   // only S.1111.111 is NaN, no infinity
  kNone,   // every code is a finite number (e2m1)
  kUE4M3,  // 0x7f NaN; codes with bit 7 set are not valid (decode to NaN)
};

struct Format {
  const char* name;
  int code_bits;  // width of a code
  bool has_sign;  // top bit of the code is a sign bit
  int exp_bits;
  int mant_bits;
  int bias;
  Specials specials;
  uint32_t max_finite;     // magnitude code of the largest finite value
  uint32_t overflow_code;  // magnitude result of a positive input that overflows (or +inf)
  uint32_t (*encode)(float);
  float (*decode)(uint32_t);

  uint32_t SignBit() const { return has_sign ? 1u << (code_bits - 1) : 0u; }
  uint32_t NumCodes() const { return 1u << code_bits; }
};

// 2^(e - bias) * 1.m for e != 0, 2^(1 - bias) * 0.m for e == 0.
double MagnitudeValue(const Format& f, uint32_t exponent, uint32_t mantissa) {
  if (exponent == 0) return std::ldexp(static_cast<double>(mantissa), 1 - f.bias - f.mant_bits);
  const double significand = 1.0 + std::ldexp(static_cast<double>(mantissa), -f.mant_bits);
  return std::ldexp(significand, static_cast<int>(exponent) - f.bias);
}

// The value of a code computed from its sign, exponent and mantissa fields. Sets *nan / *inf for
// the format's special codes.
double FieldValue(const Format& f, uint32_t code, bool* nan, bool* inf) {
  *nan = false;
  *inf = false;
  const bool negative = f.has_sign && ((code >> (f.code_bits - 1)) & 1u);
  const uint32_t magnitude = f.has_sign ? code & (f.SignBit() - 1u) : code;
  const uint32_t mantissa = magnitude & ((1u << f.mant_bits) - 1u);
  const uint32_t exponent = magnitude >> f.mant_bits;
  const uint32_t all_ones = (1u << f.exp_bits) - 1u;
  switch (f.specials) {
    case Specials::kIeee:
      if (exponent == all_ones) {
        (mantissa == 0 ? *inf : *nan) = true;
        return 0;
      }
      break;
    case Specials::kE4M3:
      if (exponent == all_ones && mantissa == (1u << f.mant_bits) - 1u) {
        *nan = true;
        return 0;
      }
      break;
    case Specials::kUE4M3:
      if (code >= 0x7f) {
        *nan = true;
        return 0;
      }
      break;
    case Specials::kNone:
      break;
  }
  const double value = MagnitudeValue(f, exponent, mantissa);
  return negative ? -value : value;
}

// The value the format would give the magnitude code max_finite + 1 if its exponent range were
// unbounded above and it had no special codes: the rounding neighbour above the largest finite
// value (480 for e4m3, 65536 for f16 and e5m2, 8 for e2m1, 2^128 for bf16).
double UnboundedNext(const Format& f) {
  const uint32_t magnitude = f.max_finite + 1;
  return MagnitudeValue(f, magnitude >> f.mant_bits, magnitude & ((1u << f.mant_bits) - 1u));
}

// An f32 holding `value`, or infinity beyond the f32 range (avoids an out-of-range conversion).
float ToF32(double value) {
  if (std::fabs(value) > std::numeric_limits<float>::max()) {
    return std::copysign(std::numeric_limits<float>::infinity(),
                         static_cast<float>(value > 0 ? 1 : -1));
  }
  return static_cast<float>(value);
}

const std::vector<Format>& AllFormats() {
  static const std::vector<Format> formats = {
      {"bf16", 16, true, 8, 7, 127, Specials::kIeee, 0x7f7f, 0x7f80,
       [](float x) -> uint32_t { return F32ToBF16(x); },
       [](uint32_t c) { return BF16ToF32(static_cast<uint16_t>(c)); }},
      {"f16", 16, true, 5, 10, 15, Specials::kIeee, 0x7bff, 0x7c00,
       [](float x) -> uint32_t { return F32ToF16(x); },
       [](uint32_t c) { return F16ToF32(static_cast<uint16_t>(c)); }},
      {"e4m3_sat", 8, true, 4, 3, 7, Specials::kE4M3, 0x7e, 0x7e,
       [](float x) -> uint32_t { return F32ToF8E4M3(x, /*saturate=*/true); },
       [](uint32_t c) { return F8E4M3ToF32(static_cast<uint8_t>(c)); }},
      {"e4m3_nosat", 8, true, 4, 3, 7, Specials::kE4M3, 0x7e, 0x7f,
       [](float x) -> uint32_t { return F32ToF8E4M3(x, /*saturate=*/false); },
       [](uint32_t c) { return F8E4M3ToF32(static_cast<uint8_t>(c)); }},
      {"e5m2_sat", 8, true, 5, 2, 15, Specials::kIeee, 0x7b, 0x7b,
       [](float x) -> uint32_t { return F32ToF8E5M2(x, /*saturate=*/true); },
       [](uint32_t c) { return F8E5M2ToF32(static_cast<uint8_t>(c)); }},
      {"e5m2_nosat", 8, true, 5, 2, 15, Specials::kIeee, 0x7b, 0x7c,
       [](float x) -> uint32_t { return F32ToF8E5M2(x, /*saturate=*/false); },
       [](uint32_t c) { return F8E5M2ToF32(static_cast<uint8_t>(c)); }},
      {"e2m1", 4, true, 2, 1, 1, Specials::kNone, 0x7, 0x7,
       [](float x) -> uint32_t { return F32ToF4E2M1(x); },
       [](uint32_t c) { return F4E2M1ToF32(static_cast<uint8_t>(c)); }},
      {"ue4m3", 8, false, 4, 3, 7, Specials::kUE4M3, 0x7e, 0x7e,
       [](float x) -> uint32_t { return F32ToUE4M3(x); },
       [](uint32_t c) { return UE4M3ToF32(static_cast<uint8_t>(c)); }},
  };
  return formats;
}

// What decode -> encode gives for a NaN code (the rules in dtype_convert.cc).
uint32_t NaNRoundTrip(const Format& f, uint32_t code) {
  const std::string name = f.name;
  if (name == "bf16") return code | 0x40u;  // quiet bit set, payload kept
  if (name == "f16") return code | 0x200u;  // quiet bit set, payload kept
  if (name.rfind("e5m2", 0) == 0) return code | 0x2u;
  if (name == "ue4m3") return 0x7f;
  return code;  // e4m3: 0x7f / 0xff
}

// Reference encoder: the sorted positive values of codes 0..max_finite, plus the next value of the
// unbounded format. Rounds |x| to nearest, ties to the even code, then applies the overflow and
// sign rules. Not for NaN inputs.
class ReferenceEncoder {
 public:
  explicit ReferenceEncoder(const Format& f) : f_(f) {
    bool nan, inf;
    for (uint32_t code = 0; code <= f.max_finite; ++code) {
      values_.push_back(FieldValue(f, code, &nan, &inf));
    }
    next_ = UnboundedNext(f);
  }

  uint32_t Encode(float x) const {
    const bool negative = std::signbit(x);
    if (negative && !f_.has_sign) return 0;                        // ue4m3: negatives clamp to 0
    const double twice = 2.0 * std::fabs(static_cast<double>(x));  // exact
    uint32_t magnitude;
    const double top_sum = values_.back() + next_;
    if (std::isinf(x) || twice > top_sum || (twice == top_sum && (f_.max_finite & 1u))) {
      magnitude = f_.overflow_code;
    } else {
      // Largest i with values_[i] <= |x|.
      const double ax = twice / 2;
      size_t i = std::upper_bound(values_.begin(), values_.end(), ax) - values_.begin() - 1;
      if (values_[i] == ax || i + 1 == values_.size()) {
        magnitude = static_cast<uint32_t>(i);
      } else {
        const double sum = values_[i] + values_[i + 1];  // exact: neighbours, few bits each
        if (twice < sum) {
          magnitude = static_cast<uint32_t>(i);
        } else if (twice > sum) {
          magnitude = static_cast<uint32_t>(i + 1);
        } else {
          magnitude = static_cast<uint32_t>((i & 1u) ? i + 1 : i);
        }
      }
    }
    return negative ? (magnitude | f_.SignBit()) : magnitude;
  }

  const std::vector<double>& values() const { return values_; }
  double next() const { return next_; }

 private:
  const Format& f_;
  std::vector<double> values_;
  double next_;
};

void PrintTo(const Format& f, std::ostream* os) { *os << f.name; }

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

// ---- Hardware cross-checks ----------------------------------------------------------------------

#if EMBER_TEST_X86
__attribute__((target("f16c"))) uint16_t HwF32ToF16(float x) {
  return static_cast<uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float HwF16ToF32(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("avx512f,avx512vl,avx512bf16"))) uint16_t HwF32ToBF16(float x) {
  const __m128bh packed = _mm_cvtneps_pbh(_mm_set_ss(x));
  uint16_t lanes[8];
  std::memcpy(lanes, &packed, sizeof(lanes));
  return lanes[0];
}
// CPUID + XGETBV (core/cpu_features.h): also checks that the OS saves the vector registers, and
// works with clang, whose __builtin_cpu_supports does not know "f16c".
bool HaveF16C() { return HostCpuFeatures().f16c; }
bool HaveAvx512Bf16() {
  const CpuFeatures& cpu = HostCpuFeatures();
  return cpu.avx512f && cpu.avx512vl && cpu.avx512bf16;
}
#else
uint16_t HwF32ToF16(float) { return 0; }
float HwF16ToF32(uint16_t) { return 0; }
uint16_t HwF32ToBF16(float) { return 0; }
bool HaveF16C() { return false; }
bool HaveAvx512Bf16() { return false; }
#endif

// f32 inputs around every boundary of a 16-bit format: each code's value +-4 ulps and each midpoint
// +-4 ulps, both signs, plus the overflow region.
// The value above the largest finite one is the unbounded format's next value (largest + 1 ulp).
std::vector<float> BoundaryInputs(float (*decode)(uint32_t), uint32_t max_finite) {
  std::vector<float> inputs;
  for (uint32_t code = 0; code <= max_finite; ++code) {
    const float a = decode(code);
    const double b = code < max_finite ? decode(code + 1) : 2.0 * a - decode(code - 1);
    const float mid = static_cast<float>((static_cast<double>(a) + b) / 2);
    for (const float center : {a, mid}) {
      float lo = center, hi = center;
      inputs.push_back(center);
      for (int k = 0; k < 4; ++k) {
        lo = Down(lo);
        hi = Up(hi);
        inputs.push_back(lo);
        inputs.push_back(hi);
      }
    }
  }
  const size_t positive = inputs.size();
  for (size_t i = 0; i < positive; ++i) inputs.push_back(-inputs[i]);
  return inputs;
}

TEST(DtypesHardware, F16MatchesF16C) {
  if (!HaveF16C()) GTEST_SKIP() << "no F16C on this CPU";
  for (uint32_t code = 0; code < 0x10000; ++code) {
    ASSERT_EQ(Bits(F16ToF32(static_cast<uint16_t>(code))),
              Bits(HwF16ToF32(static_cast<uint16_t>(code))))
        << "decode " << Hex(code);
  }
  const std::vector<float> inputs =
      BoundaryInputs([](uint32_t c) { return F16ToF32(static_cast<uint16_t>(c)); }, 0x7bff);
  for (const float x : inputs) {
    ASSERT_EQ(F32ToF16(x), HwF32ToF16(x)) << "x=" << x << " bits " << Hex(Bits(x));
  }
  std::mt19937 rng(777);
  std::uniform_int_distribution<uint32_t> bits_dist;
  for (int i = 0; i < 1 << 20; ++i) {
    const float x = FromBits(bits_dist(rng));  // includes NaNs with random payloads
    ASSERT_EQ(F32ToF16(x), HwF32ToF16(x)) << "bits " << Hex(Bits(x));
  }
}

TEST(DtypesHardware, BF16MatchesAvx512Bf16) {
  if (!HaveAvx512Bf16()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  // VCVTNEPS2BF16 treats f32 subnormal inputs as zero; F32ToBF16 rounds them (checked against the
  // reference encoder above), so those are left out here.
  auto comparable = [](float x) { return std::fpclassify(x) != FP_SUBNORMAL; };
  const std::vector<float> inputs =
      BoundaryInputs([](uint32_t c) { return BF16ToF32(static_cast<uint16_t>(c)); }, 0x7f7f);
  for (const float x : inputs) {
    if (!comparable(x)) continue;
    ASSERT_EQ(F32ToBF16(x), HwF32ToBF16(x)) << "x=" << x << " bits " << Hex(Bits(x));
  }
  std::mt19937 rng(778);
  std::uniform_int_distribution<uint32_t> bits_dist;
  for (int i = 0; i < 1 << 20; ++i) {
    const float x = FromBits(bits_dist(rng));
    if (!comparable(x)) continue;
    ASSERT_EQ(F32ToBF16(x), HwF32ToBF16(x)) << "bits " << Hex(Bits(x));
  }
}

// ---- ml_dtypes golden tables --------------------------------------------------------------------

enum class GoldenKind { kE4M3, kE5M2, kE2M1, kE8M0 };

struct GoldenFormat {
  GoldenKind kind;
  const char* name;
  const uint32_t* decode;
  uint32_t num_codes;
  const golden::EncodeRun* runs;
  size_t num_runs;
  float (*our_decode)(uint32_t);
  uint32_t (*our_encode)(float);  // the non-saturating / nearest variant ml_dtypes implements
};

const std::vector<GoldenFormat>& GoldenFormats() {
  using namespace golden;
  static const std::vector<GoldenFormat> formats = {
      {GoldenKind::kE4M3, "e4m3", kE4M3Decode, 256, kE4M3EncodeRuns, std::size(kE4M3EncodeRuns),
       [](uint32_t c) { return F8E4M3ToF32(static_cast<uint8_t>(c)); },
       [](float x) -> uint32_t { return F32ToF8E4M3(x, false); }},
      {GoldenKind::kE5M2, "e5m2", kE5M2Decode, 256, kE5M2EncodeRuns, std::size(kE5M2EncodeRuns),
       [](uint32_t c) { return F8E5M2ToF32(static_cast<uint8_t>(c)); },
       [](float x) -> uint32_t { return F32ToF8E5M2(x, false); }},
      {GoldenKind::kE2M1, "e2m1", kE2M1Decode, 16, kE2M1EncodeRuns, std::size(kE2M1EncodeRuns),
       [](uint32_t c) { return F4E2M1ToF32(static_cast<uint8_t>(c)); },
       [](float x) -> uint32_t { return F32ToF4E2M1(x); }},
      {GoldenKind::kE8M0, "e8m0", kE8M0Decode, 256, kE8M0EncodeRuns, std::size(kE8M0EncodeRuns),
       [](uint32_t c) { return E8M0ToF32(static_cast<uint8_t>(c)); },
       [](float x) -> uint32_t { return F32ToE8M0(x, E8M0Rounding::kNearest); }},
  };
  return formats;
}

// ember's result for input `x` given ml_dtypes' code, where ember's documented rules differ:
//   e5m2: ml_dtypes drops NaN payloads (always 0x7e / 0xfe); ember keeps the top payload bit.
//   e2m1: ml_dtypes turns NaN into a zero of the opposite sign (+NaN -> 0x8, -NaN -> 0x0); ember
//         gives +0 for every NaN.
//   e8m0: ml_dtypes gives NaN for +-0, +inf and values beyond 2^127; ember clamps those to 0x00 /
//         0xfe (see F32ToE8M0). And for the f32 subnormals strictly between 2^-127 and 1.5 * 2^-127
//         (bit patterns 0x00400001..0x005fffff) ml_dtypes (and torch 2.x) give 2^-126 although
//         2^-127 is nearer; ember gives 2^-127 (code 0x00).
uint32_t ExpectedFromGolden(const GoldenFormat& g, float x, uint32_t golden_code) {
  if (g.kind == GoldenKind::kE5M2 && std::isnan(x)) return golden_code | ((Bits(x) >> 21) & 1u);
  if (g.kind == GoldenKind::kE2M1 && std::isnan(x)) return 0x0;
  if (g.kind == GoldenKind::kE8M0) {
    const uint32_t bits = Bits(x);
    if (bits == 0x80000000u) return 0x00;  // -0
    if (!std::isnan(x) && golden_code == 0xff && !std::signbit(x)) return x >= 1.0f ? 0xfe : 0x00;
    if (bits > 0x00400000u && bits < 0x00600000u) return 0x00;
  }
  return golden_code;
}

TEST(DtypesGolden, DecodeMatchesMlDtypes) {
  for (const GoldenFormat& g : GoldenFormats()) {
    for (uint32_t code = 0; code < g.num_codes; ++code) {
      const float ours = g.our_decode(code);
      const float theirs = FromBits(g.decode[code]);
      if (std::isnan(theirs)) {
        EXPECT_TRUE(std::isnan(ours)) << g.name << " " << Hex(code);
        EXPECT_EQ(std::signbit(ours), std::signbit(theirs)) << g.name << " " << Hex(code);
      } else {
        EXPECT_EQ(Bits(ours), Bits(theirs)) << g.name << " " << Hex(code);
      }
    }
  }
}

// Checks both ends and the middle of every run of ml_dtypes' f32 -> code map.
TEST(DtypesGolden, EncodeMatchesMlDtypesAtEveryRunBoundary) {
  for (const GoldenFormat& g : GoldenFormats()) {
    for (size_t i = 0; i < g.num_runs; ++i) {
      const uint32_t first = g.runs[i].first;
      const uint32_t last = i + 1 < g.num_runs ? g.runs[i + 1].first - 1 : 0xffffffffu;
      for (const uint32_t pattern : {first, last, first + (last - first) / 2}) {
        const float x = FromBits(pattern);
        ASSERT_EQ(g.our_encode(x), ExpectedFromGolden(g, x, g.runs[i].code))
            << g.name << " input bits " << Hex(pattern) << " (" << x << ")";
      }
    }
  }
}

// ---- Exhaustive over all f32 inputs (opt-in) ----------------------------------------------------

// Runs check(begin, end) over [0, 2^32) split across the hardware threads; returns the sum of what
// the calls return (their mismatch counts).
uint64_t OverAllF32Patterns(const std::function<uint64_t(uint64_t, uint64_t)>& check) {
  const uint64_t parts = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t total = uint64_t{1} << 32;
  std::vector<uint64_t> counts(parts, 0);
  std::vector<std::thread> threads;
  for (uint64_t i = 0; i < parts; ++i) {
    threads.emplace_back([&, i] { counts[i] = check(total * i / parts, total * (i + 1) / parts); });
  }
  for (std::thread& thread : threads) thread.join();
  uint64_t sum = 0;
  for (const uint64_t count : counts) sum += count;
  return sum;
}

TEST(DtypesExhaustive, AllF32InputsMatchMlDtypes) {
  if (!ExhaustiveRequested()) GTEST_SKIP() << "set EMBER_DTYPES_EXHAUSTIVE=1";
  for (const GoldenFormat& g : GoldenFormats()) {
    const uint64_t mismatches = OverAllF32Patterns([&g](uint64_t begin, uint64_t end) {
      // The run holding `begin`.
      size_t run = 0;
      while (run + 1 < g.num_runs && g.runs[run + 1].first <= begin) ++run;
      uint64_t bad = 0;
      auto report = [&bad](const char* what, uint64_t p) {
        if (++bad <= 5) ADD_FAILURE() << what << " bits " << Hex(static_cast<uint32_t>(p));
      };
      for (uint64_t p = begin; p < end; ++p) {
        const uint32_t pattern = static_cast<uint32_t>(p);
        while (run + 1 < g.num_runs && g.runs[run + 1].first <= pattern) ++run;
        const float x = FromBits(pattern);
        const uint32_t golden_code = g.runs[run].code;
        const uint32_t expected = ExpectedFromGolden(g, x, golden_code);
        if (g.our_encode(x) != expected) report(g.name, p);
        // The saturating and unsigned variants follow from the same table.
        if (g.kind == GoldenKind::kE4M3) {
          const bool overflow = !std::isnan(x) && (golden_code & 0x7f) == 0x7f;
          const uint32_t sat = overflow ? (golden_code & 0x80) | 0x7e : golden_code;
          if (F32ToF8E4M3(x, true) != sat) report("e4m3 saturating", p);
          const uint32_t unsigned_code = std::isnan(x) ? 0x7f : std::signbit(x) ? 0 : sat;
          if (F32ToUE4M3(x) != unsigned_code) report("ue4m3", p);
        } else if (g.kind == GoldenKind::kE5M2) {
          const bool overflow = !std::isnan(x) && (golden_code & 0x7f) == 0x7c;
          const uint32_t sat = overflow ? (golden_code & 0x80) | 0x7b : expected;
          if (F32ToF8E5M2(x, true) != sat) report("e5m2 saturating", p);
        }
      }
      return bad;
    });
    EXPECT_EQ(mismatches, 0u) << g.name;
  }
}

TEST(DtypesExhaustive, AllF32InputsMatchHardwareF16AndBF16) {
  if (!ExhaustiveRequested()) GTEST_SKIP() << "set EMBER_DTYPES_EXHAUSTIVE=1";
  const bool f16c = HaveF16C(), bf16 = HaveAvx512Bf16();
  if (!f16c && !bf16) GTEST_SKIP() << "neither F16C nor AVX512-BF16";
  const ReferenceEncoder bf16_reference(AllFormats()[0]);
  const uint64_t mismatches = OverAllF32Patterns([&](uint64_t begin, uint64_t end) {
    uint64_t bad = 0;
    auto report = [&bad](const char* what, uint64_t p) {
      if (++bad <= 5) ADD_FAILURE() << what << " bits " << Hex(static_cast<uint32_t>(p));
    };
    for (uint64_t p = begin; p < end; ++p) {
      const float x = FromBits(static_cast<uint32_t>(p));
      if (f16c && F32ToF16(x) != HwF32ToF16(x)) report("f16", p);
      if (std::fpclassify(x) == FP_SUBNORMAL) {  // VCVTNEPS2BF16 flushes these; use the reference
        if (F32ToBF16(x) != bf16_reference.Encode(x)) report("bf16 subnormal", p);
      } else if (bf16 && F32ToBF16(x) != HwF32ToBF16(x)) {
        report("bf16", p);
      }
    }
    return bad;
  });
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace ember
