// Matrix multiplication against weight matrices stored as in Hugging Face checkpoints.
//
// Every variant computes y[i, j] = sum_k x[i, k] * w[j, k] for an f32 activation matrix x [m, k]
// and a weight matrix w [n, k] ("[out, in]"), accumulating in f32. Weights are bf16 or f32.
// The threaded entry point MatMul splits the n output columns across the global thread pool;
// each thread runs the selected ISA variant on its column range, so a weight row streams from
// memory once per call whatever m is (decode m = 1 is a GEMV, prefill m > 1 reuses each row).
#pragma once

#include <cstdint>

#include "core/isa.h"
#include "core/tensor.h"

namespace ember::kernels {

// One ISA variant: computes output columns [n_begin, n_end) for all m rows.
// x has row stride k; y has row stride ldy.
using MatMulBF16Fn = void (*)(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n_begin,
                              int64_t n_end, float* y, int64_t ldy);
using MatMulF32Fn = void (*)(const float* x, int64_t m, int64_t k, const float* w, int64_t n_begin,
                             int64_t n_end, float* y, int64_t ldy);

struct PagedKvView;
struct PagedTileTask;
// One query tile over one key segment of paged attention (kernels/paged_attention.h).
using PagedAttentionTileFn = void (*)(const PagedKvView& kv, const PagedTileTask& task);
// out[i] = e^x[i] for x[i] <= 0 (or -inf) as the variant's paged attention computes its softmax
// weights; exposed so that tests can bound its error.
using SoftmaxExpFn = void (*)(const float* x, int64_t count, float* out);
// out[i] = gelu_tanh(gate[i]) * up[i] for i < count (kernels/ops.h GeGluTanh).
using GeGluTanhFn = void (*)(const float* gate, const float* up, int64_t count, float* out);
struct KeyValueRows;
// Queries over the same key/value rows in memory (kernels/row_attention.h RowAttention).
using RowAttentionFn = void (*)(const float* q, int64_t q_stride, int64_t num_queries, int64_t head_dim,
                                float scale, const KeyValueRows* runs, int64_t num_runs, float* scores, float* out,
                                int64_t out_stride);

struct KernelVariant {
  MatMulBF16Fn matmul_bf16;
  MatMulF32Fn matmul_f32;
  PagedAttentionTileFn paged_attention_tile;
  GeGluTanhFn geglu_tanh;
  SoftmaxExpFn softmax_exp;
  RowAttentionFn row_attention;
};

// One variant per ISA level (kernels/variants.h), registered with the ember-wide registry
// (core/isa.h: AvailableIsas, SelectIsa, EMBER_ISA).
extern const IsaTable<KernelVariant> kKernelVariants;
// The variant of the active level.
inline const KernelVariant& ActiveVariant() { return kKernelVariants.Active(); }

// y [m, n] = x [m, k] · w^T, w a [n, k] view of dtype bf16 or f32; threaded over n.
void MatMul(const float* x, int64_t m, const TensorView& w, float* y);

}  // namespace ember::kernels
