// GELU-tanh gating with 8 f32 lanes (the math is described in kernels/cpu/gelu_tanh.h).
#include "kernels/cpu/gelu_tanh.h"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace ember::kernels::cpu {
namespace {

__m256 Exp(__m256 x_in) {
  const __m256 overflow = _mm256_cmp_ps(x_in, _mm256_set1_ps(kExpMax), _CMP_GT_OQ);
  const __m256 x = _mm256_min_ps(_mm256_max_ps(x_in, _mm256_set1_ps(kExpMin)), _mm256_set1_ps(kExpMax));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpC[5]);
  for (int i = 4; i >= 0; --i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC[i]));
  const __m256 r2 = _mm256_mul_ps(r, r);
  const __m256 e_r = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i pow2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 e = _mm256_mul_ps(e_r, _mm256_castsi256_ps(pow2));
  return _mm256_blendv_ps(e, _mm256_set1_ps(std::numeric_limits<float>::infinity()), overflow);
}

__m256 GeGlu(__m256 g, __m256 up) {
  const __m256 g2 = _mm256_mul_ps(g, g);
  const __m256 inner = _mm256_mul_ps(g, _mm256_fmadd_ps(g2, _mm256_set1_ps(kGeluCubic), _mm256_set1_ps(1.0f)));
  const __m256 minus_2u = _mm256_mul_ps(inner, _mm256_set1_ps(-2.0f * kGeluSqrt2OverPi));
  const __m256 gelu = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), Exp(minus_2u)));
  return _mm256_mul_ps(gelu, up);
}

}  // namespace

void GeGluTanhAvx2(const float* gate, const float* up, int64_t count, float* out) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm256_storeu_ps(out + i, GeGlu(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < count) {  // zero-padded through the same instructions: the same bits per element
    float g[8] = {}, u[8] = {}, o[8];
    std::copy(gate + i, gate + count, g);
    std::copy(up + i, up + count, u);
    _mm256_storeu_ps(o, GeGlu(_mm256_loadu_ps(g), _mm256_loadu_ps(u)));
    std::copy(o, o + (count - i), out + i);
  }
}

}  // namespace ember::kernels::cpu

#endif
