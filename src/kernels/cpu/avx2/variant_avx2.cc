// AVX2 + FMA matmul variant: 8-lane f32 FMAs; k tails through masked loads.
//
// bf16 weights are widened exactly (zero-extend each 16-bit word to 32 bits, shift left by 16);
// activations stay f32 and accumulation is f32.
//
// Tiles (see kernels/cpu/tiled_matmul.h):
//   decode (m = 1)      8 weight rows x 1: 8 independent FMA chains cover the FMA latency and 8
//                       row streams keep misses in flight; a software prefetch runs ahead.
//   prefill (m >= 2)    4 weight rows x 3 activation rows = 12 ymm accumulators + 3 activation
//                       vectors + 1 weight vector = all 16 ymm registers; from m >= 6 the weights
//                       are widened once per panel into an L1 block instead of per tile.
#include "kernels/variants.h"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/gelu_tanh.h"
#include "kernels/cpu/paged_attention_tile.h"
#include "kernels/cpu/row_attention.h"
#include "kernels/cpu/tiled_matmul.h"

namespace ember::kernels {
namespace {

constexpr int kVectorLanes = 8;

inline __m256 WidenBF16(__m128i bits) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

inline __m256 LoadW(const uint16_t* p) {
  return WidenBF16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 LoadW(const float* p) { return _mm256_loadu_ps(p); }

// Tail loads of `count` < 8 elements; the rest of the lanes are 0. AVX2 has no 16-bit masked
// load, so bf16 tails go through a zero-padded copy (once per tile, not in the hot loop).
inline __m256i TailMask(int64_t count) {
  static constexpr int32_t kMaskTable[2 * kVectorLanes] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                           0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMaskTable + kVectorLanes - count));
}
inline __m256 LoadWTail(const uint16_t* p, int64_t count, __m256i /*mask*/) {
  uint16_t padded[kVectorLanes] = {};
  std::memcpy(padded, p, static_cast<size_t>(count) * sizeof(uint16_t));
  return LoadW(padded);
}
inline __m256 LoadWTail(const float* p, int64_t /*count*/, __m256i mask) {
  return _mm256_maskload_ps(p, mask);
}

// Fixed reduction tree: halves, then quarters, ... (part of the determinism contract).
inline float HorizontalSum(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
}

struct Avx2Kernel {
  static constexpr int kLanes = kVectorLanes;
  static constexpr int kTileW = 4;
  static constexpr int kTileR = 3;
  static constexpr int kGemvW = 8;
  // AVX2-only hosts have 256 KB - 1 MB of L2: keep the activation panel modest.
  static constexpr int64_t kPanelBytes = int64_t{512} << 10;
  // Software prefetch distance for decode tiles (bytes ahead along each weight row).
  static constexpr int64_t kPrefetchBytes = 512;
  // Packed prefill (m >= 6): same 4 x 3 register tile, weights widened once per panel into
  // a 4 x 1024 f32 (16 KB) block that stays in a 32 KB L1.
  static constexpr bool kPackWeights = true;
  static constexpr int kPackW = 4;
  static constexpr int kPackR = 3;
  static constexpr int64_t kBlockK = 1024;
  static constexpr int64_t kMaxPanelRows = 120;

