// AVX-512 activation quantizers (gguf_quantize_simd.h). Everything but the two entry points has
// internal linkage, as in gguf_dot_avx512.cc (inline helpers compiled with these flags must not
// be merged with baseline copies of the same name).
#include "quant/gguf_quantize_simd.h"


#include <immintrin.h>

#include <cstring>

#include "quant/gguf_dot.h"

namespace ember::quant {
namespace {

// The all-ones maskz forms compile to the plain instructions; GCC 12's unmasked forms pass an
// "undefined" vector that trips -Wmaybe-uninitialized once inlined.
constexpr __mmask16 kAll = 0xffff;

__m512 Abs(__m512 x) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff))); }

// max(|x[i]|) over `count` (a multiple of 16) floats, as the scalar fmax loop from 0: vmaxps
// returns its second operand when either is NaN, so NaN inputs are skipped like fmax does, and
// max is exact, so the lane order does not matter.
float AbsMax(const float* x, int count) {
  __m512 m = _mm512_setzero_ps();
  for (int j = 0; j < count; j += 16) m = _mm512_maskz_max_ps(kAll, Abs(_mm512_loadu_ps(x + j)), m);
  __m256 m8 = _mm256_max_ps(_mm512_maskz_extractf32x8_ps(0xff, m, 0), _mm512_maskz_extractf32x8_ps(0xff, m, 1));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
}

// round-half-away(x * id) clamped to [-127, 127], NaN -> 0, as int32 lanes. trunc(v) and
// v - trunc(v) are exact, so adding copysign(1, v) where |v - trunc(v)| >= 0.5 is roundf.
__m512i Quantize16(const float* x, __m512 id) {
  const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x), id);
  const __m512 t = _mm512_maskz_roundscale_ps(kAll, v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask16 bump = _mm512_cmp_ps_mask(Abs(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_castsi512_ps(_mm512_or_si512(
      _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(static_cast<int32_t>(0x80000000u))),
      _mm512_castps_si512(_mm512_set1_ps(1.0f))));
  __m512 r = _mm512_mask_add_ps(t, bump, t, one);
  r = _mm512_maskz_min_ps(kAll, _mm512_maskz_max_ps(kAll, r, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
  const __mmask16 number = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
  return _mm512_maskz_cvtps_epi32(number, r);
}

// Stores the 16 quants as bytes and returns their sum.
int32_t StoreQuants(__m512i q, int8_t* out) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_maskz_cvtepi32_epi8(kAll, q));
  const __m256i s8 = _mm256_add_epi32(_mm512_maskz_extracti32x8_epi32(0xff, q, 0), _mm512_maskz_extracti32x8_epi32(0xff, q, 1));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
  return _mm_cvtsi128_si32(s4);
}

// d = amax / 127 and id = 1 / d (0 for an all-zero block), as the scalar code computes them.
float InverseScale(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

}  // namespace

void QuantizeActivationQ8_0Avx512(const float* x, int64_t n, BlockQ8_0* blocks, uint8_t* sums) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = AbsMax(x, kQK) / 127.0f;
    const __m512 id = _mm512_set1_ps(InverseScale(d));
    // vcvtps2ph / vcvtph2ps: F32ToF16's and F16ToF32's results (core/dtype_convert.cc follows
    // F16C), without the calls into the portable code, ~5% of an AMX prefill GEMM.
    blocks[i].d = static_cast<uint16_t>(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    const int32_t total = StoreQuants(Quantize16(x, id), blocks[i].qs) + StoreQuants(Quantize16(x + 16, id), blocks[i].qs + 16);
    Q8_0BlockSum sum;
    sum.d = _cvtsh_ss(blocks[i].d);
    sum.d_sum = sum.d * static_cast<float>(total);
    std::memcpy(sums + i * static_cast<int64_t>(sizeof(sum)), &sum, sizeof(sum));
  }
}

void QuantizeRowQ8_KAvx512(const float* x, int64_t n, BlockQ8_K* out) {
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
    const float d = AbsMax(x, kQKK) / 127.0f;
    const __m512 id = _mm512_set1_ps(InverseScale(d));
    out[i].d = d;
    for (int g = 0; g < kQKK / 16; ++g)
      out[i].bsums[g] = static_cast<int16_t>(StoreQuants(Quantize16(x + 16 * g, id), out[i].qs + 16 * g));
  }
}

}  // namespace ember::quant
