// Element types ember stores and computes with, and exact scalar conversions between them.
//
// Conversions to narrow types round to nearest, ties to even (RNE). Saturation and NaN rules follow
// each format's specification; the comment at the top of dtype_convert.cc has the details per type.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace ember {

enum class DType : uint8_t {
  kF32,
  kF16,      // IEEE 754 binary16
  kBF16,     // bfloat16: the top 16 bits of an f32
  kF8E4M3,   // OCP FP8 E4M3 ("e4m3fn"): no infinities, 0x7f/0xff NaN, max 448
  kF8E5M2,   // OCP FP8 E5M2: IEEE-like, infinities and NaNs, max 57344
  kF4E2M1,   // OCP MX FP4 E2M1: values ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}, no inf/NaN (4 bits, 2 per byte)
  kE8M0,     // OCP MX scale: 2^(code-127), 0xff NaN, no sign, no zero
  kUE4M3,    // unsigned E4M3 (NVFP4 block scale): E4M3 with the sign bit required to be 0
  kU8,
  kI8,
  kI16,
  kI32,
  kI64,
  kF64,
  kBool,
};

// Bits per element (4 for kF4E2M1, 8 for the one-byte types, ...).
int DTypeBits(DType dtype);
// Bytes needed to hold `count` elements (rounded up for sub-byte types).
int64_t DTypeBytes(DType dtype, int64_t count);
// "f32", "bf16", "f8_e4m3", ...
std::string_view DTypeName(DType dtype);
// Parses safetensors' dtype strings ("F32", "BF16", "F8_E4M3", "U8", ...).
std::optional<DType> DTypeFromSafetensors(std::string_view name);

// ---- bfloat16 (inline: these sit in every inner loop) -------------------------------------------
inline float BF16ToF32(uint16_t bits) {
  const uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

// Round to nearest even; NaN stays NaN (quiet), infinities stay infinite, overflow rounds to inf.
inline uint16_t F32ToBF16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  if ((word & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((word >> 16) | 0x0040u);
  const uint32_t rounding_bias = 0x7fffu + ((word >> 16) & 1u);
  return static_cast<uint16_t>((word + rounding_bias) >> 16);
}

// Rounds an f32 to the nearest bf16 and back.
inline float RoundToBF16(float value) { return BF16ToF32(F32ToBF16(value)); }

// ---- the other formats (dtype_convert.cc: portable bit manipulation, no intrinsics) -------------
// Decoding is exact. Encoding rounds to nearest, ties to even, carrying into the next binade where
// rounding does so; f32 subnormal inputs are rounded, not flushed. Overflow means the *rounded*
// magnitude exceeds the largest finite value (so e4m3 overflows above 464, e5m2 from 61440, f16
// from 65520). Decoded NaNs are quiet f32 NaNs with the code's sign.
float F16ToF32(uint16_t bits);
// RNE; overflow and +-inf -> +-inf; NaN -> quiet NaN (sign and top payload bits kept, like F16C).
uint16_t F32ToF16(float value);

// 0x7f and 0xff are NaN; no infinities.
float F8E4M3ToF32(uint8_t bits);
// NaN -> NaN with the input's sign. saturate=true clamps overflow and +-inf to +-448 (PTX
// "satfinite" / ModelOpt behaviour); saturate=false maps them to NaN (the OCP non-saturating mode,
// as ml_dtypes' float8_e4m3fn cast does).
uint8_t F32ToF8E4M3(float value, bool saturate = true);

float F8E5M2ToF32(uint8_t bits);
// NaN -> quiet NaN with the input's sign. saturate=true clamps overflow and +-inf to +-57344
// ("satfinite"); saturate=false gives +-inf (IEEE).
uint8_t F32ToF8E5M2(float value, bool saturate = true);

// E2M1 code in the low 4 bits: sign << 3 | magnitude code (the high 4 bits are ignored).
// Conversion saturates: overflow and +-inf -> +-6. NaN -> +0 (the format has no NaN).
float F4E2M1ToF32(uint8_t code);
uint8_t F32ToF4E2M1(float value);

// E8M0: 2^(code - 127) (code 0 is 2^-127, an f32 subnormal); 0xff is NaN.
float E8M0ToF32(uint8_t code);

// How F32ToE8M0 picks a power of two for a positive value x in [2^k, 2^(k+1)).
enum class E8M0Rounding : uint8_t {
  kFloor,    // 2^k = 2^floor(log2 x). The OCP MX scale rule is
             // X = 2^(floor(log2(amax)) - emax_elem): F32ToE8M0(amax, kFloor) minus emax_elem
             // (2 for e2m1, 8 for e4m3, 15 for e5m2), clamped at 0, is that scale's code.
  kCeil,     // 2^ceil(log2 x): the smallest power of two >= x (x / scale never exceeds 1).
  kNearest,  // the nearer of 2^k and 2^(k+1); the tie x = 1.5 * 2^k goes up to 2^(k+1). A format
             // without mantissa bits has no "even" neighbour; up is what ml_dtypes and torch do.
};
// Positive values round as chosen and clamp to [2^-127, 2^127] (codes 0x00..0xfe), as does +inf
// (-> 0xfe); +-0 -> 0x00 (the smallest scale, for an all-zero block); NaN, negative values and -inf
// -> 0xff (NaN).
uint8_t F32ToE8M0(float value, E8M0Rounding rounding = E8M0Rounding::kNearest);

// Unsigned e4m3 (NVFP4 block scale): 0x00..0x7e decode as e4m3; 0x7f is NaN; codes with the sign
// bit set are not ue4m3 codes and decode to NaN.
float UE4M3ToF32(uint8_t bits);
// RNE like F32ToF8E4M3. Negative inputs (including -0 and -inf) -> 0; overflow and +inf saturate to
// 448 (0x7e); NaN -> 0x7f.
uint8_t F32ToUE4M3(float value);

}  // namespace ember
