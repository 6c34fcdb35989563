// GELU-tanh gating with 16 f32 lanes (the math is described in kernels/cpu/gelu_tanh.h).
#include "kernels/cpu/gelu_tanh.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)

#include <immintrin.h>

#include <cstdint>
#include <limits>

namespace ember::kernels::cpu {
namespace {

// The all-ones maskz forms compile to the plain instructions; GCC 12's unmasked forms pass an
// "undefined" vector that trips -Wmaybe-uninitialized once inlined (as in variant_avx512.cc).
constexpr __mmask16 kAll = 0xffff;

__m512 Exp(__m512 x_in) {
  const __mmask16 overflow = _mm512_cmp_ps_mask(x_in, _mm512_set1_ps(kExpMax), _CMP_GT_OQ);
  const __m512 x = _mm512_maskz_min_ps(kAll, _mm512_maskz_max_ps(kAll, x_in, _mm512_set1_ps(kExpMin)), _mm512_set1_ps(kExpMax));
  const __m512 n = _mm512_maskz_roundscale_ps(kAll, _mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpC[5]);
  for (int i = 4; i >= 0; --i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC[i]));
  const __m512 r2 = _mm512_mul_ps(r, r);
  const __m512 e_r = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i pow2 = _mm512_maskz_slli_epi32(
      kAll, _mm512_add_epi32(_mm512_maskz_cvtps_epi32(kAll, n), _mm512_set1_epi32(127)), 23);
  const __m512 e = _mm512_mul_ps(e_r, _mm512_castsi512_ps(pow2));
  return _mm512_mask_blend_ps(overflow, e, _mm512_set1_ps(std::numeric_limits<float>::infinity()));
}

__m512 GeGlu(__m512 g, __m512 up) {
  const __m512 g2 = _mm512_mul_ps(g, g);
  const __m512 inner = _mm512_mul_ps(g, _mm512_fmadd_ps(g2, _mm512_set1_ps(kGeluCubic), _mm512_set1_ps(1.0f)));
  const __m512 minus_2u = _mm512_mul_ps(inner, _mm512_set1_ps(-2.0f * kGeluSqrt2OverPi));
  const __m512 gelu = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), Exp(minus_2u)));
  return _mm512_mul_ps(gelu, up);
}

}  // namespace

void GeGluTanhAvx512(const float* gate, const float* up, int64_t count, float* out) {
  int64_t i = 0;
  for (; i + 16 <= count; i += 16)
    _mm512_storeu_ps(out + i, GeGlu(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  if (i < count) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (count - i)) - 1);
    _mm512_mask_storeu_ps(out + i, mask,
                          GeGlu(_mm512_maskz_loadu_ps(mask, gate + i), _mm512_maskz_loadu_ps(mask, up + i)));
  }
}

}  // namespace ember::kernels::cpu

#endif
