// Whole-row conversions (dtype_convert.cc): the scalar conversions of dtypes.h over a row, with
// SIMD where the host has it and the same bits.
#pragma once

#include <cstdint>

namespace ember {

// out[i] = F32ToF16(x[i]) for i < n: F16C's VCVTPS2PH where the host has it (the same bits).
void F32ToF16Row(const float* x, int64_t n, uint16_t* out);

}  // namespace ember
