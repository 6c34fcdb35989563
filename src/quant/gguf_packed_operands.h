// Internal to src/quant: one packed 16-row group (gguf_packed.h) unpacked into the operands of the
// AMX tile GEMM (gguf_packed_amx.cc). The tiles multiply bytes only, from memory: the nibbles,
// fifth bits and Q6_K's top bits are merged into whole bytes here (the avx512 tiles' decode, run
// once per group and kept for every activation tile), and the f16 / 6-bit scales widened to the
// lanes the epilogue multiplies by. Built with the avx512 flags (gguf_packed_avx512.cc), beside
// the decode it shares.
//
// A "B tile" is the 32 elements of a run for the 16 rows in the tiles' VNNI order: eight 64-byte
// rows, byte 4c + e of row j = element 4j + e of weight row c (the avx512 tiles' decoded q[j]).
// Per 32-element block (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), kLegacyOperandBytes at b * that:
//   [0, 512)    the B tile: q as unsigned bytes (Q4_0 / Q4_1 0..15, Q5_0 / Q5_1 0..31), Q8_0's as
//               signed bytes (the file's q, not the packed q + 128)
//   [512, 576)  d per row, f32
//   [576, 640)  Q4_1 / Q5_1: m per row, f32 (the others: d again)
// Per 256-element super-block of Q4_K / Q5_K, kQ45_KOperandBytes at b * that:
//   [0, 4096)      eight sub-blocks' B tiles (q unsigned, 0..15 / 0..31)
//   [4096, 4160)   d, [4160, 4224) dmin (f32 per row)
//   [4224, 4736)   sub-block s's scale per row as int32 at 4224 + 64 s
//   [4736, 5248)   sub-block s's min per row as the int16 pair (m, m) at 4736 + 64 s
// Per super-block of Q6_K, kQ6_KOperandBytes:
//   [0, 4096)      eight sub-blocks' B tiles (q unsigned 0..63, before the -32); the 16-element
//                  group 2s + u is rows [4u, 4u + 4) of sub-block s's tile
//   [4096, 4160)   d (f32 per row)
//   [4160, 4672)   group 2s's scale per row as int32 at 4160 + 64 s; [4672, 5184) group 2s + 1's
//   [5184, 5696)   the int16 pairs (sc_2s, sc_2s+1) per row at 5184 + 64 s
#pragma once

#include <cstdint>

namespace ember::quant {

inline constexpr int64_t kBTileBytes = 512;
inline constexpr int64_t kLegacyOperandBytes = 640;
inline constexpr int64_t kQ45_KOperandBytes = 5248;
inline constexpr int64_t kQ6_KOperandBytes = 5696;

// Blocks (super-blocks for the K-quants) [0, nb) of `group`, the type's packed group, into
// `operands` (nb times the type's operand bytes, 64-byte aligned).
void UnpackGroupQ4_0Avx512(const uint8_t* group, int64_t nb, uint8_t* operands);
void UnpackGroupQ4_1Avx512(const uint8_t* group, int64_t nb, uint8_t* operands);
void UnpackGroupQ5_0Avx512(const uint8_t* group, int64_t nb, uint8_t* operands);
void UnpackGroupQ5_1Avx512(const uint8_t* group, int64_t nb, uint8_t* operands);
void UnpackGroupQ8_0Avx512(const uint8_t* group, int64_t nb, uint8_t* operands);
void UnpackGroupQ4_KAvx512(const uint8_t* group, int64_t nb, uint8_t* operands);
void UnpackGroupQ5_KAvx512(const uint8_t* group, int64_t nb, uint8_t* operands);
void UnpackGroupQ6_KAvx512(const uint8_t* group, int64_t nb, uint8_t* operands);

}  // namespace ember::quant
