// Vectorised activation quantizers (internal to src/quant): bit for bit the scalar
// QuantizeRowQ8_0 / QuantizeRowQ8_K of gguf_dequant.h (amax by an exact max, the same f32
// multiply by 1 / d, rounding half away from zero as truncate-then-compare, the same clamp and
// NaN -> 0), which QuantizeActivationRow (gguf_dot.cc) uses when the host has the AVX-512 set,
// else the AVX2 ones where it has AVX2. The scalar versions were ~13% of a Gemma 3 prefill (libm
// roundf and fmaxf per element), ~14% of a SmolLM2 verification run on an AVX2-only host.
// tests/unit/quant/gguf_quantize_simd_test.cc checks the bytes against the scalar code.
#pragma once

#include <cstdint>

#include "quant/gguf_blocks.h"

namespace ember::quant {

// A Q8_0 activation row (gguf_dot.h): the n / 32 blocks, then at `sums` one Q8_0BlockSum per
// block. n % 32 == 0. The scalar version (gguf_dot.cc) is QuantizeRowQ8_0 plus the sums.
void QuantizeActivationQ8_0(const float* x, int64_t n, BlockQ8_0* blocks, uint8_t* sums);
void QuantizeActivationQ8_0Avx512(const float* x, int64_t n, BlockQ8_0* blocks, uint8_t* sums);
void QuantizeActivationQ8_0Avx2(const float* x, int64_t n, BlockQ8_0* blocks, uint8_t* sums);
// QuantizeRowQ8_K. n % 256 == 0.
void QuantizeRowQ8_KAvx512(const float* x, int64_t n, BlockQ8_K* out);
void QuantizeRowQ8_KAvx2(const float* x, int64_t n, BlockQ8_K* out);

}  // namespace ember::quant
