// F32ToF16Row with F16C (built with the *_avx2.cc flags, cmake/ember.cmake). No header: see
// isa_avx2.cc for why. VCVTPS2PH under round-to-nearest-even gives F32ToF16's bits for every f32
// (dtype_convert.cc: overflow to inf, NaN quieted with its top payload bits, subnormals rounded),
// which tests/unit/core checks against the scalar conversion.
#include <cstdint>

#if defined(__F16C__) && defined(__AVX2__)
#include <immintrin.h>
#endif

namespace ember::internal {

// Converts [0, n - n % 8) and returns that count; the caller converts the rest. 0 when the
// compiler cannot target F16C.
int64_t F32ToF16RowF16c(const float* x, int64_t n, uint16_t* out) {
#if defined(__F16C__) && defined(__AVX2__)
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  return i;
#else
  (void)x;
  (void)n;
  (void)out;
  return 0;
#endif
}

}  // namespace ember::internal
