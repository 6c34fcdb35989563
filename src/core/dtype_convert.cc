// Scalar conversions between f32 and the narrow floating-point formats ember reads and writes.
//
// These are the portable reference: plain integer bit manipulation, no platform intrinsics, no
// dependence on the FPU rounding mode or on MXCSR's FTZ/DAZ bits. Vectorised kernels must agree
// with them bit for bit (tests/unit/core/dtypes_test.cc checks these against independent
// computations, dtypes_crosscheck_test.cc against F16C hardware and tables made with ml_dtypes).
//
// ---- Formats ------------------------------------------------------------------------------------
// Notation: S sign bits, E exponent bits, M mantissa bits, bias B. A code with exponent field
// e != 0 is a normal number (-1)^s * 2^(e-B) * 1.m; e == 0 is zero or a subnormal number
// (-1)^s * 2^(1-B) * 0.m. The "specials" column says which codes are not finite numbers.
//
//   format S E M  B    largest finite     smallest > 0     specials
//   f16    1 5 10 15   65504 (0x7bff)     2^-24 (0x0001)   e=31: m=0 inf, m!=0 NaN
//   bf16   1 8 7  127  ~3.39e38 (0x7f7f)  2^-133 (0x0001)  e=255: as f32 (inline in dtypes.h)
//   e4m3   1 4 3  7    448 (0x7e)         2^-9 (0x01)      S.1111.111 (0x7f, 0xff) NaN; no inf
//   e5m2   1 5 2  15   57344 (0x7b)       2^-16 (0x01)     e=31: m=0 inf, m!=0 NaN
//   e2m1   1 2 1  1    6 (0x7)            0.5 (0x1)        none: all 16 codes are numbers
//   e8m0   0 8 0  127  2^127 (0xfe)       2^-127 (0x00)    0xff NaN; no zero, no subnormals
//   ue4m3  0 4 3  7    448 (0x7e)         2^-9 (0x01)      0x7f NaN; codes >= 0x80 invalid
//
// Sources: IEEE 754-2019 binary16; OCP 8-bit Floating Point Specification (OFP8) rev 1.0 for e4m3
// and e5m2; OCP Microscaling Formats (MX) Specification v1.0 for e2m1 (FP4) and e8m0 (the MX
// shared scale); NVFP4 uses e4m3 with the sign bit 0 (here "ue4m3") as its 16-element block scale.
// e2m1 values: 0, 0.5, 1, 1.5, 2, 3, 4, 6 for codes 0..7; code 8 | c is the negative of code c
// (code 8 is -0).
//
// ---- Decoding (narrow -> f32) -------------------------------------------------------------------
// Every finite code is exactly representable in f32 (e8m0's 2^-127 as an f32 subnormal), so
// decoding is exact. NaN codes decode to a quiet f32 NaN that keeps the code's sign and, for f16
// and e5m2, the mantissa bits as the top of the f32 payload with the quiet bit set (F16C's
// VCVTPH2PS does the same, so a signalling f16 NaN decodes to a quiet one). -0 decodes to -0.0f.
// (bf16 is different: BF16ToF32 only widens the bits, so a NaN keeps its payload exactly,
// signalling or not.)
//
// ---- Encoding (f32 -> narrow) -------------------------------------------------------------------
// Finite inputs are rounded to nearest, ties to even, as if the target's exponent range were
// unbounded above: the rounding may carry into the next binade (also from the largest subnormal to
// the smallest normal), and inputs far below the smallest subnormal become a zero with the input's
// sign. f32 subnormal inputs are handled like any other value (no flush to zero). Only when the
// *rounded* magnitude exceeds the largest finite value does the format's overflow rule apply. So
// the overflow thresholds are the midpoints between the largest finite value and the next value of
// the unbounded format, with the tie going to the even one of the two:
//   f16:  |x| >= 65520 (midpoint of 65504 and 65536; 65536 is the even neighbour) overflows.
//   e4m3: |x| >  464   (midpoint of 448 = 1.110b*2^8 and 480 = 1.111b*2^8; 448 is the even one,
//         so 464 itself rounds to 448 and only values above 464 overflow).
//   e5m2: |x| >= 61440 (midpoint of 57344 and 65536).
//   e2m1: |x| >= 7     (midpoint of 6 and 8).
// This is what IEEE 754 prescribes and what ml_dtypes 0.6.0 does.
//
// Overflow, infinity and NaN rules:
//   F32ToF16:           overflow and +-inf -> +-inf; NaN -> quiet NaN, sign and the top 9 payload
//                       bits kept (F16C's VCVTPS2PH behaviour).
//   F32ToF8E4M3:        NaN -> NaN with the input's sign (0x7f / 0xff).
//     saturate=true:    overflow and +-inf -> +-448 (0x7e / 0xfe); the "satfinite" rule of PTX's
//     cvt
//                       and of the OCP spec's saturating mode: the result is finite unless the
//                       input is NaN.
//     saturate=false:   overflow and +-inf -> NaN with the input's sign (OCP non-saturating mode;
//                       ml_dtypes' float8_e4m3fn cast).
//   F32ToF8E5M2:        NaN -> quiet NaN with the input's sign, top payload bit kept (0x7e|0x7f).
//     saturate=true:    overflow and +-inf -> +-57344 (0x7b / 0xfb) (satfinite, as for e4m3).
//     saturate=false:   overflow and +-inf -> +-inf (0x7c / 0xfc) (IEEE; ml_dtypes' cast).
//   F32ToF4E2M1:        always saturates: overflow and +-inf -> +-6. The format has no NaN: NaN of
//                       either sign -> +0 (code 0).
//   F32ToUE4M3:         negative inputs (including -0, negative subnormals and -inf) -> 0 (code 0);
//                       overflow and +inf -> 448 (0x7e); NaN of either sign -> 0x7f (NaN).
//   UE4M3ToF32:         0x00..0x7e decode as e4m3; 0x7f is NaN; 0x80..0xff (sign bit set) are not
//                       ue4m3 codes and decode to NaN so that a corrupt scale is noticed.
//   E8M0ToF32:          2^(code-127); 0xff -> NaN.
//   F32ToE8M0:          see dtypes.h: positive inputs round per the chosen mode and clamp to
//                       [2^-127, 2^127]; +-0 -> 0x00 (2^-127); +inf -> 0xfe; NaN, negative values
//                       and -inf -> 0xff (NaN).
//
// Where this differs from ml_dtypes 0.6.0 (whose casts otherwise agree bit for bit on all 2^32 f32
// inputs; see the golden tests): e5m2 NaN payloads (ml_dtypes always gives 0x7e / 0xfe); e2m1 NaN
// (ml_dtypes gives a zero of the opposite sign); e8m0 zero, +inf and overflow (ml_dtypes: NaN) and
// the f32 subnormals strictly between 2^-127 and 1.5 * 2^-127, which ml_dtypes and torch round up
// to 2^-126 although 2^-127 is nearer. torch 2.15's CPU cast to float8_e4m3fn saturates (like
// saturate=true here), while its OCP non-saturating counterpart is saturate=false.
#include <bit>
#include <cstdint>
#include <cstring>

