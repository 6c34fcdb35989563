// Dot-product kernels for block-scaled weight rows (block_scaled.h) and their ISA dispatch.
//
// FP4 (MXFP4, NVFP4): the f32 activation row is quantized once per matmul to int8 with one f32
// scale per 16 elements (amax / 127, round to nearest even). Twice an e2m1 value is an integer in
// {0, +-1, +-2, +-3, +-4, +-6, +-8, +-12}, so a 16-entry byte table (pshufb) turns nibbles into
// int8 and vpdpbusd / pmaddubsw sum weight x activation products exactly in int32; the weight's
// block scale times the activation's scale is applied per 8-element lane group in f32. The only
// approximation is the activation rounding: at most half a step, amax16 / 254, per element.
//
// FP8 e4m3: activations stay f32. A code becomes an f16 bit pattern with two integer ops
// ((sign << 15) | (code & 0x7f) << 7 is e4m3 * 2^-8 exactly, subnormals included), vcvtph2ps
// widens it, and FMAs accumulate; 2^8 and the scales are applied per 128-element block / row.
//
// Variants, one per ISA level of core/isa.h (which picks the active one for every kernel family):
// "ref" (scalar oracle on the natural-order int8 activations: never optimise it), "generic"
// (portable C++ on the SIMD layout), "avx2" (AVX2 + FMA + F16C: pshufb + pmaddubsw) and "avx512"
// (AVX-512 BW/VL + VNNI: vpshufb + vpdpbusd).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "core/isa.h"
#include "quant/block_scaled.h"

namespace ember::quant {

// ---- int8 activation rows for FP4 weights ---------------------------------------------------------
// One row of k (a multiple of 16) activations, at these byte offsets (each 64-byte aligned):
//   q[k]            int8, natural order (what the ref kernels read)
//   scale[k/16]     f32, q * scale approximates x
//   abs[k]          |q| in chunk order: per 128-element chunk (the last one may be shorter, L a
//                   multiple of 16) the L/2 even elements, then the L/2 odd ones, so that byte j
//                   of a chunk's packed codes (low nibble = element 2j, high = 2j+1) meets abs[j]
//                   and abs[L/2 + j]; four consecutive bytes of either half then cover 8
//                   consecutive elements, which is one int32 lane of the SIMD sums
//   flip[k]         0x08 where q < 0, in chunk order: XORed into the weight nibble, it moves the
//                   activation's sign onto the table lookup so the activation can be unsigned
//   lane_scale[k/8] f32, the scale of each 8-element group (scale[g / 2])
//   packed[k/16]    32-byte records the packed FP4 GEMM reads (block_scaled_packed.h), written
//                   only where that GEMM runs (FillPackedActivationRecords), not by the quantizers
struct ActivationLayout {
  int64_t q, scale, abs, flip, lane_scale, packed, bytes;
};
ActivationLayout Int8ActivationLayout(int64_t k);
constexpr int64_t kChunk = 128;  // elements per chunk of the SIMD layout (64 code bytes)

// Fills `out` (Int8ActivationLayout(k).bytes bytes, 64-byte aligned) from x[0, k).
void QuantizeActivationInt8(const float* x, int64_t k, uint8_t* out);

// ---- kernels ---------------------------------------------------------------------------------------
// FP4 row dot: codes (k/2 bytes) and scales (k/32 e8m0 or k/16 e4m3 bytes) of one weight row
// against `rows` (1..kMaxBlockDotRows) activation rows at act + r * act_stride bytes. out[r] is
// sum_k element(code) * block_scale * x_hat[r, k] (global scale not applied); row r's value is
// bit for bit the same whatever `rows` is.
// prefetch: null, or the codes of a later row of the same length, requested one cache line per
// 64 code bytes as the loop goes (a hint: it never changes out). The caller's decode GEMV passes
// the row it will reduce next but one; spreading those requests over the dot rather than issuing
// a whole row at once moved the 2-thread MXFP4 / NVFP4 GEMV from 70-79% to 82-97% of the triad
// (a burst of 32+ prefetches fills the line-fill buffers and stalls the loads behind it).
using Fp4DotFn = void (*)(int64_t k, const uint8_t* codes, const uint8_t* scales, const uint8_t* act,
                          int64_t act_stride, int rows, float* out, const uint8_t* prefetch);
// FP8 row dot against f32 activations x + r * x_stride (floats). block_scales: the f32 scales of
// this row's 128x128 blocks (k/128 rounded up), or null (all 1). Same contract as Fp4DotFn.
using Fp8DotFn = void (*)(int64_t k, const uint8_t* codes, const float* block_scales, const float* x, int64_t x_stride,
                          int rows, float* out, const uint8_t* prefetch);
constexpr int kMaxBlockDotRows = 4;

// Packed FP4 GEMM (block_scaled_packed.h): y[i * ldy + j] for i in [0, m), j in [row_begin,
// row_end) from the 16-row groups at `packed` (group g = output rows 16g..16g+15 of the matrix) and
// m prepared activation rows at act + i * act_stride whose packed records are filled; each value
// bit for bit what the same variant's Fp4DotFn and BlockScaledMatMulRows give it.
using PackedFp4GemmFn = void (*)(int64_t k, const uint8_t* packed, const uint8_t* act, int64_t act_stride, int64_t m,
                                 float global_scale, int64_t row_begin, int64_t row_end, float* y, int64_t ldy);

// One ISA variant: the FP4 dot of each FP4 format (indexed by WeightFormat; null for FP8, whose
// rows are f32, WeightFormatTraits::int8_activations) and the FP8 dot.
struct BlockDotVariant {
  constexpr BlockDotVariant(std::initializer_list<std::pair<WeightFormat, Fp4DotFn>> fp4_dots, Fp8DotFn fp8_dot,
                            std::initializer_list<std::pair<WeightFormat, PackedFp4GemmFn>> packed_gemms = {})
      : fp8(fp8_dot) {
    for (const auto& [format, dot] : fp4_dots) fp4_[static_cast<int>(format)] = dot;
    for (const auto& [format, gemm] : packed_gemms) packed_[static_cast<int>(format)] = gemm;
  }
  Fp4DotFn Fp4For(WeightFormat format) const { return fp4_[static_cast<int>(format)]; }
  // The packed GEMM for `format`, or null (the level has none: the row dots run).
  PackedFp4GemmFn PackedFor(WeightFormat format) const { return packed_[static_cast<int>(format)]; }
  Fp8DotFn fp8;

 private:
  std::array<Fp4DotFn, kWeightFormatCount> fp4_{};
  std::array<PackedFp4GemmFn, kWeightFormatCount> packed_{};
};

// The variants per ISA level (block_scaled_dot_variants.h), registered with core/isa.h.
extern const IsaTable<BlockDotVariant> kBlockDotVariants;
// The variant of the active level.
inline const BlockDotVariant& ActiveBlockDotVariant() { return kBlockDotVariants.Active(); }

}  // namespace ember::quant
