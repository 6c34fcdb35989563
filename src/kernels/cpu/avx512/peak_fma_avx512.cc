// The AVX-512 peak loops (kernels/cpu/peak_fma.h). 16 accumulators: FMA latency 4 cycles x 2
// ports needs 8 in flight; 16 of the 32 ZMM registers cover hosts with longer latency too. The
// int8 loop is the VNNI instruction the quantized dots use (vpdpbusd: 64 u8 x s8 products summed
// into 16 int32 lanes), with the same 16 independent chains.
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

double Int8DotLoopAvx512Vnni(int64_t iterations, int64_t* ops_per_iteration) {
  constexpr int kAcc = 16;
  // Operands from a volatile so the compiler cannot fold the chain into a constant.
  volatile int seed = 0x01020304;
  const __m512i a = _mm512_set1_epi32(seed);
  const __m512i b = _mm512_set1_epi32(seed ^ 0x00ff00ff);
  __m512i acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_epi32(i);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  *ops_per_iteration = int64_t{kAcc} * 64 * 2;
  __m512i sum = acc[0];
  for (int i = 1; i < kAcc; ++i) sum = _mm512_xor_si512(sum, acc[i]);
  // A store, not _mm512_reduce_add_epi32: GCC 12's header for it warns about an uninitialized
  // register it never reads.
  alignas(64) uint32_t lanes[16];
  _mm512_store_si512(lanes, sum);
  return static_cast<double>(lanes[0]) + 1.0;
}

}  // namespace ember::kernels
