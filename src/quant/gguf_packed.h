// GGUF weight matrices (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K) repacked at load time for a
// column-lane GEMM (AVX-512 hosts; AVX2 hosts for the 32-element types).
//
// The row-at-a-time dots (gguf_dot.h) spend per (weight row, activation row, block) an integer
// dot, an int -> float conversion, a scale product and two FMAs on one 32-element block: ~6
// vector uops for 32 multiply-adds, which made Q5_0 ~40% of a Gemma 3 prefill (Gemma's 640-wide
// q/k/gate/up matrices fall back from Q4_K to Q5_0). Repacked, sixteen weight rows share every
// vector: lane c of a zmm belongs to output row c, vpdpbusd adds four of its products per step
// against four broadcast activation bytes, and the scale work (one conversion, one product, two
// FMAs) covers 16 outputs at once, ~12 uops per activation row for 16 x 32 multiply-adds.
//
// Layout: groups of kPackRows = 16 weight rows (the last one zero-padded), each a sequence of
// k / 32 packed blocks; Q5_0's kPackedQ5_0BlockBytes are:
//   [0, 32)     the 16 rows' f16 scales d
//   [32, 288)   four 64-byte vectors; byte 4c + e of vector t holds, for row c, element 8t + e
//               (low nibble) and element 8t + 4 + e (high nibble), low four bits of q
//   [288, 352)  eight u64 masks; bit 4c + e of mask j is the fifth bit of row c's element 4j + e
// The same bytes as the original (22 per row and block), so decode streams no more memory.
//
// Q4_K packs a super-block of 16 rows into kPackedQ4_KBlockBytes (148 per row where the file has
// 144: the 6-bit scales and mins unpacked to bytes):
//   [0, 32) d, [32, 64) dmin (f16 per row); [64, 192) scale of sub-block s for row c at
//   16 s + c; [192, 320) the mins likewise; [320, 2368) eight sub-blocks of 256 bytes, each four
//   64-byte vectors with Q5_0's nibble layout (no fifth bit)
// and per (r, c) and super-block computes the exact integers sumi = sum_s sc_s * (q . a)_s and
// summin = sum_s m_s * (bsums[2s] + bsums[2s + 1]), then acc = fma(float(sumi), d * da, acc),
// acc_min = fma(float(summin), dmin * da, acc_min), and returns acc - acc_min.
//
// The other types, the same bytes per row as the file unless said:
//   Q4_0 (kPackedQ4_0BlockBytes): [0, 32) d, [32, 288) Q5_0's nibble vectors. Per block
//     acc = fma(float(q . a), d * da, acc), shift = fma(d, da * sum(a), shift); returns
//     fma(shift, -8, acc).
//   Q4_1 (kPackedQ4_1BlockBytes): [0, 32) d, [32, 64) m, [64, 320) the nibble vectors. Per block
//     acc = fma(float(q . a), d * da, acc), acc_m = fma(m, da * sum(a), acc_m); returns acc + acc_m.
//   Q5_1 (kPackedQ5_1BlockBytes): Q4_1's layout, then [320, 384) Q5_0's fifth-bit masks;
//     Q4_1's sequence.
//   Q8_0 (kPackedQ8_0BlockBytes): [0, 32) d, [32, 544) eight 64-byte vectors, byte 4c + e of
//     vector j = element 4j + e of row c XOR 0x80 (q + 128: vpdpbusd multiplies an unsigned byte
//     by a signed one, and the activations are the signed side). The packed GEMM appends to each
//     activation row the integer -128 * sum(a) of every block (ExtendQ8_0Activation), the start of
//     its integer dot, so per block acc = fma(float(-128 * sum(a) + (q + 128) . a), d * da, acc):
//     the integer is the exact q . a, computed without a per-lane sign fix-up.
//   Q5_K (kPackedQ5_KBlockBytes): Q4_K's layout, then [2368, 2880) eight sub-blocks' fifth-bit
//     masks (64 bytes each, Q5_0's form); Q4_K's sequence. 180 bytes per row where the file has 176.
//   Q6_K (kPackedQ6_KBlockBytes): [0, 32) d; [32, 288) the int8 scales, scale of group 2p + i
//     (16 elements) for row c at 32 p + 2 c + i (one load widens to the (s_2p, s_2p+1) int16
//     pairs vpdpwssd multiplies the bsums by); [288, 3360) eight sub-blocks of 32 elements of
//     384 bytes: Q5_0's nibble vectors (low four bits), then two 64-byte vectors whose byte
//     4c + e holds in bits 2s, 2s + 1 the top two bits of element 4(4u + s) + e of vector u.
//     Per super-block the exact sumi = sum_g sc_g * (q . a)_g - 32 * sum_g sc_g * bsums_g, then
//     acc = fma(float(sumi), d * da, acc).
//
// Numerics: per (activation row r, weight row c) the Q5_0 kernel runs, block by block in order,
//   acc   = fma(float(sum_j q_j a_j), d * da, acc)     shift = fma(d, da * sum(a), shift)
// and returns fma(shift, -16, acc); every type's kernel is such a fixed sequence: it depends on k
// only, never on m, on which other rows share the tile or on the thread split, so results are
// batch invariant (checked in gguf_packed_test.cc). It differs from the row dots only in the
// order of f32 additions (within the gguf_dot_test bound of the reference).
#pragma once

