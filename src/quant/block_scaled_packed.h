// The load-time repacked copy of an FP4 (MXFP4 / NVFP4) block-scaled matrix for the register-tiled
// GEMM (block_scaled_packed_avx512.cc), and the extra activation records that GEMM reads.
//
// Bit equality with the row dots. The avx512 row dot (block_scaled_dot_avx512.cc) reduces an
// output as 16 f32 lane accumulators: lane j of chunk c (128 elements) holds the exact int32 sum
// over elements c*128 + 8j .. +7, and acc_j = fma(float(isum), w_scale * a_scale, acc_j) runs over
// the chunks in order; then a fixed horizontal tree over the 16 lanes, times 0.5 (MXFP4) or 128
// (NVFP4, the 2^-8 of its f16 scale trick), plus the scalar ref::Fp4Range over the k % 128 tail
// (per 16 elements, acc += float(isum16) * (block_scale * a_scale), then 0.5 * acc), times the
// global scale. The packed GEMM computes exactly these operations, with the 16 lanes of a zmm
// being 16 output rows instead of 16 element groups: every output keeps the row dot's f32
// sequence, so a packed result is bit for bit the row dot's whatever m, the tile, the thread
// split or the path (tests/unit/quant/block_scaled_packed_test.cc checks it).
//
// Layout of one 16-row group (rows past the matrix are zero), k = cols, C = k / 128 whole chunks,
// T = k % 128 tail elements, "word (c, j)" = the 4 code bytes 4j..4j+3 of a row's chunk c (its
// low nibbles are elements c*128 + 8j + {0, 2, 4, 6}, high nibbles + {1, 3, 5, 7}):
//   codes   for lane pair p in 0..7, chunk c in 0..C-1, jj in 0..1: 64 bytes, word (c, 2p + jj)
//           of rows 0..15 (4 bytes each, row order); then the T / 8 tail words, each 64 bytes
//   scales  for each of the k / block_size scale blocks: the 16 rows' scale bytes (e8m0 / e4m3)
// = 8k + 16 * k / block_size bytes per group: exactly the file's bytes for those 16 rows (the
// codes are permuted, the scale bytes interleaved), so the copy costs the matrix's size again.
// The kernel decodes nibbles with a table of 2 * e2m1 + 12 (unsigned, vpdpbusd's first operand)
// against the signed activations, and starts each integer at -12 * sum(q) (the activation
// records below), so the integer is exactly the row dot's.
#pragma once

#include <cstdint>
#include <memory>

#include "quant/block_scaled.h"

namespace ember::quant {

constexpr int64_t kPackedGroupRows = 16;

// Bytes of one 16-row group of a packed FP4 matrix with k columns, and of a whole matrix.
int64_t PackedFp4GroupBytes(WeightFormat format, int64_t k);
int64_t PackedFp4Bytes(WeightFormat format, int64_t rows, int64_t k);

// A packed copy of w (64-byte aligned, on huge pages: core/huge_pages.h), or null when w is not
// FP4. Single-threaded, portable.
using PackedBuffer = std::shared_ptr<uint8_t>;
PackedBuffer PackFp4Matrix(const BlockScaledMatrix& w);

// The packed copy Linear / ExpertWeights keep at load: PackFp4Matrix when the active variant has
// a packed GEMM for w's format (avx512 and amx levels), else null.
PackedBuffer MaybePackBlockScaledMatrix(const BlockScaledMatrix& w);

// Fewest activation rows for which BlockScaledMatMul uses the packed GEMM (when w.packed is set and
// the active variant has one); below it the row dots run. Chosen by measurement (README).
inline constexpr int64_t kPackedMinRows = 2;

// The packed-GEMM activation records of one prepared int8 activation row (block_scaled_dot.h's
// layout: k / 16 records of 32 bytes at ActivationLayout::packed). Record of the 16-element group
// G = c * 8 + p of a whole chunk at index p * C + c, of tail group t at 8C + t; its bytes:
//   0..3 the signed q of elements 16G + {0, 2, 4, 6} (meet word 2G's low nibbles), 4..7 of
//   16G + {1, 3, 5, 7} (its high nibbles), 8..15 the same for 16G + 8.., int32 -12 * sum(q) over
//   elements 16G..+7 at 16 and 16G+8..+15 at 20, the f32 activation scale at 24, int32 -12 *
//   sum(q) over all 16 at 28.
// Filled from the row's q and scales (QuantizeActivationInt8 must have run). Portable.
void FillPackedActivationRecords(int64_t k, uint8_t* act);

}  // namespace ember::quant