#include "core/cpu_features.h"
#include "core/dtypes.h"
#include "core/dtype_rows.h"

namespace ember {
namespace {

constexpr uint32_t kF32SignMask = 0x80000000u;
constexpr uint32_t kF32AbsMask = 0x7fffffffu;
constexpr uint32_t kF32Inf = 0x7f800000u;
constexpr uint32_t kF32QuietNaN = 0x7fc00000u;
constexpr uint32_t kF32MantissaMask = 0x007fffffu;

inline uint32_t F32Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float F32FromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// Shifts `value` right by `shift` (>= 1) bits, rounding to nearest with ties to even.
inline uint32_t ShiftRightRoundEven(uint32_t value, int shift) {
  if (shift >= 32) return 0;  // callers pass value < 2^24, which is below half of 2^shift then
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  return (rest > half || (rest == half && (kept & 1u))) ? kept + 1u : kept;
}

// Rounds the magnitude `abs_bits` (an f32 bit pattern without its sign: finite, not NaN) to the
// nearest value of a format with `mant_bits` mantissa bits and exponent bias `bias`, ties to even,
// as if the format's exponent range were unbounded above. Returns the magnitude code
// (exponent field << mant_bits | mantissa), which exceeds the format's largest finite code when the
// rounded value overflows; callers apply their overflow rule. Valid for formats whose smallest
// normal exponent (1 - bias) is above f32's (-126), i.e. every format here except bf16.
inline uint32_t RoundMagnitude(uint32_t abs_bits, int mant_bits, int bias) {
  const int f32_exp_field = static_cast<int>(abs_bits >> 23);
  uint32_t significand = abs_bits & kF32MantissaMask;
  int exp = -126;  // value = significand * 2^(exp - 23)
  if (f32_exp_field != 0) {
    significand |= 1u << 23;
    exp = f32_exp_field - 127;
  }
  const int min_normal_exp = 1 - bias;
  // The target's quantum (value of one unit in the last place) is 2^(max(exp, min_normal_exp) -
  // mant_bits); in units of the f32 significand's last place that is a shift right by:
  const int scale_exp = exp > min_normal_exp ? exp : min_normal_exp;
  const int shift = 23 - mant_bits + (scale_exp - exp);
  const uint32_t rounded = ShiftRightRoundEven(significand, shift);
  // For a normal result, rounded is in [2^m, 2^(m+1)] and adding (scale_exp - min_normal_exp) << m
  // yields the exponent field (biased exponent = scale_exp + bias) on top of the mantissa; a carry
  // to 2^(m+1) moves into the next binade by itself. For a subnormal result scale_exp ==
  // min_normal_exp and rounded (< 2^m, or == 2^m for the smallest normal) is the code itself.
  return (static_cast<uint32_t>(scale_exp - min_normal_exp) << mant_bits) + rounded;
}

// Builds the f32 bit pattern of a finite, nonzero narrow value given its fields. `sign` is already
// in f32 position. Subnormal inputs (exp_field == 0) are normalised.
inline uint32_t AssembleF32(uint32_t sign, uint32_t exp_field, uint32_t mantissa, int mant_bits,
                            int bias) {
  if (exp_field == 0) {
    if (mantissa == 0) return sign;
    // mantissa * 2^(1 - bias - mant_bits); its leading one sits at bit `lead`.
    const int lead = std::bit_width(mantissa) - 1;
    const int exp = 1 - bias - mant_bits + lead;
    const uint32_t fraction = (mantissa << (23 - lead)) & kF32MantissaMask;
    return sign | (static_cast<uint32_t>(exp + 127) << 23) | fraction;
  }
  const int exp = static_cast<int>(exp_field) - bias;
  return sign | (static_cast<uint32_t>(exp + 127) << 23) | (mantissa << (23 - mant_bits));
}

// The quiet f32 NaN for a narrow NaN: sign kept, narrow mantissa as the top payload bits, quiet bit
// set.
inline uint32_t F32NaN(uint32_t sign, uint32_t mantissa, int mant_bits) {
  return sign | kF32QuietNaN | (mantissa << (23 - mant_bits));
}

}  // namespace

// ---- f16 ----------------------------------------------------------------------------------------

float F16ToF32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp_field = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exp_field == 0x1f) {
    return F32FromBits(mantissa == 0 ? (sign | kF32Inf) : F32NaN(sign, mantissa, 10));
  }
  return F32FromBits(AssembleF32(sign, exp_field, mantissa, 10, 15));
}