  template <int W, int R, typename WeightT>
  [[gnu::noinline]] static void Tile(const float* x, int64_t k, const WeightT* w, float* y, int64_t ldy) {
    __m256 acc[W][R];
#pragma GCC unroll 8
    for (int c = 0; c < W; ++c) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[c][r] = _mm256_setzero_ps();
    }
    constexpr int64_t kPrefetchElems = kPrefetchBytes / static_cast<int64_t>(sizeof(WeightT));
    int64_t p = 0;
    for (; p + kLanes <= k; p += kLanes) {
      __m256 xv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_ps(x + r * k + p);
#pragma GCC unroll 8
      for (int c = 0; c < W; ++c) {
        if constexpr (R == 1) {
          _mm_prefetch(reinterpret_cast<const char*>(w + c * k + p + kPrefetchElems), _MM_HINT_T0);
        }
        const __m256 wv = LoadW(w + c * k + p);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[c][r] = _mm256_fmadd_ps(wv, xv[r], acc[c][r]);
      }
    }
    if (p < k) {
      const int64_t count = k - p;
      const __m256i mask = TailMask(count);
      __m256 xv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xv[r] = _mm256_maskload_ps(x + r * k + p, mask);
#pragma GCC unroll 8
      for (int c = 0; c < W; ++c) {
        const __m256 wv = LoadWTail(w + c * k + p, count, mask);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[c][r] = _mm256_fmadd_ps(wv, xv[r], acc[c][r]);
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
    __m256 acc[W][R];
#pragma GCC unroll 8
    for (int c = 0; c < W; ++c) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc[c][r] = resume ? _mm256_load_ps(acc_buf + (c * R + r) * kLanes) : _mm256_setzero_ps();
      }
    }
    int64_t p = 0;
    for (; p + kLanes <= count; p += kLanes) {
      __m256 xv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_ps(x + r * ldx + p);
#pragma GCC unroll 8
      for (int c = 0; c < W; ++c) {
        const __m256 wv = _mm256_load_ps(wpack + c * ldw + p);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[c][r] = _mm256_fmadd_ps(wv, xv[r], acc[c][r]);
      }
    }
    if (p < count) {  // only in the last block; the packed weights are zero past `count`
      const __m256i mask = TailMask(count - p);
      __m256 xv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xv[r] = _mm256_maskload_ps(x + r * ldx + p, mask);
#pragma GCC unroll 8
      for (int c = 0; c < W; ++c) {
        const __m256 wv = _mm256_load_ps(wpack + c * ldw + p);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[c][r] = _mm256_fmadd_ps(wv, xv[r], acc[c][r]);
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < W; ++c) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        if (y != nullptr) {
          y[r * ldy + c] = HorizontalSum(acc[c][r]);
        } else {
          _mm256_store_ps(acc_buf + (c * R + r) * kLanes, acc[c][r]);
        }
      }
    }
  }
};

void MatMulBF16Avx2(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n_begin, int64_t n_end,
                    float* y, int64_t ldy) {
  cpu::TiledMatMul<Avx2Kernel>(x, m, k, w, n_begin, n_end, y, ldy);
}

void MatMulF32Avx2(const float* x, int64_t m, int64_t k, const float* w, int64_t n_begin, int64_t n_end,
                   float* y, int64_t ldy) {
  cpu::TiledMatMul<Avx2Kernel>(x, m, k, w, n_begin, n_end, y, ldy);
}

