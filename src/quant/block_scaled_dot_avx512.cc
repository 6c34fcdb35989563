// AVX-512 (F, BW, VL) + VNNI block-scaled dots (built with those flags; offered only when CPUID
// has the whole set, CpuFeatures::HasAvx512Set).
//
// FP4: a 128-element chunk is 64 code bytes, one zmm. Low and high nibbles (even and odd
// elements) are masked and XORed with the activation's sign flags (bit 3) in one vpternlogd,
// looked up with vpshufb in the
// table of 2 * e2m1 (signed int8), and vpdpbusd multiplies them by the unsigned |q| activations,
// summing groups of four bytes: after both halves, int32 lane j holds the exact sum over elements
// 8j..8j+7. The block scales are expanded to the 16 lanes (e8m0: shifted into an f32 exponent;
// e4m3: made an f16 bit pattern and widened by vcvtph2ps), multiplied by the activation's lane
// scales, and applied with one FMA per chunk. Per chunk and activation row: 2 vpternlogd,
// 2 vpshufb, 2 vpdpbusd, a convert, a multiply and an FMA; the nibble shift and the scale
// expansion (3-4 instructions) are shared by the up to four activation rows of a prefill call:
// 13-14 vector instructions per 64 code bytes at m = 1, which 512-bit code issues on two ports.
//
// FP8: 16 codes at a time become f16 bit patterns (sign-extend to 16 bits, shift left 7, clear
// bit 14: e4m3 * 2^-8 exactly) and vcvtph2ps widens them; four accumulators per activation row
// hide the FMA latency; each 128-element block is scaled once.
//
// Everything here has internal linkage (see gguf_blocks.h for why that matters).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/block_scaled_dot_variants.h"

