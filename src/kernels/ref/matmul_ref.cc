// Scalar reference matmul: the oracle every faster variant is tested against.
#include "kernels/ref/ref.h"

#include "core/dtypes.h"

namespace ember::kernels::ref {

void MatMulBF16(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n_begin, int64_t n_end,
                float* y, int64_t ldy) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = n_begin; j < n_end; ++j) {
      const uint16_t* row = w + j * k;
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc += x[i * k + p] * BF16ToF32(row[p]);
      y[i * ldy + j] = acc;
    }
  }
}

void MatMulF32(const float* x, int64_t m, int64_t k, const float* w, int64_t n_begin, int64_t n_end, float* y,
               int64_t ldy) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = n_begin; j < n_end; ++j) {
      const float* row = w + j * k;
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc += x[i * k + p] * row[p];
      y[i * ldy + j] = acc;
    }
  }
}

}  // namespace ember::kernels::ref
