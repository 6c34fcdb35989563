// The AVX2 peak-FMA loop (kernels/cpu/peak_fma.h). 12 accumulators: FMA latency 4-5 cycles x 2
// ports needs at least 10 in flight, and 16 YMM registers leave room for the two operands. The
// int8 loop is the sequence the AVX2 quantized dots use without VNNI: vpmaddubsw (32 u8 x s8
// products, pairs summed to int16), vpmaddwd by ones (pairs to int32), vpaddd.
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

double Int8DotLoopAvx2(int64_t iterations, int64_t* ops_per_iteration) {
  // Each chain feeds its sum back as the next u8 operand, so nothing is loop-invariant. A chain
  // is ~11 cycles of latency and 2 multiply uops on 2 ports: 12 chains cover it.
  constexpr int kAcc = 12;
  volatile int seed = 0x01020304;
  const __m256i b = _mm256_set1_epi32(seed ^ 0x00ff00ff);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_set1_epi32(seed + i);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < kAcc; ++i) {
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(acc[i], b), ones));
    }
  }
  *ops_per_iteration = int64_t{kAcc} * 32 * 2;
  __m256i sum = acc[0];
  for (int i = 1; i < kAcc; ++i) sum = _mm256_xor_si256(sum, acc[i]);
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
  return static_cast<double>(lanes[0]) + 1.0;
}

}  // namespace ember::kernels
