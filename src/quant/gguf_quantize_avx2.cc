// AVX2 activation quantizers (gguf_quantize_simd.h), for hosts without the AVX-512 set: the
// scalar loops call libm's roundf and fmaxf per element, ~14% of a SmolLM2 step of several
// tokens on a Zen 3 EPYC (perf, a DSpark verification run). Everything but the entry points has
// internal linkage (see gguf_dot_avx2.cc).
#include <immintrin.h>

#include <cstring>

#include "quant/gguf_dot.h"
#include "quant/gguf_quantize_simd.h"

namespace ember::quant {
namespace {

__m256 Abs(__m256 x) { return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }

// max(|x[i]|) over `count` (a multiple of 8) floats, as the scalar fmax loop from 0: vmaxps
// returns its second operand when either is NaN, so NaN inputs are skipped like fmax does, and
// max is exact, so the lane order does not matter.
float AbsMax(const float* x, int count) {
  __m256 m = _mm256_setzero_ps();
  for (int j = 0; j < count; j += 8) m = _mm256_max_ps(Abs(_mm256_loadu_ps(x + j)), m);
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
}

// round-half-away(x * id) clamped to [-127, 127], NaN -> 0, as int32 lanes. trunc(v) and
// v - trunc(v) are exact, so adding copysign(1, v) where |v - trunc(v)| >= 0.5 is roundf.
__m256i Quantize8(const float* x, __m256 id) {
  const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x), id);
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 bump = _mm256_cmp_ps(Abs(_mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int32_t>(0x80000000u)))),
                                  _mm256_set1_ps(1.0f));
  __m256 r = _mm256_add_ps(t, _mm256_and_ps(bump, one));
  r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
  const __m256 number = _mm256_cmp_ps(v, v, _CMP_ORD_Q);
  return _mm256_and_si256(_mm256_cvtps_epi32(r), _mm256_castps_si256(number));
}

// 32 quants (four vectors of int32 lanes in [-127, 127]) stored as bytes in order.
void StoreBytes(const __m256i q[4], int8_t* out) {
  // packs work within 128-bit lanes: the bytes come out as q0[0:4] q1[0:4] q2[0:4] q3[0:4]
  // q0[4:8] ..., put back in order by one dword permute.
  const __m256i words = _mm256_packs_epi32(q[0], q[1]);
  const __m256i words2 = _mm256_packs_epi32(q[2], q[3]);
  const __m256i bytes = _mm256_packs_epi16(words, words2);
  const __m256i ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), ordered);
}

int32_t HorizontalSum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// d = amax / 127 and id = 1 / d (0 for an all-zero block), as the scalar code computes them.
float InverseScale(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

}  // namespace

void QuantizeActivationQ8_0Avx2(const float* x, int64_t n, BlockQ8_0* blocks, uint8_t* sums) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = AbsMax(x, kQK) / 127.0f;
    const __m256 id = _mm256_set1_ps(InverseScale(d));
    // vcvtps2ph / vcvtph2ps: F32ToF16's and F16ToF32's results (core/dtype_convert.cc follows F16C).
    blocks[i].d = static_cast<uint16_t>(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    const __m256i q[4] = {Quantize8(x, id), Quantize8(x + 8, id), Quantize8(x + 16, id), Quantize8(x + 24, id)};
    StoreBytes(q, blocks[i].qs);
    const int32_t total = HorizontalSum(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    Q8_0BlockSum sum;
    sum.d = _cvtsh_ss(blocks[i].d);
    sum.d_sum = sum.d * static_cast<float>(total);
    std::memcpy(sums + i * static_cast<int64_t>(sizeof(sum)), &sum, sizeof(sum));
  }
}

void QuantizeRowQ8_KAvx2(const float* x, int64_t n, BlockQ8_K* out) {
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
    const float d = AbsMax(x, kQKK) / 127.0f;
    const __m256 id = _mm256_set1_ps(InverseScale(d));
    out[i].d = d;
    for (int c = 0; c < kQKK / 32; ++c) {
      const float* xc = x + 32 * c;
      const __m256i q[4] = {Quantize8(xc, id), Quantize8(xc + 8, id), Quantize8(xc + 16, id), Quantize8(xc + 24, id)};
      StoreBytes(q, out[i].qs + 32 * c);
      out[i].bsums[2 * c] = static_cast<int16_t>(HorizontalSum(_mm256_add_epi32(q[0], q[1])));
      out[i].bsums[2 * c + 1] = static_cast<int16_t>(HorizontalSum(_mm256_add_epi32(q[2], q[3])));
    }
  }
}

}  // namespace ember::quant
