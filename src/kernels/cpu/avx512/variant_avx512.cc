// AVX-512 matmul variant: 16-lane f32 FMAs with mask-register tails.
//
// bf16 weights are widened exactly (zero-extend each 16-bit word to 32 bits, shift left by 16);
// activations stay f32 and accumulation is f32, so this is the exact path. A faster
// vdpbf16ps variant would round activations to bf16 and belongs in a separate variant.
//
// Tiles (see kernels/cpu/tiled_matmul.h):
//   decode (m = 1)      8 weight rows x 1: 8 independent FMA chains cover the 4-cycle FMA
//                       latency and 8 row streams keep enough cache-line misses in flight to run
//                       at memory bandwidth; a software prefetch runs a few lines ahead.
//   small m (2..7)      4 weight rows x 6 activation rows widened on the fly: 24 zmm
//                       accumulators + 6 activation vectors + 1 weight vector = 31 of 32 zmm.
//   prefill (m >= 8)    weights widened once per panel into an L1 block, then 6 weight rows x 4
//                       activation rows (24 accumulators + 4 + 1).
#include "kernels/variants.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/gelu_tanh.h"
#include "kernels/cpu/paged_attention_tile.h"
#include "kernels/cpu/row_attention.h"
#include "kernels/cpu/tiled_matmul.h"

namespace ember::kernels {
namespace {

// The all-ones maskz forms compile to the plain instructions; they are used because GCC 12's
// unmasked _mm512_cvtepu16_epi32 / _mm512_slli_epi32 pass an "undefined" vector that trips
// -Wmaybe-uninitialized once inlined.
inline __m512 WidenBF16(__m256i bits) {
  constexpr __mmask16 kAll = 0xffff;
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll, _mm512_maskz_cvtepu16_epi32(kAll, bits), 16));
}

inline __m512 LoadW(const uint16_t* p) {
  return WidenBF16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 LoadW(const float* p) { return _mm512_loadu_ps(p); }

// Masked-off lanes read as 0 and are never touched in memory, so reading past k cannot fault.
inline __m512 LoadWMasked(const uint16_t* p, __mmask16 mask) {
  return WidenBF16(_mm256_maskz_loadu_epi16(mask, p));
}
inline __m512 LoadWMasked(const float* p, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, p); }

// Fixed reduction tree: halves, then quarters, ... (part of the determinism contract).
// The low half is taken with extractf32x8 rather than _mm512_castps512_ps256, whose GCC 12
// implementation trips -Wuninitialized; both compile to a plain register use.
inline float HorizontalSum(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
}

struct Avx512Kernel {
  static constexpr int kTileW = 4;
  static constexpr int kTileR = 6;
  static constexpr int kGemvW = 8;
  // Half of a 2 MB L2: the activation panel stays resident while weight blocks stream past.
  static constexpr int64_t kPanelBytes = int64_t{1} << 20;
  // Software prefetch distance for single-row (decode) tiles, in bytes ahead along each weight
  // row. The hardware streamer follows 8 sequential rows too; the prefetch gets the next lines
  // requested a little earlier: +5-8% GEMV bandwidth on the Sapphire Rapids dev VM vs none.
  static constexpr int64_t kPrefetchBytes = 512;
  // Packed prefill (m >= 8): 6 widened weight rows x 4 activation rows = 24 accumulators,
  // 4 activation vectors, 1 weight vector. With the widening out of the loop a 6 x 4 tile needs
  // fewer activation loads from L2 per FMA than 4 x 6 (64 / 6 vs 64 / 4 bytes) and measured
  // ~70% of FMA peak against ~55% for 4 x 6 and 8 x 3. 6 rows x 1024 f32 = 24 KB of packed
  // weights stay in the 48 KB L1 while up to 120 activation rows pass over them.
  static constexpr bool kPackWeights = true;
  static constexpr int kLanes = 16;
  static constexpr int kPackW = 6;
  static constexpr int kPackR = 4;
  static constexpr int64_t kBlockK = 1024;
  static constexpr int64_t kMaxPanelRows = 120;

