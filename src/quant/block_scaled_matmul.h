// The pieces BlockScaledMatMul (block_scaled.h) is made of, for callers that schedule the work
// themselves (GroupedBlockScaledMatMul): preparing activation rows once, then computing any range
// of output rows on the calling thread. A row computed here has the bits BlockScaledMatMul gives
// it, whatever the range, m or the thread that runs it.
#pragma once

#include <cstdint>

#include "quant/block_scaled.h"

namespace ember::quant {

// Bytes of prepared activations per row of k against weights of `format`: the int8 layout
// (block_scaled_dot.h) for FP4, 0 for FP8 (whose kernels read the f32 rows).
int64_t PreparedActivationRowBytes(WeightFormat format, int64_t k);

// Whether BlockScaledMatMulRows runs w's m rows on the packed GEMM (block_scaled_packed.h): w has
// a packed copy, the active variant a packed GEMM for its format, and m >= kPackedMinRows. Its
// activations must then have their packed records (PrepareActivations' `packed_records`).
bool UsesPackedGemm(const BlockScaledMatrix& w, int64_t m);

// Prepares m rows of x [m, k] for `format` into `out` (64-byte aligned, m *
// PreparedActivationRowBytes bytes), with the packed GEMM's records if `packed_records`; nothing
// for FP8. Single-threaded.
void PrepareActivations(WeightFormat format, const float* x, int64_t m, int64_t k, uint8_t* out,
                        bool packed_records = false);

// y[i * ldy + j] = (x · W^T)[i, j] for i in [0, m), j in [row_begin, row_end), on the calling
// thread. `act` is PrepareActivations' output for x (ignored for FP8). w must be valid
// (ValidateBlockScaledMatrix; not checked here).
void BlockScaledMatMulRows(const BlockScaledMatrix& w, const float* x, const uint8_t* act, int64_t m,
                           int64_t row_begin, int64_t row_end, float* y, int64_t ldy);

}  // namespace ember::quant
