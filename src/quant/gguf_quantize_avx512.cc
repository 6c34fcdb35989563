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

// One vector of 16 results from 16 vectors, result lane j = op over the lanes of v[j]: the
// transpose-and-combine of kernels/cpu/avx512/variant_avx512.cc's ReduceScores, for an exact,
// order-free op (max of non-NaN values, integer add), so it gives what a per-vector reduction
// gives.
template <class Op>
__m512 CombineLanes16(const __m512* v, Op op) {
  __m512 x[8];
  for (int m = 0; m < 8; ++m) {
    x[m] = op(_mm512_maskz_shuffle_f32x4(kAll, v[2 * m], v[2 * m + 1], 0x44),
              _mm512_maskz_shuffle_f32x4(kAll, v[2 * m], v[2 * m + 1], 0xee));
  }
  __m512 y[4];
  for (int n = 0; n < 4; ++n) {
    y[n] = op(_mm512_maskz_shuffle_f32x4(kAll, x[2 * n], x[2 * n + 1], 0x88),
              _mm512_maskz_shuffle_f32x4(kAll, x[2 * n], x[2 * n + 1], 0xdd));
  }
  __m512 z[2];
  for (int p = 0; p < 2; ++p) {
    const __m512d a = _mm512_castps_pd(y[2 * p]), b = _mm512_castps_pd(y[2 * p + 1]);
    z[p] = op(_mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xff, a, b)), _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xff, a, b)));
  }
  const __m512 w = op(_mm512_shuffle_ps(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
  // Lane 4k + j of w holds vector 4j + k.
  const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  return _mm512_maskz_permutexvar_ps(kAll, order, w);
}

// Integer lane sums carried in float vectors (CombineLanes16 shuffles float vectors).
__m512 AddInt32(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}

constexpr int kVerticalBlocks = 16;

// kVerticalBlocks blocks at once, each exactly as the one-block loop below quantizes it: the
// per-block maxima, scales and quant sums are computed 16 blocks to a vector instead of by a
// horizontal reduction and scalar division per block (which made the quantizer latency-bound).
void QuantizeQ8_0Blocks16(const float* x, BlockQ8_0* blocks, uint8_t* sums) {
  __m512 part[kVerticalBlocks];
  for (int b = 0; b < kVerticalBlocks; ++b) {
    // As AbsMax: from 0, NaN lanes skipped (vmaxps returns its second operand for a NaN).
    const __m512 m = _mm512_maskz_max_ps(kAll, Abs(_mm512_loadu_ps(x + kQK * b)), _mm512_setzero_ps());
    part[b] = _mm512_maskz_max_ps(kAll, Abs(_mm512_loadu_ps(x + kQK * b + 16)), m);
  }
  const __m512 amax = CombineLanes16(part, [](__m512 a, __m512 b) { return _mm512_maskz_max_ps(kAll, a, b); });
  const __m512 d = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
  const __mmask16 nonzero = _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_OQ);
  alignas(64) float id[kVerticalBlocks];
  _mm512_store_ps(id, _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(1.0f), d));
  const __m256i d_half = _mm512_maskz_cvtps_ph(kAll, d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  alignas(32) uint16_t d_bits[kVerticalBlocks];
  _mm256_store_si256(reinterpret_cast<__m256i*>(d_bits), d_half);
  for (int b = 0; b < kVerticalBlocks; ++b) {
    const __m512 inverse = _mm512_set1_ps(id[b]);
    const __m512i lo = Quantize16(x + kQK * b, inverse);
    const __m512i hi = Quantize16(x + kQK * b + 16, inverse);
    blocks[b].d = d_bits[b];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(blocks[b].qs), _mm512_maskz_cvtepi32_epi8(kAll, lo));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(blocks[b].qs + 16), _mm512_maskz_cvtepi32_epi8(kAll, hi));
    part[b] = _mm512_castsi512_ps(_mm512_add_epi32(lo, hi));
  }
  const __m512i total = _mm512_castps_si512(CombineLanes16(part, AddInt32));
  alignas(64) float scale[kVerticalBlocks], scaled_sum[kVerticalBlocks];
  const __m512 rounded_d = _mm512_maskz_cvtph_ps(kAll, d_half);
  _mm512_store_ps(scale, rounded_d);
  _mm512_store_ps(scaled_sum, _mm512_mul_ps(rounded_d, _mm512_maskz_cvtepi32_ps(kAll, total)));
  for (int b = 0; b < kVerticalBlocks; ++b) {
    const Q8_0BlockSum sum{scale[b], scaled_sum[b]};
    std::memcpy(sums + b * static_cast<int64_t>(sizeof(sum)), &sum, sizeof(sum));
  }
}

}  // namespace

void QuantizeActivationQ8_0Avx512(const float* x, int64_t n, BlockQ8_0* blocks, uint8_t* sums) {
  const int64_t num_blocks = n / kQK;
  int64_t i = 0;
  for (; i + kVerticalBlocks <= num_blocks; i += kVerticalBlocks) {
    QuantizeQ8_0Blocks16(x + i * kQK, blocks + i, sums + i * static_cast<int64_t>(sizeof(Q8_0BlockSum)));
  }
  x += i * kQK;
  for (; i < num_blocks; ++i, x += kQK) {
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
    // The 16 groups' sums in one vector (CombineLanes16) instead of a horizontal sum per group.
    __m512 q[kQKK / 16];
    for (int g = 0; g < kQKK / 16; ++g) {
      const __m512i quants = Quantize16(x + 16 * g, id);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out[i].qs + 16 * g), _mm512_maskz_cvtepi32_epi8(kAll, quants));
      q[g] = _mm512_castsi512_ps(quants);
    }
    const __m512i sums = _mm512_castps_si512(CombineLanes16(q, AddInt32));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[i].bsums), _mm512_maskz_cvtepi32_epi16(kAll, sums));
  }
}

}  // namespace ember::quant
