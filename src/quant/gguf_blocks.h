// GGUF quantized block layouts, byte for byte as GGUF files store them (little-endian).
//
// Each struct is one block of a row: `kElements` consecutive weights in `sizeof(Block)` bytes.
// f16 fields are kept as their raw uint16_t bits (F16ToF32 in core/dtypes.h decodes them), so
// the structs are plain bytes needing at most 2-byte alignment (4 for Q8_K, which only exists in
// memory). Every block size is even and GGUF aligns tensor data to 32 bytes, so tensor rows can
// be viewed as arrays of these structs directly.
//
// Note for ISA-specific translation units (*_avx2.cc, *_avx512.cc): do not call the inline
// helpers below from them. An un-inlined copy compiled with AVX-512 could be the one the linker
// keeps for the whole program and then run on a host without it.
//
// Element order inside a block (the part that is easy to get wrong):
//   Q4_0/Q4_1:  qs[j] low nibble is element j, high nibble element j + 16 (j < 16).
//   Q5_0/Q5_1:  as Q4, plus bit j of the little-endian u32 in qh is bit 4 of element j.
//   Q8_0/Q8_1:  qs[j] is element j.
//   Q2_K:       element 128h + 32t + l (h < 2, t < 4, l < 32) is bits 2t..2t+1 of qs[32h + l];
//               16 sub-blocks of 16, scales[i] = scale (low nibble) | min (high nibble).
//   Q3_K:       low 2 bits as Q2_K; bit 2 of element 32b + l is bit b of hmask[l], *set* means
//               no -4 offset; 16 6-bit signed (bias 32) scales packed in 12 bytes.
//   Q4_K/Q5_K:  element 64c + l (l < 32) is the low nibble of qs[32c + l], element 64c + 32 + l
//               the high nibble; eight sub-blocks of 32, each with a 6-bit scale and 6-bit min
//               packed in 12 bytes (UnpackQ4KScales). Q5_K: bit 4 of element 32s + l is bit s of
//               qh[l].
//   Q6_K:       element 128h + r (r < 128): low 4 bits from ql[64h + r mod 64] (low nibble for
//               r < 64, high nibble otherwise), high 2 bits are bits 2*(r/32) of qh[32h + r mod
//               32]; value (q - 32) * d * scales[element / 16].
//   Q8_K:       f32 scale, 256 int8, and the sums of each 16 consecutive qs (bsums).
#pragma once

#include <cstdint>

namespace ember::quant {

// Elements per block of the 32-element ("legacy") formats and of the K-quant super-blocks.
inline constexpr int kQK = 32;
inline constexpr int kQKK = 256;

struct BlockQ4_0 {
  static constexpr int kElements = kQK;
  uint16_t d;           // f16 scale: value = d * (q - 8)
  uint8_t qs[kQK / 2];  // 4-bit quants, two per byte
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ4_1 {
  static constexpr int kElements = kQK;
  uint16_t d;  // f16 scale: value = d * q + m
  uint16_t m;  // f16 minimum
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

struct BlockQ5_0 {
  static constexpr int kElements = kQK;
  uint16_t d;           // f16 scale: value = d * (q - 16)
  uint8_t qh[4];        // bit 4 of each quant, a little-endian u32
  uint8_t qs[kQK / 2];  // low 4 bits, two per byte
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ5_1 {
  static constexpr int kElements = kQK;
  uint16_t d;  // f16 scale: value = d * q + m
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

struct BlockQ8_0 {
  static constexpr int kElements = kQK;
  uint16_t d;  // f16 scale: value = d * q
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ8_1 {
  static constexpr int kElements = kQK;
  uint16_t d;  // f16 scale
  uint16_t s;  // f16 d * sum(qs), precomputed for the formats with a minimum
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_1) == 36);

struct BlockQ2_K {
  static constexpr int kElements = kQKK;
  uint8_t scales[kQKK / 16];  // per 16: 4-bit scale (low) and 4-bit min (high)
  uint8_t qs[kQKK / 4];       // 2-bit quants
  uint16_t d;                 // f16 super-block scale for the scales
  uint16_t dmin;              // f16 super-block scale for the mins
};
static_assert(sizeof(BlockQ2_K) == 84);

struct BlockQ3_K {
  static constexpr int kElements = kQKK;
  uint8_t hmask[kQKK / 8];  // bit 2 of each quant (set: no -4 offset)
  uint8_t qs[kQKK / 4];     // low 2 bits
  uint8_t scales[12];       // 16 6-bit scales, bias 32
  uint16_t d;               // f16 super-block scale
};
static_assert(sizeof(BlockQ3_K) == 110);

struct BlockQ4_K {
  static constexpr int kElements = kQKK;
  uint16_t d;            // f16 super-block scale for the 6-bit scales
  uint16_t dmin;         // f16 super-block scale for the 6-bit mins
  uint8_t scales[12];    // eight (scale, min) pairs, 6 bits each
  uint8_t qs[kQKK / 2];  // 4-bit quants: value = d * sc * q - dmin * m
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ5_K {
  static constexpr int kElements = kQKK;
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];    // as Q4_K
  uint8_t qh[kQKK / 8];  // bit 4 of each quant
  uint8_t qs[kQKK / 2];  // low 4 bits
};
static_assert(sizeof(BlockQ5_K) == 176);

struct BlockQ6_K {
  static constexpr int kElements = kQKK;
  uint8_t ql[kQKK / 2];      // low 4 bits
  uint8_t qh[kQKK / 4];      // high 2 bits
  int8_t scales[kQKK / 16];  // signed 8-bit scale per 16 elements
  uint16_t d;                // f16 super-block scale: value = d * scale * (q - 32)
};
static_assert(sizeof(BlockQ6_K) == 210);

struct BlockQ8_K {
  static constexpr int kElements = kQKK;
  float d;  // f32 scale (activations only; never stored in files)
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];  // sum of each 16 consecutive qs, for the K-quant minimum terms
};
static_assert(sizeof(BlockQ8_K) == 292);

// The 6-bit (scale, min) pairs of Q4_K and Q5_K. Bytes 0-3 hold the low 6 bits of scales 0-3,
// bytes 4-7 the low 6 bits of mins 0-3; bytes 8-11 hold scales 4-7 (low nibble) and mins 4-7
// (high nibble), whose top two bits are the top two bits of bytes 0-3 (scales) and 4-7 (mins).
inline void UnpackQ4KScales(const uint8_t packed[12], uint8_t scales[8], uint8_t mins[8]) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = packed[j] & 63;
    mins[j] = packed[j + 4] & 63;
    scales[j + 4] = static_cast<uint8_t>((packed[j + 8] & 0x0f) | ((packed[j] >> 6) << 4));
    mins[j + 4] = static_cast<uint8_t>((packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4));
  }
}

}  // namespace ember::quant
