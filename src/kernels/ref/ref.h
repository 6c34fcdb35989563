// Scalar reference implementations (the test oracle). Signatures match kernels/matmul.h and
// kernels/paged_attention.h.
#pragma once

#include <cstdint>

namespace ember::kernels {
struct KeyValueRows;
struct PagedKvView;
struct PagedTileTask;
}  // namespace ember::kernels

namespace ember::kernels::ref {

void MatMulBF16(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n_begin, int64_t n_end,
                float* y, int64_t ldy);
void MatMulF32(const float* x, int64_t m, int64_t k, const float* w, int64_t n_begin, int64_t n_end, float* y,
               int64_t ldy);

// One tile over one segment, query by query: scores as sequential f32 dot products over keys
// widened (fp8: times their scale) to f32, their max, then std::exp weights and values
// accumulated key by key in position order.
void PagedAttentionTile(const PagedKvView& kv, const PagedTileTask& task);
// std::exp, element by element.
void SoftmaxExp(const float* x, int64_t count, float* out);
// Query by query: sequential f32 dot products, std::exp weights, values accumulated key by key,
// then times 1 / (sum of weights).
void RowAttention(const float* q, int64_t q_stride, int64_t num_queries, int64_t head_dim, float scale,
                  const KeyValueRows* runs, int64_t num_runs, float* scores, float* out, int64_t out_stride);

// out[i] = 0.5 g (1 + tanhf(sqrt(2/pi) (g + 0.044715 g^3))) * up[i], g = gate[i]: PyTorch's
// formula with libm's tanhf.
void GeGluTanh(const float* gate, const float* up, int64_t count, float* out);

}  // namespace ember::kernels::ref
