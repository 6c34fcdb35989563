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
#include "kernels/cpu/paged_attention_head.h"
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

// Paged attention lanes (kernels/cpu/paged_attention_head.h). f16 widens with vcvtph2ps; fp8
// e4m3 becomes f16 by moving its exponent and mantissa bits into place (the value scaled by 2^-8,
// subnormals included), then vcvtph2ps and an exact multiply by 256. Tails use mask registers.
struct Avx512PagedSimd {
  using Vec = __m512;
  static constexpr int kLanes = 16;
  static __mmask16 Mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static Vec Zero() { return _mm512_setzero_ps(); }
  static Vec Set1(float x) { return _mm512_set1_ps(x); }
  static Vec Fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  // The all-ones maskz form for the same GCC 12 -Wmaybe-uninitialized reason as WidenBF16.
  static Vec HalfToF32(__m256i bits) { return _mm512_maskz_cvtph_ps(0xffff, bits); }
  static Vec LoadF32(const float* p) { return _mm512_loadu_ps(p); }
  static Vec LoadF32Tail(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(Mask(n), p); }
  static void Store(float* p, Vec x) { _mm512_storeu_ps(p, x); }
  static void StoreTail(float* p, Vec x, int64_t n) { _mm512_mask_storeu_ps(p, Mask(n), x); }
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
  static float Sum(Vec x) { return HorizontalSum(x); }
};

}  // namespace

const KernelVariant kAvx512Variant = {&MatMulBF16Avx512, &MatMulF32Avx512,
                                      &cpu::PagedAttentionHead<Avx512PagedSimd>, &cpu::GeGluTanhAvx512};

}  // namespace ember::kernels

#else  // the compiler cannot target AVX-512: the variant is never offered

namespace ember::kernels {
const KernelVariant kAvx512Variant = {nullptr, nullptr, nullptr, nullptr};
}  // namespace ember::kernels

#endif