  template <int W, int R, typename WeightT>
  [[gnu::noinline]] static void Tile(const float* x, int64_t k, const WeightT* w, float* y, int64_t ldy) {
    __m512 acc[W][R];
#pragma GCC unroll 8
    for (int c = 0; c < W; ++c) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[c][r] = _mm512_setzero_ps();
    }
    constexpr int64_t kPrefetchElems = kPrefetchBytes / static_cast<int64_t>(sizeof(WeightT));
    int64_t p = 0;
    for (; p + kLanes <= k; p += kLanes) {
      __m512 xv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_ps(x + r * k + p);
#pragma GCC unroll 8
      for (int c = 0; c < W; ++c) {
        if constexpr (R == 1) {
          _mm_prefetch(reinterpret_cast<const char*>(w + c * k + p + kPrefetchElems), _MM_HINT_T0);
        }
        const __m512 wv = LoadW(w + c * k + p);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[c][r] = _mm512_fmadd_ps(wv, xv[r], acc[c][r]);
      }
    }
    if (p < k) {
      const __mmask16 mask = static_cast<__mmask16>((1u << (k - p)) - 1u);
      __m512 xv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xv[r] = _mm512_maskz_loadu_ps(mask, x + r * k + p);
#pragma GCC unroll 8
      for (int c = 0; c < W; ++c) {
        const __m512 wv = LoadWMasked(w + c * k + p, mask);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[c][r] = _mm512_fmadd_ps(wv, xv[r], acc[c][r]);
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < W; ++c) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) y[r * ldy + c] = HorizontalSum(acc[c][r]);
    }
  }

  template <int W, int R>
  [[gnu::noinline]] static void PackedTile(const float* x, int64_t ldx, int64_t count, const float* wpack,
                                           int64_t ldw, float* acc_buf, bool resume, float* y, int64_t ldy) {
    __m512 acc[W][R];
#pragma GCC unroll 8
    for (int c = 0; c < W; ++c) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc[c][r] = resume ? _mm512_load_ps(acc_buf + (c * R + r) * kLanes) : _mm512_setzero_ps();
      }
    }
    int64_t p = 0;
    for (; p + kLanes <= count; p += kLanes) {
      __m512 xv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_ps(x + r * ldx + p);
#pragma GCC unroll 8
      for (int c = 0; c < W; ++c) {
        const __m512 wv = _mm512_load_ps(wpack + c * ldw + p);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[c][r] = _mm512_fmadd_ps(wv, xv[r], acc[c][r]);
      }
    }
    if (p < count) {  // only in the last block; the packed weights are zero past `count`
      const __mmask16 mask = static_cast<__mmask16>((1u << (count - p)) - 1u);
      __m512 xv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xv[r] = _mm512_maskz_loadu_ps(mask, x + r * ldx + p);
#pragma GCC unroll 8
      for (int c = 0; c < W; ++c) {
        const __m512 wv = _mm512_load_ps(wpack + c * ldw + p);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[c][r] = _mm512_fmadd_ps(wv, xv[r], acc[c][r]);
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < W; ++c) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        if (y != nullptr) {
          y[r * ldy + c] = HorizontalSum(acc[c][r]);
        } else {
          _mm512_store_ps(acc_buf + (c * R + r) * kLanes, acc[c][r]);
        }
      }
    }
  }
};

void MatMulBF16Avx512(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n_begin, int64_t n_end,
                      float* y, int64_t ldy) {
  cpu::TiledMatMul<Avx512Kernel>(x, m, k, w, n_begin, n_end, y, ldy);
}

void MatMulF32Avx512(const float* x, int64_t m, int64_t k, const float* w, int64_t n_begin, int64_t n_end,
                     float* y, int64_t ldy) {
  cpu::TiledMatMul<Avx512Kernel>(x, m, k, w, n_begin, n_end, y, ldy);
}

