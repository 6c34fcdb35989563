// Scalar reference implementations (the test oracle). Signatures match kernels/matmul.h and
// kernels/paged_attention.h.
#pragma once

#include <cstdint>

namespace ember::kernels {
struct PagedKvView;
struct PagedHeadTask;
}  // namespace ember::kernels

namespace ember::kernels::ref {

void MatMulBF16(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n_begin, int64_t n_end,
                float* y, int64_t ldy);
void MatMulF32(const float* x, int64_t m, int64_t k, const float* w, int64_t n_begin, int64_t n_end, float* y,
               int64_t ldy);

// One query head: scores as sequential f32 dot products over keys widened (fp8: times their
// scale) to f32, softmax with std::exp, then values accumulated key by key.
void PagedAttentionHead(const PagedKvView& kv, const PagedHeadTask& task);

// out[i] = 0.5 g (1 + tanhf(sqrt(2/pi) (g + 0.044715 g^3))) * up[i], g = gate[i]: PyTorch's
// formula with libm's tanhf.
void GeGluTanh(const float* gate, const float* up, int64_t count, float* out);

}  // namespace ember::kernels::ref
