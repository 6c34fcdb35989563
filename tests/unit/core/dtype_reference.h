// The independent reference the dtype tests check core/dtype_convert.cc against: each narrow
// format described by its fields (sign, exponent, mantissa, bias, special codes), a decoder built
// from that description with ldexp, and a round-to-nearest-even encoder over the sorted table of
// representable values. Shared by dtypes_test.cc (the conversions against this reference) and
// dtypes_crosscheck_test.cc (against the CPU's conversion instructions and ml_dtypes).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "core/dtypes.h"

namespace ember::test {

inline uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float FromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline float Up(float x) { return std::nextafter(x, std::numeric_limits<float>::infinity()); }
inline float Down(float x) { return std::nextafter(x, -std::numeric_limits<float>::infinity()); }

inline std::string Hex(uint32_t value) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "0x%x", value);
  return buffer;
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
inline double MagnitudeValue(const Format& f, uint32_t exponent, uint32_t mantissa) {
  if (exponent == 0) return std::ldexp(static_cast<double>(mantissa), 1 - f.bias - f.mant_bits);
  const double significand = 1.0 + std::ldexp(static_cast<double>(mantissa), -f.mant_bits);
  return std::ldexp(significand, static_cast<int>(exponent) - f.bias);
}

// The value of a code computed from its sign, exponent and mantissa fields. Sets *nan / *inf for
// the format's special codes.
inline double FieldValue(const Format& f, uint32_t code, bool* nan, bool* inf) {
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
inline double UnboundedNext(const Format& f) {
  const uint32_t magnitude = f.max_finite + 1;
  return MagnitudeValue(f, magnitude >> f.mant_bits, magnitude & ((1u << f.mant_bits) - 1u));
}

// An f32 holding `value`, or infinity beyond the f32 range (avoids an out-of-range conversion).
inline float ToF32(double value) {
  if (std::fabs(value) > std::numeric_limits<float>::max()) {
    return std::copysign(std::numeric_limits<float>::infinity(),
                         static_cast<float>(value > 0 ? 1 : -1));
  }
  return static_cast<float>(value);
}

inline const std::vector<Format>& AllFormats() {
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
inline uint32_t NaNRoundTrip(const Format& f, uint32_t code) {
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

inline void PrintTo(const Format& f, std::ostream* os) { *os << f.name; }

}  // namespace ember::test