// Paged attention lanes (kernels/cpu/paged_attention_tile.h). f16 widens with F16C; fp8 e4m3
// becomes f16 by moving its exponent and mantissa bits into place (the value scaled by 2^-8,
// subnormals included), then F16C and an exact multiply by 256.
struct Avx2PagedSimd {
  using Vec = __m256;
  static constexpr int kLanes = kVectorLanes;
  // Value tile: 3 queries x 3 vectors = 9 accumulators + 3 value vectors + 1 broadcast weight.
  static constexpr int kValueRows = 3;
  static constexpr int kValueVecs = 3;
  static Vec Zero() { return _mm256_setzero_ps(); }
  static Vec Set1(float x) { return _mm256_set1_ps(x); }
  static Vec Add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec Sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
  static Vec Mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec Max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
  static Vec Fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec LoadF32(const float* p) { return _mm256_loadu_ps(p); }
  static Vec LoadF32Tail(const float* p, int64_t n) { return _mm256_maskload_ps(p, TailMask(n)); }
  static void Store(float* p, Vec x) { _mm256_store_ps(p, x); }
  static Vec Fp8ToF32(__m128i codes16) {
    const __m128i magnitude = _mm_slli_epi16(_mm_and_si128(codes16, _mm_set1_epi16(0x7f)), 7);
    const __m128i sign = _mm_slli_epi16(_mm_and_si128(codes16, _mm_set1_epi16(0x80)), 8);
    return _mm256_mul_ps(_mm256_cvtph_ps(_mm_or_si128(magnitude, sign)), _mm256_set1_ps(256.0f));
  }
  template <DType T>
  static Vec Load(const uint8_t* p) {
    if constexpr (T == DType::kF32) {
      return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    } else if constexpr (T == DType::kF16) {
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    } else if constexpr (T == DType::kBF16) {
      return WidenBF16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    } else {
      return Fp8ToF32(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
    }
  }
  template <DType T>
  static Vec LoadTail(const uint8_t* p, int64_t n) {
    if constexpr (T == DType::kF32) {
      return LoadF32Tail(reinterpret_cast<const float*>(p), n);
    } else {
      // No 8/16-bit masked loads in AVX2: widen a zero-padded copy.
      alignas(32) uint8_t padded[kVectorLanes * 4] = {};
      std::memcpy(padded, p, static_cast<size_t>(n * cpu::kPagedElementBytes<T>));
      return Load<T>(padded);
    }
  }
  // e^x for x <= 0 (kernels/cpu/gelu_tanh.h's range reduction and polynomial): 0 below kExpMin;
  // max(kExpMin, x) returns x when x is NaN (vmaxps returns its second operand then).
  static Vec Exp(Vec x) {
    const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(cpu::kExpMin), _CMP_NLT_UQ);
    const __m256 xc = _mm256_max_ps(_mm256_set1_ps(cpu::kExpMin), x);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(cpu::kLog2e)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(cpu::kLn2Hi), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(cpu::kLn2Lo), r);
    __m256 p = _mm256_set1_ps(cpu::kExpC[5]);
    for (int i = 4; i >= 0; --i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(cpu::kExpC[i]));
    const __m256 e_r = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i pow2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(e_r, _mm256_castsi256_ps(pow2)), keep);
  }
  static Vec KeepLanes(Vec x, int64_t lo, int64_t hi, float fill) {
    if (lo < 0) lo = 0;
    if (hi > kLanes - 1) hi = kLanes - 1;
    if (lo > hi) return _mm256_set1_ps(fill);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i keep = _mm256_and_si256(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32(static_cast<int>(lo) - 1)),
                                          _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(hi) + 1), lane));
    return _mm256_blendv_ps(_mm256_set1_ps(fill), x, _mm256_castsi256_ps(keep));
  }
  static float ReduceMax(Vec x) {
    const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    return _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
  }
  static float Sum(Vec x) { return HorizontalSum(x); }

  // The tree of HorizontalSum (lane i + lane i+4, then +2, +1) for 8 accumulators at once: each
  // stage adds the same lane pairs of every key as HorizontalSum would of that key alone.
  static constexpr int kScoreKeys = 8;
  static void ReduceScores(const Vec* acc, float* out) {
    // Stage 1: x[m] = [4 sums of key 2m | 4 of key 2m+1], lanes i + (i+4).
    __m256 x[4];
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) {
      x[m] = _mm256_add_ps(_mm256_permute2f128_ps(acc[2 * m], acc[2 * m + 1], 0x20),
                           _mm256_permute2f128_ps(acc[2 * m], acc[2 * m + 1], 0x31));
    }
    // Stage 2: y[n], 128-bit lane k = [2 sums of key 4n + k | 2 of key 4n + 2 + k].
    __m256 y[2];
#pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      const __m256d a = _mm256_castps_pd(x[2 * n]), b = _mm256_castps_pd(x[2 * n + 1]);
      y[n] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)), _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
    }
    // Stage 3: 128-bit lane k = scores of keys k, 2 + k, 4 + k, 6 + k; lane 4k + j = key 2j + k.
    const __m256 w = _mm256_add_ps(_mm256_shuffle_ps(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
    _mm256_store_ps(out, _mm256_permutevar8x32_ps(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
};

}  // namespace

const KernelVariant kAvx2Variant = {&MatMulBF16Avx2, &MatMulF32Avx2,
                                    &cpu::PagedAttentionTile<Avx2PagedSimd>, &cpu::GeGluTanhAvx2,
                                    &cpu::SoftmaxExp<Avx2PagedSimd>, &cpu::RowAttention<Avx2PagedSimd>};

}  // namespace ember::kernels

#else  // the compiler cannot target AVX2 + FMA: the variant is never offered

namespace ember::kernels {
const KernelVariant kAvx2Variant = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
}  // namespace ember::kernels

#endif
