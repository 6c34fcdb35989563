// The AVX2 peak-FMA loop (kernels/cpu/peak_fma.h). 12 accumulators: FMA latency 4-5 cycles x 2
// ports needs at least 10 in flight, and 16 YMM registers leave room for the two operands.
#include <immintrin.h>

#include "kernels/cpu/peak_fma.h"

namespace ember::kernels {

double FmaLoopAvx2(int64_t iterations, int64_t* flops_per_iteration) {
  constexpr int kAcc = 12;
  __m256 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f);
  const __m256 b = _mm256_set1_ps(1e-6f);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  *flops_per_iteration = int64_t{kAcc} * 8 * 2;
  __m256 sum = acc[0];
  for (int i = 1; i < kAcc; ++i) sum = _mm256_add_ps(sum, acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  return lanes[0];
}

}  // namespace ember::kernels
