// AVX2 + FMA + F16C block-scaled dots (built with those flags; offered only when CPUID has the
// set, CpuFeatures::HasAvx2Set).
//
// The same scheme as block_scaled_dot_avx512.cc on 256-bit registers: a 128-element chunk is two
// halves of 32 code bytes. The nibbles, XORed with the activation sign flags, go through the
// pshufb table of 2 * e2m1; pmaddubsw multiplies |q| by them into int16 pairs (at most
// 2 * 127 * 12 per pair, and the low-nibble and high-nibble pairs add to at most 6096, no
// saturation), and pmaddwd by ones sums them into int32 lanes of 8 consecutive elements. Block
// scales are expanded per lane as in the AVX-512 file (e8m0 via the f32 exponent, e4m3 via f16).
//
// Everything here has internal linkage (see gguf_blocks.h for why that matters).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/block_scaled_dot_variants.h"

namespace ember::quant {
namespace {

float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The two e8m0 scales of a half chunk as f32, each in the four lanes of its 32 elements.
__m256 Mxfp4LaneScales(const uint8_t* scales) {
  uint16_t bytes;
  std::memcpy(&bytes, scales, 2);
  const __m256i e = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(
      _mm_cvtsi32_si128(bytes), _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, -128, -128, -128, -128, -128, -128, -128, -128)));
  // e << 23 is 2^(e-127) except for code 0, 2^-127 = 0x00400000 (an f32 subnormal); every other
  // code shifts to at least 0x00800000, so a signed max makes code 0 right.
  return _mm256_castsi256_ps(_mm256_max_epi32(_mm256_slli_epi32(e, 23), _mm256_set1_epi32(0x00400000)));
}

// The four e4m3 scales of a half chunk times 2^-8 as f32, each in the two lanes of its 16 elements.
__m256 Nvfp4LaneScales(const uint8_t* scales) {
  uint32_t bytes;
  std::memcpy(&bytes, scales, 4);
  const __m128i high =
      _mm_shuffle_epi8(_mm_cvtsi32_si128(static_cast<int>(bytes)),
                       _mm_setr_epi8(-128, 0, -128, 0, -128, 1, -128, 1, -128, 2, -128, 2, -128, 3, -128, 3));
  // code << 7 is the f16 pattern of e4m3 * 2^-8, subnormals included, for the sign-less codes
  // NVFP4 scales are (ue4m3: ModelOpt writes amax-derived positive scales).
  return _mm256_cvtph_ps(_mm_srli_epi16(high, 1));
}

template <bool kNvfp4, int kRows>
void Fp4DotRows(int64_t k, const uint8_t* codes, const uint8_t* scales, const uint8_t* act, int64_t act_stride,
                float* out, const uint8_t* prefetch) {
  const ActivationLayout l = Int8ActivationLayout(k);
  const int64_t chunks = k / kChunk;
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12));
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t c = 0; c < chunks; ++c) {
    if (prefetch != nullptr) _mm_prefetch(reinterpret_cast<const char*>(prefetch + c * 64), _MM_HINT_T0);
    for (int h = 0; h < 2; ++h) {
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + c * 64 + h * 32));
      const __m256i lo = _mm256_and_si256(bytes, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
      const __m256 w_scale = kNvfp4 ? Nvfp4LaneScales(scales + c * 8 + h * 4) : Mxfp4LaneScales(scales + c * 4 + h * 2);
      const int64_t even = c * kChunk + h * 32, odd = even + 64;
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* a = act + r * act_stride;
        auto load = [](const uint8_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); };
        const __m256i w_lo = _mm256_shuffle_epi8(table, _mm256_xor_si256(lo, load(a + l.flip + even)));
        const __m256i w_hi = _mm256_shuffle_epi8(table, _mm256_xor_si256(hi, load(a + l.flip + odd)));
        const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(load(a + l.abs + even), w_lo),
                                               _mm256_maddubs_epi16(load(a + l.abs + odd), w_hi));
        const __m256i sum = _mm256_madd_epi16(pairs, ones);
        const __m256 scale =
            _mm256_mul_ps(w_scale, _mm256_load_ps(reinterpret_cast<const float*>(a + l.lane_scale) + c * 16 + h * 8));
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), scale, acc[r]);
      }
    }
  }
  // The last line (the tail after the whole chunks, or the end of a row not 64-byte aligned).
  if (prefetch != nullptr) _mm_prefetch(reinterpret_cast<const char*>(prefetch + k / 2 - 1), _MM_HINT_T0);
  // 0.5 undoes the doubled e2m1 table; 2^8 the f16 trick's 2^-8 (NVFP4).
  const float unit = kNvfp4 ? 128.0f : 0.5f;
  for (int r = 0; r < kRows; ++r) {
    out[r] = unit * HorizontalSum(acc[r]);
    if (chunks * kChunk < k) {
      out[r] += ref::Fp4Range(kNvfp4, k, chunks * kChunk, k, codes, scales, act + r * act_stride);
    }
  }
}