uint16_t F32ToF16(float value) {
  const uint32_t bits = F32Bits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & kF32AbsMask;
  if (abs_bits > kF32Inf) {  // NaN: quiet, keep the top payload bits
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs_bits >> 13) & 0x3ffu));
  }
  if (abs_bits == kF32Inf) return static_cast<uint16_t>(sign | 0x7c00u);
  const uint32_t code = RoundMagnitude(abs_bits, 10, 15);
  return static_cast<uint16_t>(sign | (code >= 0x7c00u ? 0x7c00u : code));
}

namespace internal {
int64_t F32ToF16RowF16c(const float* x, int64_t n, uint16_t* out);  // dtype_convert_avx2.cc
}  // namespace internal

void F32ToF16Row(const float* x, int64_t n, uint16_t* out) {
  static const bool f16c = HostCpuFeatures().HasAvx2Set();
  int64_t i = f16c ? internal::F32ToF16RowF16c(x, n, out) : 0;
  for (; i < n; ++i) out[i] = F32ToF16(x[i]);
}

// ---- fp8 e4m3 -----------------------------------------------------------------------------------

float F8E4M3ToF32(uint8_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x80u) << 24;
  if ((bits & 0x7fu) == 0x7fu) return F32FromBits(sign | kF32QuietNaN);
  return F32FromBits(AssembleF32(sign, (bits >> 3) & 0xfu, bits & 0x7u, 3, 7));
}

uint8_t F32ToF8E4M3(float value, bool saturate) {
  const uint32_t bits = F32Bits(value);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t abs_bits = bits & kF32AbsMask;
  constexpr uint8_t kMax = 0x7e, kNaN = 0x7f;
  if (abs_bits > kF32Inf) return sign | kNaN;
  if (abs_bits == kF32Inf) return sign | (saturate ? kMax : kNaN);
  const uint32_t code = RoundMagnitude(abs_bits, 3, 7);
  if (code > kMax) return sign | (saturate ? kMax : kNaN);
  return static_cast<uint8_t>(sign | code);
}

// ---- fp8 e5m2 -----------------------------------------------------------------------------------

float F8E5M2ToF32(uint8_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x80u) << 24;
  const uint32_t exp_field = (bits >> 2) & 0x1fu;
  const uint32_t mantissa = bits & 0x3u;
  if (exp_field == 0x1f) {
    return F32FromBits(mantissa == 0 ? (sign | kF32Inf) : F32NaN(sign, mantissa, 2));
  }
  return F32FromBits(AssembleF32(sign, exp_field, mantissa, 2, 15));
}

