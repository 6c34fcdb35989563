// The block-scaled dot variants compiled into ember (internal to src/quant).
#pragma once

#include <cstdint>

#include "quant/block_scaled_dot.h"

namespace ember::quant {

extern const BlockDotVariant kBlockDotRef;      // block_scaled_dot_ref.cc: scalar oracle
extern const BlockDotVariant kBlockDotGeneric;  // block_scaled_dot_generic.cc
extern const BlockDotVariant kBlockDotAvx2;     // block_scaled_dot_avx2.cc
extern const BlockDotVariant kBlockDotAvx512;   // block_scaled_dot_avx512.cc

// The two implementations of QuantizeActivationInt8 (which picks one by CPU), byte for byte the
// same (BlockScaledDot.Avx512ActivationQuantizerMatchesPortable): portable C++ written for the
// vectorizer (block_scaled_dot.cc) and AVX-512, 16 elements per instruction
// (block_scaled_dot_avx512.cc, hosts with the AVX-512 set). The decode GEMV runs it before the
// rows are split over threads: ~7 cycles per element as first written, ~5 portable, ~1.2 AVX-512.
void QuantizeActivationInt8Portable(const float* x, int64_t k, uint8_t* out);
void QuantizeActivationInt8Avx512(const float* x, int64_t k, uint8_t* out);

// The packed FP4 GEMMs (block_scaled_packed_avx512.cc), listed by kBlockDotAvx512.
void PackedMxfp4GemmAvx512(int64_t k, const uint8_t* packed, const uint8_t* act, int64_t act_stride, int64_t m,
                           float global_scale, int64_t row_begin, int64_t row_end, float* y, int64_t ldy);
void PackedNvfp4GemmAvx512(int64_t k, const uint8_t* packed, const uint8_t* act, int64_t act_stride, int64_t m,
                           float global_scale, int64_t row_begin, int64_t row_end, float* y, int64_t ldy);

namespace ref {
// sum over elements [k0, k1) of one FP4 weight row of k elements (k0, k1 multiples of 16) against the
// natural-order int8 activations of `act`: per 16 elements the exact integer sum of
// (2 * e2m1) * q, times (block scale * activation scale), accumulated in f32 in element order,
// times 0.5 at the end. The SIMD variants call it for the part of a row after the last whole
// 128-element chunk. Not inline: ISA-specific files must not share inline code (gguf_blocks.h).
float Fp4Range(bool nvfp4, int64_t k, int64_t k0, int64_t k1, const uint8_t* codes, const uint8_t* scales,
               const uint8_t* act);
}  // namespace ref

}  // namespace ember::quant
