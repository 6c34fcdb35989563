// Matrix multiplication against GGUF-quantized weight matrices.
//
// y[i, j] = sum_k x[i, k] * w[j, k] for an f32 activation matrix x [m, k] and a weight matrix
// w [n, k] ("[out, in]", as GGUF stores matmul weights: each output row is k consecutive
// elements, a whole number of blocks). Each activation row is quantized once per call
// (ActivationFormatFor), then the n output rows are split across the global thread pool and
// every (weight row, activation row) pair is one VecDotFn call of the active dot variant, or, for
// m > 1 where the variant has one, one VecDotRowsFn call covers a weight row and kMaxDotRows
// activation rows (decoding the weight once; bit-identical to the one-row calls). Like
// kernels::MatMul, a weight row is read from memory once per call whatever m is.
//
// This lives in src/quant rather than src/kernels because it needs only core (the thread pool)
// and the block code here; kernels and model can call it directly.
#pragma once

#include <cstdint>
#include <span>

#include "formats/ggml_type.h"

namespace ember::quant {

struct QuantMatrix {
  GgmlType type;
  const void* data;   // rows * row_bytes bytes
  int64_t rows;       // n: output features
  int64_t cols;       // k: input features, a multiple of the type's block size
  int64_t row_bytes;  // bytes from one row to the next (GgmlRowBytes for a dense tensor)
  // PackQuantMatrix's copy of the same matrix (gguf_packed.h), owned by the caller, or null.
  // Used instead of `data` when the active dot variant is avx512.
  const void* packed = nullptr;
};

// Whether GgufMatMul handles weights of `type` (the types with an ActivationFormatFor).
bool GgufMatMulSupports(GgmlType type);

// y [m, w.rows] = x [m, w.cols] · w^T with the active dot variant (gguf_dot.h) or, for a packed
// matrix under the avx512 variant, the packed GEMM (gguf_packed.h), threaded over
// the output rows. The result for a given (i, j) does not depend on m, on the thread count or on
// how rows are split: each is the same dot product over the same quantized activation row.
// Unsupported types and inconsistent shapes are bugs in the caller (checked, not returned):
// loaders validate tensors with GgufMatMulSupports and GgmlRowBytes.
void GgufMatMul(const float* x, int64_t m, const QuantMatrix& w, float* y);

// The most matrices one GgufMatMulShared call takes (a layer's q, k, v and gate, or gate and up).
inline constexpr size_t kMaxSharedMatMuls = 4;

// ys[i] = GgufMatMul(x, m, *ws[i]) for matrices of the same input width, bit for bit, with x
// quantized once for every matrix whose activation rows are the same format (Q8_0 for the
// 32-element types, Q8_K for the K-quants): a layer's q/k/v projections, or the gate and up of
// its MLP, read one quantized copy of their shared input instead of each making its own.
void GgufMatMulShared(const float* x, int64_t m, std::span<const QuantMatrix* const> ws, std::span<float* const> ys);

}  // namespace ember::quant
