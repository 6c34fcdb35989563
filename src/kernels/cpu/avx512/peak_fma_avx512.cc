// The AVX-512 peak-FMA loop (kernels/cpu/peak_fma.h). 16 accumulators: FMA latency 4 cycles x 2
// ports needs 8 in flight; 16 of the 32 ZMM registers cover hosts with longer latency too.
#include <immintrin.h>

#include "kernels/cpu/peak_fma.h"

namespace ember::kernels {

double FmaLoopAvx512(int64_t iterations, int64_t* flops_per_iteration) {
  constexpr int kAcc = 16;
  __m512 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f);
  const __m512 b = _mm512_set1_ps(1e-6f);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  *flops_per_iteration = int64_t{kAcc} * 16 * 2;
  __m512 sum = acc[0];
  for (int i = 1; i < kAcc; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return lanes[0];
}

}  // namespace ember::kernels