uint8_t F32ToF8E5M2(float value, bool saturate) {
  const uint32_t bits = F32Bits(value);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t abs_bits = bits & kF32AbsMask;
  constexpr uint8_t kMax = 0x7b, kInf = 0x7c;
  if (abs_bits > kF32Inf) {  // NaN: quiet (mantissa MSB), keep the top payload bit
    return static_cast<uint8_t>(sign | 0x7eu | ((abs_bits >> 21) & 0x1u));
  }
  if (abs_bits == kF32Inf) return sign | (saturate ? kMax : kInf);
  const uint32_t code = RoundMagnitude(abs_bits, 2, 15);
  if (code > kMax) return sign | (saturate ? kMax : kInf);
  return static_cast<uint8_t>(sign | code);
}

// ---- fp4 e2m1 -----------------------------------------------------------------------------------

float F4E2M1ToF32(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x8u) << 28;
  return F32FromBits(AssembleF32(sign, (code >> 1) & 0x3u, code & 0x1u, 1, 1));
}

uint8_t F32ToF4E2M1(float value) {
  const uint32_t bits = F32Bits(value);
  const uint32_t abs_bits = bits & kF32AbsMask;
  if (abs_bits > kF32Inf) return 0;  // no NaN in e2m1
  const uint8_t sign = static_cast<uint8_t>((bits >> 28) & 0x8u);
  constexpr uint8_t kMax = 0x7;
  if (abs_bits == kF32Inf) return sign | kMax;
  const uint32_t code = RoundMagnitude(abs_bits, 1, 1);
  return static_cast<uint8_t>(sign | (code > kMax ? kMax : code));
}

// ---- e8m0 ---------------------------------------------------------------------------------------

float E8M0ToF32(uint8_t code) {
  if (code == 0xff) return F32FromBits(kF32QuietNaN);
  if (code == 0) return F32FromBits(0x00400000u);  // 2^-127, an f32 subnormal
  return F32FromBits(static_cast<uint32_t>(code) << 23);
}

uint8_t F32ToE8M0(float value, E8M0Rounding rounding) {
  const uint32_t bits = F32Bits(value);
  const uint32_t abs_bits = bits & kF32AbsMask;
  if (abs_bits > kF32Inf) return 0xff;   // NaN
  if (abs_bits == 0) return 0x00;        // +-0: the smallest scale
  if (bits & kF32SignMask) return 0xff;  // negative, including -inf: not a scale
  if (abs_bits == kF32Inf) return 0xfe;
  // value = 2^exp * 1.fraction with fraction in 23 bits.
  int exp;
  uint32_t fraction;
  const uint32_t exp_field = abs_bits >> 23;
  if (exp_field != 0) {
    exp = static_cast<int>(exp_field) - 127;
    fraction = abs_bits & kF32MantissaMask;
  } else {  // f32 subnormal: normalise
    const int lead = std::bit_width(abs_bits) - 1;
    exp = -149 + lead;
    fraction = (abs_bits << (23 - lead)) & kF32MantissaMask;
  }
  int code = exp + 127;
  switch (rounding) {
    case E8M0Rounding::kFloor:
      break;
    case E8M0Rounding::kCeil:
      code += fraction != 0 ? 1 : 0;
      break;
    case E8M0Rounding::kNearest:
      code += fraction >= 0x400000u ? 1 : 0;
      break;
  }
  if (code < 0) return 0x00;
  if (code > 0xfe) return 0xfe;
  return static_cast<uint8_t>(code);
}

// ---- ue4m3 --------------------------------------------------------------------------------------

float UE4M3ToF32(uint8_t bits) {
  if (bits >= 0x7f) return F32FromBits(kF32QuietNaN);  // 0x7f NaN; 0x80.. not ue4m3 codes
  return F32FromBits(AssembleF32(0, (bits >> 3) & 0xfu, bits & 0x7u, 3, 7));
}

uint8_t F32ToUE4M3(float value) {
  const uint32_t bits = F32Bits(value);
  const uint32_t abs_bits = bits & kF32AbsMask;
  constexpr uint8_t kMax = 0x7e, kNaN = 0x7f;
  if (abs_bits > kF32Inf) return kNaN;
  if (bits & kF32SignMask) return 0;
  if (abs_bits == kF32Inf) return kMax;
  const uint32_t code = RoundMagnitude(abs_bits, 3, 7);
  return static_cast<uint8_t>(code > kMax ? kMax : code);
}

}  // namespace ember