namespace ember::quant {
namespace {

// GCC 12's headers build several unmasked intrinsics (_mm512_reduce_add_ps, _mm512_cvtph_ps, ...)
// from an uninitialised temporary and -Wall warns; the maskz forms with a full mask do not.
float HorizontalSum(__m512 v) {
  const __m256 half = _mm256_add_ps(_mm512_maskz_extractf32x8_ps(0xff, v, 0), _mm512_maskz_extractf32x8_ps(0xff, v, 1));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The largest lane of v, which holds no NaN (the order of the maxima then does not matter).
float HorizontalMax(__m512 v) {
  const __m256 half =
      _mm256_max_ps(_mm512_maskz_extractf32x8_ps(0xff, v, 0), _mm512_maskz_extractf32x8_ps(0xff, v, 1));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 2 * e2m1 by code: sign << 3 | magnitude.
__m512i E2m1Table() {
  return _mm512_maskz_broadcast_i32x4(0xffff, _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12));
}

// The four e8m0 scales of a chunk as f32, each in the four lanes of its 32 elements.
__m512 Mxfp4LaneScales(const uint8_t* scales) {
  uint32_t bytes;
  std::memcpy(&bytes, scales, 4);
  const __m512i pick =
      _mm512_setr_epi32(static_cast<int>(0x80808000u), static_cast<int>(0x80808000u), static_cast<int>(0x80808000u),
                        static_cast<int>(0x80808000u), static_cast<int>(0x80808001u), static_cast<int>(0x80808001u),
                        static_cast<int>(0x80808001u), static_cast<int>(0x80808001u), static_cast<int>(0x80808002u),
                        static_cast<int>(0x80808002u), static_cast<int>(0x80808002u), static_cast<int>(0x80808002u),
                        static_cast<int>(0x80808003u), static_cast<int>(0x80808003u), static_cast<int>(0x80808003u),
                        static_cast<int>(0x80808003u));
  const __m512i e = _mm512_shuffle_epi8(_mm512_set1_epi32(static_cast<int>(bytes)), pick);
  // e << 23 is 2^(e-127) except for code 0, 2^-127 = 0x00400000 (an f32 subnormal); every other
  // code shifts to at least 0x00800000, so a signed max makes code 0 right.
  return _mm512_castsi512_ps(
      _mm512_maskz_max_epi32(0xffff, _mm512_maskz_slli_epi32(0xffff, e, 23), _mm512_set1_epi32(0x00400000)));
}

// The eight e4m3 scales of a chunk times 2^-8 as f32, each in the two lanes of its 16 elements.
__m512 Nvfp4LaneScales(const uint8_t* scales) {
  uint64_t bytes;
  std::memcpy(&bytes, scales, 8);
  // Word j of each 128-bit lane gets scale byte (lane * 4 + j / 2) in its high byte.
  const __m256i pick = _mm256_setr_epi8(-128, 0, -128, 0, -128, 1, -128, 1, -128, 2, -128, 2, -128, 3, -128, 3, -128, 4,
                                        -128, 4, -128, 5, -128, 5, -128, 6, -128, 6, -128, 7, -128, 7);
  const __m256i high = _mm256_shuffle_epi8(_mm256_set1_epi64x(static_cast<long long>(bytes)), pick);
  // code << 7 is the f16 pattern of e4m3 * 2^-8, subnormals included, for the sign-less codes
  // NVFP4 scales are (ue4m3: ModelOpt writes amax-derived positive scales).
  return _mm512_maskz_cvtph_ps(0xffff, _mm256_srli_epi16(high, 1));
}

template <bool kNvfp4, int kRows>
void Fp4DotRows(int64_t k, const uint8_t* codes, const uint8_t* scales, const uint8_t* act, int64_t act_stride,
                float* out, const uint8_t* prefetch) {
  const ActivationLayout l = Int8ActivationLayout(k);
  const int64_t chunks = k / kChunk;
  const __m512i table = E2m1Table();
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  // vpternlogd immediate for (a & b) ^ c: the nibble mask and the sign flip in one instruction.
  constexpr int kAndXor = 0x6a;
  __m512 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t c = 0; c < chunks; ++c) {
    if (prefetch != nullptr) _mm_prefetch(reinterpret_cast<const char*>(prefetch + c * 64), _MM_HINT_T0);
    const __m512i bytes = _mm512_loadu_si512(codes + c * 64);
    const __m512i hi = _mm512_srli_epi16(bytes, 4);  // high nibbles in bits 0-3
    const __m512 w_scale = kNvfp4 ? Nvfp4LaneScales(scales + c * 8) : Mxfp4LaneScales(scales + c * 4);
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* a = act + r * act_stride;
      const __m512i flip_lo = _mm512_load_si512(a + l.flip + c * kChunk);
      const __m512i flip_hi = _mm512_load_si512(a + l.flip + c * kChunk + 64);
      const __m512i w_lo = _mm512_shuffle_epi8(table, _mm512_ternarylogic_epi32(bytes, low4, flip_lo, kAndXor));
      const __m512i w_hi = _mm512_shuffle_epi8(table, _mm512_ternarylogic_epi32(hi, low4, flip_hi, kAndXor));
      __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_load_si512(a + l.abs + c * kChunk), w_lo);
      sum = _mm512_dpbusd_epi32(sum, _mm512_load_si512(a + l.abs + c * kChunk + 64), w_hi);
      const __m512 scale =
          _mm512_mul_ps(w_scale, _mm512_load_ps(reinterpret_cast<const float*>(a + l.lane_scale) + c * 16));
      acc[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xffff, sum), scale, acc[r]);
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

// 16 e4m3 codes as f32 times 2^-8.
__m512 Fp8Times2PowMinus8(const uint8_t* codes) {
  const __m256i wide = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  const __m256i f16 = _mm256_and_si256(_mm256_slli_epi16(wide, 7), _mm256_set1_epi16(static_cast<short>(0xbf80)));
  return _mm512_maskz_cvtph_ps(0xffff, f16);
}

template <int kRows>
void Fp8DotRows(int64_t k, const uint8_t* codes, const float* block_scales, const float* x, int64_t x_stride,
                float* out, const uint8_t* prefetch) {
  __m512 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b0 = 0; b0 < k; b0 += kFp8ScaleBlock) {
    const int64_t steps = (k - b0 < kFp8ScaleBlock ? k - b0 : kFp8ScaleBlock) / 16;
    __m512 part[kRows][4];
    for (int r = 0; r < kRows; ++r)
      for (int p = 0; p < 4; ++p) part[r][p] = _mm512_setzero_ps();
    int64_t s = 0;
    for (; s + 4 <= steps; s += 4) {
      if (prefetch != nullptr) _mm_prefetch(reinterpret_cast<const char*>(prefetch + b0 + s * 16), _MM_HINT_T0);
      const uint8_t* c = codes + b0 + s * 16;
      const __m512 w[4] = {Fp8Times2PowMinus8(c), Fp8Times2PowMinus8(c + 16), Fp8Times2PowMinus8(c + 32),
                           Fp8Times2PowMinus8(c + 48)};
      for (int r = 0; r < kRows; ++r) {
        const float* xr = x + r * x_stride + b0 + s * 16;
        for (int p = 0; p < 4; ++p) part[r][p] = _mm512_fmadd_ps(w[p], _mm512_loadu_ps(xr + 16 * p), part[r][p]);
      }
    }
    for (; s < steps; ++s) {  // a last block shorter than 128
      const __m512 w = Fp8Times2PowMinus8(codes + b0 + s * 16);
      for (int r = 0; r < kRows; ++r) {
        part[r][0] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + r * x_stride + b0 + s * 16), part[r][0]);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      const __m512 block = _mm512_add_ps(_mm512_add_ps(part[r][0], part[r][1]), _mm512_add_ps(part[r][2], part[r][3]));
      acc[r] = block_scales != nullptr
                   ? _mm512_fmadd_ps(block, _mm512_set1_ps(block_scales[b0 / kFp8ScaleBlock]), acc[r])
                   : _mm512_add_ps(block, acc[r]);
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

// QuantizeActivationInt8 (block_scaled_dot.cc) 16 elements at a time, byte for byte the same:
// NaN elements are left out of amax as std::max(amax, NaN) leaves them, max_ps(v, -127) maps a
// NaN product to -127 as std::max(-127.0f, NaN) does, and the +-1.5 * 2^23 rounding is the same
// two f32 operations.
void QuantizeActivationInt8Avx512(const float* x, int64_t k, uint8_t* out) {
  const ActivationLayout l = Int8ActivationLayout(k);
  auto* q = reinterpret_cast<int8_t*>(out + l.q);
  const __m512 round = _mm512_set1_ps(12582912.0f);
  for (int64_t g = 0; g < k / 16; ++g) {
    const __m512 v = _mm512_loadu_ps(x + g * 16);
    const __m512 a = _mm512_abs_ps(v);
    const float amax = HorizontalMax(_mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, a, _CMP_ORD_Q), a));
    const float d = amax / 127.0f;
    const float inverse = d > 0.0f ? 1.0f / d : 0.0f;
    __m512 s = _mm512_maskz_max_ps(0xffff, _mm512_mul_ps(v, _mm512_set1_ps(inverse)), _mm512_set1_ps(-127.0f));
    s = _mm512_maskz_min_ps(0xffff, s, _mm512_set1_ps(127.0f));
    s = _mm512_sub_ps(_mm512_add_ps(s, round), round);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + g * 16),
                     _mm512_maskz_cvtepi32_epi8(0xffff, _mm512_maskz_cvttps_epi32(0xffff, s)));
    std::memcpy(out + l.scale + g * 4, &d, 4);
    std::memcpy(out + l.lane_scale + g * 8, &d, 4);
    std::memcpy(out + l.lane_scale + g * 8 + 4, &d, 4);
  }
  // Chunk order: per 128 elements the 64 even ones, then the 64 odd ones. vpshufb puts each
  // 16-byte lane's evens before its odds, vpermq gathers the evens of a register into its low
  // half, vshufi64x2 joins two registers' halves.
  const __m512i split = _mm512_maskz_broadcast_i32x4(
      0xffff, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
  const __m512i gather = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
  int64_t c0 = 0;
  for (; c0 + kChunk <= k; c0 += kChunk) {
    const __m512i lo =
        _mm512_maskz_permutexvar_epi64(0xff, gather, _mm512_shuffle_epi8(_mm512_loadu_si512(q + c0), split));
    const __m512i hi =
        _mm512_maskz_permutexvar_epi64(0xff, gather, _mm512_shuffle_epi8(_mm512_loadu_si512(q + c0 + 64), split));
    const __m512i halves[2] = {_mm512_maskz_shuffle_i64x2(0xff, lo, hi, 0x44), _mm512_maskz_shuffle_i64x2(0xff, lo, hi, 0xee)};
    for (int odd = 0; odd < 2; ++odd) {
      _mm512_storeu_si512(out + l.abs + c0 + odd * 64, _mm512_abs_epi8(halves[odd]));
      _mm512_storeu_si512(out + l.flip + c0 + odd * 64,
                         _mm512_maskz_set1_epi8(_mm512_movepi8_mask(halves[odd]), 0x08));
    }
  }
  if (c0 < k) {  // a last chunk shorter than 128
    const int64_t half = (k - c0) / 2;
    for (int odd = 0; odd < 2; ++odd) {
      for (int64_t j = 0; j < half; ++j) {
        const int8_t v = q[c0 + 2 * j + odd];
        out[l.abs + c0 + odd * half + j] = static_cast<uint8_t>(v < 0 ? -v : v);
        out[l.flip + c0 + odd * half + j] = v < 0 ? 0x08 : 0x00;
      }
    }
  }
}

constinit const BlockDotVariant kBlockDotAvx512 = {
    {{WeightFormat::kMxfp4, Fp4Dot<false>}, {WeightFormat::kNvfp4, Fp4Dot<true>}},
    Fp8Dot,
    {{WeightFormat::kMxfp4, PackedMxfp4GemmAvx512}, {WeightFormat::kNvfp4, PackedNvfp4GemmAvx512}}};

}  // namespace ember::quant