// Paged attention lanes (kernels/cpu/paged_attention_tile.h). f16 widens with vcvtph2ps; fp8
// e4m3 becomes f16 by moving its exponent and mantissa bits into place (the value scaled by 2^-8,
// subnormals included), then vcvtph2ps and an exact multiply by 256. Tails use mask registers.
struct Avx512PagedSimd {
  using Vec = __m512;
  static constexpr int kLanes = 16;
  // Value tile: 6 queries x 4 vectors = 24 accumulators + 4 value vectors + 1 broadcast weight.
  static constexpr int kValueRows = 6;
  static constexpr int kValueVecs = 4;
  // The all-ones maskz forms: GCC 12's unmasked forms trip -Wmaybe-uninitialized (WidenBF16).
  static constexpr __mmask16 kAll = 0xffff;
  static __mmask16 Mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static Vec Zero() { return _mm512_setzero_ps(); }
  static Vec Set1(float x) { return _mm512_set1_ps(x); }
  static Vec Add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec Sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
  static Vec Mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec Max(Vec a, Vec b) { return _mm512_maskz_max_ps(kAll, a, b); }
  static Vec Fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec HalfToF32(__m256i bits) { return _mm512_maskz_cvtph_ps(kAll, bits); }
  static Vec LoadF32(const float* p) { return _mm512_loadu_ps(p); }
  static Vec LoadF32Tail(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(Mask(n), p); }
  static void Store(float* p, Vec x) { _mm512_store_ps(p, x); }
  static Vec Fp8ToF32(__m256i codes16) {
    const __m256i magnitude = _mm256_slli_epi16(_mm256_and_si256(codes16, _mm256_set1_epi16(0x7f)), 7);
    const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(codes16, _mm256_set1_epi16(0x80)), 8);
    return _mm512_mul_ps(HalfToF32(_mm256_or_si256(magnitude, sign)), _mm512_set1_ps(256.0f));
  }
  template <DType T>
  static Vec Load(const uint8_t* p) {
    if constexpr (T == DType::kF32) {
      return _mm512_loadu_ps(p);
    } else if constexpr (T == DType::kF16) {
      return HalfToF32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    } else if constexpr (T == DType::kBF16) {
      return WidenBF16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    } else {
      return Fp8ToF32(_mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    }
  }
  template <DType T>
  static Vec LoadTail(const uint8_t* p, int64_t n) {
    if constexpr (T == DType::kF32) {
      return LoadF32Tail(reinterpret_cast<const float*>(p), n);
    } else if constexpr (T == DType::kF16) {
      return HalfToF32(_mm256_maskz_loadu_epi16(Mask(n), p));
    } else if constexpr (T == DType::kBF16) {
      return WidenBF16(_mm256_maskz_loadu_epi16(Mask(n), p));
    } else {
      return Fp8ToF32(_mm256_cvtepu8_epi16(_mm_maskz_loadu_epi8(Mask(n), p)));
    }
  }
  // e^x for x <= 0 (kernels/cpu/gelu_tanh.h's range reduction and polynomial): 0 below kExpMin,
  // where 2^n would leave the normal range. max(kExpMin, x) returns x when x is NaN (vmaxps
  // returns its second operand then), so NaN propagates.
  static Vec Exp(Vec x) {
    const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(cpu::kExpMin), _CMP_NLT_UQ);
    const __m512 xc = _mm512_maskz_max_ps(kAll, _mm512_set1_ps(cpu::kExpMin), x);
    const __m512 n = _mm512_maskz_roundscale_ps(kAll, _mm512_mul_ps(xc, _mm512_set1_ps(cpu::kLog2e)),
                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(cpu::kLn2Hi), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(cpu::kLn2Lo), r);
    __m512 p = _mm512_set1_ps(cpu::kExpC[5]);
    for (int i = 4; i >= 0; --i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(cpu::kExpC[i]));
    const __m512 e_r = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512i pow2 = _mm512_maskz_slli_epi32(
        kAll, _mm512_add_epi32(_mm512_maskz_cvtps_epi32(kAll, n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mul_ps(keep, e_r, _mm512_castsi512_ps(pow2));
  }
  static Vec KeepLanes(Vec x, int64_t lo, int64_t hi, float fill) {
    if (lo < 0) lo = 0;
    if (hi > kLanes - 1) hi = kLanes - 1;
    if (lo > hi) return _mm512_set1_ps(fill);
    const auto mask = static_cast<__mmask16>((0xffffu >> (kLanes - 1 - hi)) & (0xffffu << lo));
    return _mm512_mask_blend_ps(mask, _mm512_set1_ps(fill), x);
  }
  static float ReduceMax(Vec x) {
    const __m256 m8 = _mm256_max_ps(_mm512_extractf32x8_ps(x, 0), _mm512_extractf32x8_ps(x, 1));
    const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
    const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    return _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
  }
  static float Sum(Vec x) { return HorizontalSum(x); }

  // The tree of HorizontalSum (lane i + lane i+8, then +4, +2, +1) for 16 accumulators at once:
  // each stage adds the same lane pairs of every key as HorizontalSum would of that key alone.
  static constexpr int kScoreKeys = 16;
  static void ReduceScores(const Vec* acc, float* out) {
    // Stage 1: x[m] = [lanes 0-7 of key 2m | of key 2m+1], lane i the sum of lanes i and i+8.
    __m512 x[8];
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
      x[m] = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(kAll, acc[2 * m], acc[2 * m + 1], 0x44),
                           _mm512_maskz_shuffle_f32x4(kAll, acc[2 * m], acc[2 * m + 1], 0xee));
    }
    // Stage 2: y[n], 128-bit lane k = key 4n + k, its lanes i + (i+4).
    __m512 y[4];
#pragma GCC unroll 4
    for (int n = 0; n < 4; ++n) {
      y[n] = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(kAll, x[2 * n], x[2 * n + 1], 0x88),
                           _mm512_maskz_shuffle_f32x4(kAll, x[2 * n], x[2 * n + 1], 0xdd));
    }
    // Stage 3: z[p], 128-bit lane k = [2 sums of key 8p + k | 2 of key 8p + 4 + k].
    __m512 z[2];
#pragma GCC unroll 2
    for (int p = 0; p < 2; ++p) {
      const __m512d a = _mm512_castps_pd(y[2 * p]), b = _mm512_castps_pd(y[2 * p + 1]);
      z[p] = _mm512_add_ps(_mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xff, a, b)),
                           _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xff, a, b)));
    }
    // Stage 4: 128-bit lane k = scores of keys k, 4 + k, 8 + k, 12 + k; lane 4k + j = key 4j + k.
    const __m512 w = _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    _mm512_store_ps(out, _mm512_maskz_permutexvar_ps(kAll, order, w));
  }
};

}  // namespace

const KernelVariant kAvx512Variant = {&MatMulBF16Avx512, &MatMulF32Avx512,
                                      &cpu::PagedAttentionTile<Avx512PagedSimd>, &cpu::GeGluTanhAvx512,
                                      &cpu::SoftmaxExp<Avx512PagedSimd>, &cpu::RowAttention<Avx512PagedSimd>};

}  // namespace ember::kernels

#else  // the compiler cannot target AVX-512: the variant is never offered

namespace ember::kernels {
const KernelVariant kAvx512Variant = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
}  // namespace ember::kernels

#endif