template <bool kNvfp4>
void Fp4Dot(int64_t k, const uint8_t* codes, const uint8_t* scales, const uint8_t* act, int64_t act_stride, int rows,
            float* out, const uint8_t* prefetch) {
  switch (rows) {
    case 1:
      return Fp4DotRows<kNvfp4, 1>(k, codes, scales, act, act_stride, out, prefetch);
    case 2:
      return Fp4DotRows<kNvfp4, 2>(k, codes, scales, act, act_stride, out, prefetch);
    case 3:
      return Fp4DotRows<kNvfp4, 3>(k, codes, scales, act, act_stride, out, prefetch);
    default:
      return Fp4DotRows<kNvfp4, 4>(k, codes, scales, act, act_stride, out, prefetch);
  }
}

// 8 e4m3 codes as f32 times 2^-8.
__m256 Fp8Times2PowMinus8(const uint8_t* codes) {
  int64_t bytes;
  std::memcpy(&bytes, codes, 8);
  const __m128i wide = _mm_cvtepi8_epi16(_mm_cvtsi64_si128(bytes));
  return _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(wide, 7), _mm_set1_epi16(static_cast<short>(0xbf80))));
}

template <int kRows>
void Fp8DotRows(int64_t k, const uint8_t* codes, const float* block_scales, const float* x, int64_t x_stride,
                float* out, const uint8_t* prefetch) {
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b0 = 0; b0 < k; b0 += kFp8ScaleBlock) {
    const int64_t steps = (k - b0 < kFp8ScaleBlock ? k - b0 : kFp8ScaleBlock) / 16;
    __m256 part[kRows][2];
    for (int r = 0; r < kRows; ++r) part[r][0] = part[r][1] = _mm256_setzero_ps();
    for (int64_t s = 0; s < steps; ++s) {
      if (prefetch != nullptr && s % 4 == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(prefetch + b0 + s * 16), _MM_HINT_T0);
      }
      const __m256 w0 = Fp8Times2PowMinus8(codes + b0 + s * 16);
      const __m256 w1 = Fp8Times2PowMinus8(codes + b0 + s * 16 + 8);
      for (int r = 0; r < kRows; ++r) {
        const float* xr = x + r * x_stride + b0 + s * 16;
        part[r][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr), part[r][0]);
        part[r][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr + 8), part[r][1]);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      const __m256 block = _mm256_add_ps(part[r][0], part[r][1]);
      acc[r] = block_scales != nullptr
                   ? _mm256_fmadd_ps(block, _mm256_set1_ps(block_scales[b0 / kFp8ScaleBlock]), acc[r])
                   : _mm256_add_ps(block, acc[r]);
    }
  }
  if (prefetch != nullptr) _mm_prefetch(reinterpret_cast<const char*>(prefetch + k - 1), _MM_HINT_T0);
  for (int r = 0; r < kRows; ++r) out[r] = 256.0f * HorizontalSum(acc[r]);
}

void Fp8Dot(int64_t k, const uint8_t* codes, const float* block_scales, const float* x, int64_t x_stride, int rows,
            float* out, const uint8_t* prefetch) {
  switch (rows) {
    case 1:
      return Fp8DotRows<1>(k, codes, block_scales, x, x_stride, out, prefetch);
    case 2:
      return Fp8DotRows<2>(k, codes, block_scales, x, x_stride, out, prefetch);
    case 3:
      return Fp8DotRows<3>(k, codes, block_scales, x, x_stride, out, prefetch);
    default:
      return Fp8DotRows<4>(k, codes, block_scales, x, x_stride, out, prefetch);
  }
}

}  // namespace

constinit const BlockDotVariant kBlockDotAvx2 = {
    {{WeightFormat::kMxfp4, Fp4Dot<false>}, {WeightFormat::kNvfp4, Fp4Dot<true>}}, Fp8Dot};

}  // namespace ember::quant