#include <cstdint>
#include <memory>

#include "quant/gguf_matmul.h"

namespace ember::quant {

inline constexpr int kPackRows = 16;
inline constexpr int64_t kPackedQ4_0BlockBytes = 288;
inline constexpr int64_t kPackedQ4_1BlockBytes = 320;
inline constexpr int64_t kPackedQ5_0BlockBytes = 352;
inline constexpr int64_t kPackedQ5_1BlockBytes = 384;
inline constexpr int64_t kPackedQ8_0BlockBytes = 544;
inline constexpr int64_t kPackedQ4_KBlockBytes = 2368;
inline constexpr int64_t kPackedQ5_KBlockBytes = 2880;
inline constexpr int64_t kPackedQ6_KBlockBytes = 3360;

// The packed copy of `w` (a type whose traits row has a packed form: every type GgufMatMul
// multiplies by except F32 / F16 / BF16) when the avx512 or amx variant is active, or the avx2
// one and the form has AVX2 tiles (the 32-element types), else null: GgufMatMul then uses the
// row dots. The amx level reads the same copy (no second layout).
// Set the result's get() as `w.packed` and keep the pointer alive as long as the matrix.
std::shared_ptr<const void> PackQuantMatrix(const QuantMatrix& w);

// Repacks all of `w` into `out` (Packed*Bytes bytes), whatever the host.
int64_t PackedQ4_0Bytes(int64_t rows, int64_t cols);
void PackQ4_0(const QuantMatrix& w, uint8_t* out);
int64_t PackedQ4_1Bytes(int64_t rows, int64_t cols);
void PackQ4_1(const QuantMatrix& w, uint8_t* out);
int64_t PackedQ5_0Bytes(int64_t rows, int64_t cols);
void PackQ5_0(const QuantMatrix& w, uint8_t* out);
int64_t PackedQ5_1Bytes(int64_t rows, int64_t cols);
void PackQ5_1(const QuantMatrix& w, uint8_t* out);
int64_t PackedQ8_0Bytes(int64_t rows, int64_t cols);
void PackQ8_0(const QuantMatrix& w, uint8_t* out);
int64_t PackedQ4_KBytes(int64_t rows, int64_t cols);
void PackQ4_K(const QuantMatrix& w, uint8_t* out);
int64_t PackedQ5_KBytes(int64_t rows, int64_t cols);
void PackQ5_K(const QuantMatrix& w, uint8_t* out);
int64_t PackedQ6_KBytes(int64_t rows, int64_t cols);
void PackQ6_K(const QuantMatrix& w, uint8_t* out);

// Packed Q8_0's activation extension: one int32 -128 * sum(a) per block of a Q8_0 activation row
// of k elements, appended after its Q8_0BlockSums (GgufMatMul sizes the rows for it and calls
// ExtendQ8_0Activation on each quantized row).
int64_t PackedActivationExtraBytesQ8_0(int64_t k);
void ExtendQ8_0Activation(uint8_t* row, int64_t k);

// Output rows [group_begin * 16, group_end * 16) (clipped to n) of y [m, n] (row stride n) from a
// packed matrix of n rows and k columns, and m activation rows (QuantizeActivationRow, extended
// where the form says so, act_bytes apart). AVX-512 only: callers check PackQuantMatrix returned
// non-null. GgufMatMul reaches them through the type's traits row (GgufTypeKernels::packed).
void PackedRowsQ4_0Avx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ4_1Avx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ5_0Avx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ5_1Avx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ8_0Avx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ4_KAvx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ5_KAvx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ6_KAvx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y);

// The AVX2 tiles of the 32-element types (gguf_packed_avx2.cc): the same contract and the same
// bits as the Avx512 ones (the Q8_0 extension of the activation rows is not read).
void PackedRowsQ4_0Avx2(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                        const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ4_1Avx2(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                        const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ5_0Avx2(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                        const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ5_1Avx2(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                        const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ8_0Avx2(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                        const uint8_t* act, int64_t m, int64_t act_bytes, float* y);

// The AMX tile GEMMs (gguf_packed_amx.cc): the same contract and the same bits as the Avx512 ones,
// for m >= kAmxMinRows under the amx variant. The activation tiles are kAmxTileRows rows: `act`
// must hold m rounded up to a multiple of kAmxTileRows rows (the rows past m are read, whatever
// they hold, and their products dropped). Each call configures the calling thread's tiles and
// releases them before it returns (core/amx_tiles.h).
inline constexpr int kAmxTileRows = 16;
// Below this many activation rows GgufMatMul keeps the avx512 tiles (GgufPackedForm::amx_min_rows;
// measured, src/quant/README.md): one tile's worth, and two for Q6_K, whose 16-element groups
// take twice the tile products per block.
inline constexpr int64_t kAmxMinRows = 16;
inline constexpr int64_t kAmxMinRowsQ6_K = 32;
void PackedRowsQ4_0Amx(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                       const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ4_1Amx(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                       const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ5_0Amx(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                       const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ5_1Amx(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                       const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ8_0Amx(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                       const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ4_KAmx(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                       const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ5_KAmx(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                       const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
void PackedRowsQ6_KAmx(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                       const uint8_t* act, int64_t m, int64_t act_bytes, float* y);

}  // namespace ember::quant
