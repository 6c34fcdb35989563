// Scalar reference implementations (the test oracle). Signatures match kernels/matmul.h.
#pragma once

#include <cstdint>

namespace ember::kernels::ref {

void MatMulBF16(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n_begin, int64_t n_end,
                float* y, int64_t ldy);
void MatMulF32(const float* x, int64_t m, int64_t k, const float* w, int64_t n_begin, int64_t n_end, float* y,
               int64_t ldy);

}  // namespace ember::kernels::ref
