// Element types ember stores and computes with, and exact scalar conversions between them.
//
// Conversions to narrow types round to nearest, ties to even (RNE). Saturation and NaN rules follow
// each format's specification; see dtypes.cc and README.md for the details per type.
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

// ---- bfloat16 (inline: these sit in every inner loop) ----------------------------------------
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

// ---- the other formats (dtypes.cc) -----------------------------------------------------------
float F16ToF32(uint16_t bits);
uint16_t F32ToF16(float value);  // RNE; overflow -> inf; NaN -> quiet NaN

float F8E4M3ToF32(uint8_t bits);
// saturate=true clamps finite values beyond ±448 to ±448 (ModelOpt / "satfinite" behaviour);
// saturate=false maps them to NaN as torch's float8_e4m3fn cast does. NaN -> NaN, ±inf -> ±448 or NaN.
uint8_t F32ToF8E4M3(float value, bool saturate = true);

float F8E5M2ToF32(uint8_t bits);
// saturate=true clamps finite overflow to ±57344; saturate=false gives ±inf. NaN stays NaN.
uint8_t F32ToF8E5M2(float value, bool saturate = true);

// E2M1 code in the low 4 bits: sign << 3 | magnitude code. Conversion saturates to ±6 (no NaN).
float F4E2M1ToF32(uint8_t code);
uint8_t F32ToF4E2M1(float value);

// E8M0: 2^(code - 127); 0xff is NaN.
float E8M0ToF32(uint8_t code);

float UE4M3ToF32(uint8_t bits);
// Negative inputs clamp to 0; saturates to 448.
uint8_t F32ToUE4M3(float value);

}  // namespace ember
