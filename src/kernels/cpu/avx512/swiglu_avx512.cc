// SwiGLU with 16 f32 lanes whose bits are those of the scalar Silu(g) * up of kernels/ops.cc,
// which calls libm's expf. The exp is glibc's expf (sysdeps/ieee754/flt-32/e_expf.c, as its
// FMA build __expf_fma runs it: glibc 2.27 and later on an FMA host) evaluated in f64 lanes with
// the same constants, table and operation sequence, so each lane rounds exactly where libm does:
//   kd = fma(InvLn2N, xd, Shift); ki = bits(kd); kd -= Shift; r = fma(InvLn2N, xd, -kd)
//   s = bits(T[ki % 32] + (ki << 47)); z = fma(C0, r, C1); y = fma(C2, r, 1)
//   y = fma(z, r * r, y); result = float(y * s)
// Lanes libm sends down its special-case path (|x| >= 88, inf, nan: its top12 check) are left to
// the caller. Another libm could round differently, so ops.cc uses this only after a self-check
// against the process's own expf (SwiGluLibmExpMatches) and the tests compare it with std::exp.
#if defined(__AVX512F__) && defined(__AVX512DQ__)

#include <immintrin.h>

#include <cstdint>

namespace ember::kernels::cpu {
namespace {

constexpr __mmask16 kAll = 0xffff;
constexpr __mmask8 kAll8 = 0xff;

// glibc's __exp2f_data for N = 32: 2^(i/32) with the i/32 * 2^52 exponent bits subtracted.
alignas(64) constexpr uint64_t kTable[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540};
constexpr double kInvLn2N = 0x1.71547652b82fep+5;  // 32 / ln 2
constexpr double kShift = 0x1.8p+52;
constexpr double kC0 = 0x1.c6af84b912394p-20;
constexpr double kC1 = 0x1.ebfce50fac4f3p-13;
constexpr double kC2 = 0x1.62e42ff0c52d6p-6;

// expf of 8 floats, libm's main path.
__m256 Exp8(__m256 x) {
  const __m512d xd = _mm512_cvtps_pd(x);
  const __m512d inv = _mm512_set1_pd(kInvLn2N);
  const __m512d shift = _mm512_set1_pd(kShift);
  __m512d kd = _mm512_fmadd_pd(inv, xd, shift);
  const __m512i ki = _mm512_castpd_si512(kd);
  kd = _mm512_sub_pd(kd, shift);
  const __m512d r = _mm512_fmsub_pd(inv, xd, kd);
  const __m512i index = _mm512_maskz_and_epi64(kAll8, ki, _mm512_set1_epi64(31));
  __m512i t = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), kAll8, index, kTable, 8);
  t = _mm512_add_epi64(t, _mm512_maskz_slli_epi64(kAll8, ki, 47));
  const __m512d s = _mm512_castsi512_pd(t);
  const __m512d z = _mm512_fmadd_pd(_mm512_set1_pd(kC0), r, _mm512_set1_pd(kC1));
  const __m512d r2 = _mm512_mul_pd(r, r);
  __m512d y = _mm512_fmadd_pd(_mm512_set1_pd(kC2), r, _mm512_set1_pd(1.0));
  y = _mm512_fmadd_pd(z, r2, y);
  y = _mm512_mul_pd(y, s);
  return _mm512_cvtpd_ps(y);
}

// Lanes whose |x| top12 bits exceed 0x42a (|x| >= 88, inf, nan): libm's special path.
__mmask16 SpecialLanes(__m512 x) {
  const __m512i top = _mm512_maskz_srli_epi32(kAll, _mm512_castps_si512(x), 20);
  const __m512i abstop = _mm512_maskz_and_epi32(kAll, top, _mm512_set1_epi32(0x7ff));
  return _mm512_cmpgt_epi32_mask(abstop, _mm512_set1_epi32(0x42a));
}

}  // namespace

// out[i] = silu(gate[i]) * up[i] for i < count, Silu's sequence (ops.cc): e = expf(-g) (the
// vector replica, or libm's own expf for a 16-element step with a lane on libm's special path),
// then g / (1 + e) * up (IEEE operations, the same bits in any lane width). out may be gate.
void SwiGluLibmExpAvx512(const float* gate, const float* up, int64_t count, float* out) {
  for (int64_t i = 0; i < count; i += 16) {
    const int n = static_cast<int>(count - i < 16 ? count - i : 16);
    const __mmask16 valid = static_cast<__mmask16>((1u << n) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(valid, gate + i);
    const __m512 neg = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(g), _mm512_set1_epi32(INT32_MIN)));
    if ((SpecialLanes(neg) & valid) != 0) {
      for (int64_t j = i; j < i + n; ++j) out[j] = gate[j] / (1.0f + __builtin_expf(-gate[j])) * up[j];
      continue;
    }
    const __m512 e = _mm512_insertf32x8(_mm512_castps256_ps512(Exp8(_mm512_castps512_ps256(neg))),
                                        Exp8(_mm512_extractf32x8_ps(neg, 1)), 1);
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_mask_storeu_ps(out + i, valid, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(valid, up + i)));
  }
}

// expf over [0, count) for the self-check and the tests: out[i] = expf(x[i]) where x[i] is on
// libm's main path; other elements are left unwritten. Returns the number of main-path elements.
int64_t ExpfLibmAvx512(const float* x, int64_t count, float* out) {
  int64_t done = 0;
  for (int64_t i = 0; i < count; i += 16) {
    const int n = static_cast<int>(count - i < 16 ? count - i : 16);
    const __mmask16 valid = static_cast<__mmask16>((1u << n) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(valid, x + i);
    const __mmask16 regular = static_cast<__mmask16>(valid & ~SpecialLanes(v));
    const __m512 e = _mm512_insertf32x8(_mm512_castps256_ps512(Exp8(_mm512_castps512_ps256(v))),
                                        Exp8(_mm512_extractf32x8_ps(v, 1)), 1);
    _mm512_mask_storeu_ps(out + i, regular, e);
    done += __builtin_popcount(regular);
  }
  return done;
}

}  // namespace ember::kernels::cpu

#else  // the compiler cannot target AVX-512: never used (ExpfLibmAvx512's -1 fails the self-check)

#include <cstdint>

namespace ember::kernels::cpu {
void SwiGluLibmExpAvx512(const float*, const float*, int64_t, float*) {}
int64_t ExpfLibmAvx512(const float*, int64_t, float*) { return -1; }
}  // namespace ember::kernels::cpu

#endif
