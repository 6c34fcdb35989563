// AVX-512 VNNI packed FP4 GEMM (MXFP4, NVFP4) over the 16-row groups of block_scaled_packed.h,
// bit for bit the avx512 row dots (block_scaled_dot_avx512.cc) for every output.
//
// Lane o of every zmm is output row o of the group. The row dot keeps 16 lane accumulators per
// output (lane j = elements 8j..8j+7 of each 128-element chunk); here they are taken one lane
// pair (p: lanes 2p, 2p+1, 16 elements, one scale product) at a time over all chunks, so a tile of
// up to 8 activation rows needs only two accumulators per row: per (pair, chunk) the two code
// words of the 16 rows are loaded (128 bytes) and decoded once (mask, shift, two vpshufb each)
// for all rows of the tile; per activation row two vpdpbusd chains per word start at the
// broadcast -12 * sum(q) and take the broadcast signed activation words, then the same
// cvtdq2ps, w_scale * a_scale and FMA as the row dot. The finished lanes go to a small scratch,
// and the row dot's horizontal tree, the scalar tail's chain (here 16 outputs at a time, with
// embedded-rounding multiplies and adds so that the compiler cannot contract them into FMAs,
// which the scalar reference does not have), the 0.5 / 128 unit and the global scale follow in
// the same order.
//
// Everything else has internal linkage (see gguf_blocks.h for why that matters).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/block_scaled_dot_variants.h"
#include "quant/block_scaled_packed.h"

namespace ember::quant {
namespace {

constexpr int kTileRows = 8;
constexpr int kRn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// 2 * e2m1 + 12 by code (sign << 3 | magnitude): unsigned, for vpdpbusd's first operand.
__m512i OffsetE2m1Table() {
  return _mm512_maskz_broadcast_i32x4(0xffff,
                                      _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
}

// The 16 rows' scale bytes of one block as the row dot's f32 lane scales: e8m0 as 2^(e-127)
// (code 0 the subnormal 2^-127), e4m3 as the f16 pattern code << 7 = e4m3 * 2^-8.
template <bool kNvfp4>
__m512 GroupScales(const uint8_t* bytes) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes));
  if constexpr (kNvfp4) {
    return _mm512_maskz_cvtph_ps(0xffff, _mm256_slli_epi16(_mm256_cvtepu8_epi16(b), 7));
  } else {
    const __m512i e = _mm512_maskz_cvtepu8_epi32(0xffff, b);
    return _mm512_castsi512_ps(
        _mm512_maskz_max_epi32(0xffff, _mm512_maskz_slli_epi32(0xffff, e, 23), _mm512_set1_epi32(0x00400000)));
  }
}

__m512i Broadcast32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

float Load32f(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// One group against kRows activation rows: writes the 16 outputs of each row (masked) to y.
template <bool kNvfp4, int kRows>
void GroupTile(int64_t k, const uint8_t* group, const uint8_t* act, int64_t act_stride, int64_t records,
               float global_scale, float* y, int64_t ldy, __mmask16 store_mask, const uint8_t* prefetch) {
  const int64_t chunks = k / kChunk;
  const int64_t tail_groups = (k % kChunk) / 16;
  const uint8_t* codes = group;
  const uint8_t* scales = group + 8 * k;
  constexpr int64_t kBlockGroups = kNvfp4 ? 1 : 2;  // 16-element groups per scale block
  const __m512i table = OffsetE2m1Table();
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  alignas(64) float lanes[kRows][16][16];
  for (int p = 0; p < 8; ++p) {
    __m512 acc0[kRows], acc1[kRows];
    for (int r = 0; r < kRows; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t slot = p * chunks + c;
      const uint8_t* wc = codes + slot * 128;
      if (prefetch != nullptr) {
        _mm_prefetch(reinterpret_cast<const char*>(prefetch + slot * 128), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(prefetch + slot * 128 + 64), _MM_HINT_T0);
      }
      // Unaligned: a group is 16 x (k/2 + k/block) bytes, not a multiple of 64 for every k (k =
      // 160: 1360), so only the first group of a matrix is sure to start on a cache line.
      const __m512i b0 = _mm512_loadu_si512(wc);
      const __m512i b1 = _mm512_loadu_si512(wc + 64);
      const __m512i lo0 = _mm512_shuffle_epi8(table, _mm512_and_si512(b0, low4));
      const __m512i hi0 = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(b0, 4), low4));
      const __m512i lo1 = _mm512_shuffle_epi8(table, _mm512_and_si512(b1, low4));
      const __m512i hi1 = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(b1, 4), low4));
      const __m512 w_scale = GroupScales<kNvfp4>(scales + ((c * 8 + p) / kBlockGroups) * kPackedGroupRows);
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* rec = act + r * act_stride + records + slot * 32;
        __m512i i0 = _mm512_dpbusd_epi32(Broadcast32(rec + 16), lo0, Broadcast32(rec));
        i0 = _mm512_dpbusd_epi32(i0, hi0, Broadcast32(rec + 4));
        __m512i i1 = _mm512_dpbusd_epi32(Broadcast32(rec + 20), lo1, Broadcast32(rec + 8));
        i1 = _mm512_dpbusd_epi32(i1, hi1, Broadcast32(rec + 12));
        const __m512 scale = _mm512_mul_ps(w_scale, _mm512_set1_ps(Load32f(rec + 24)));
        acc0[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xffff, i0), scale, acc0[r]);
        acc1[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xffff, i1), scale, acc1[r]);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      _mm512_store_ps(lanes[r][2 * p], acc0[r]);
      _mm512_store_ps(lanes[r][2 * p + 1], acc1[r]);
    }
  }
  const uint8_t* tail_codes = codes + chunks * 16 * 64;
  const float unit = kNvfp4 ? 128.0f : 0.5f;
  for (int r = 0; r < kRows; ++r) {
    // The row dot's HorizontalSum: h_i = v_i + v_{i+8}, s_i = h_i + h_{i+4}, (s_0 + s_2) + (s_1 + s_3).
    __m512 h[8];
    for (int i = 0; i < 8; ++i) h[i] = _mm512_add_ps(_mm512_load_ps(lanes[r][i]), _mm512_load_ps(lanes[r][i + 8]));
    __m512 s[4];
    for (int i = 0; i < 4; ++i) s[i] = _mm512_add_ps(h[i], h[i + 4]);
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3]));
    __m512 out = _mm512_maskz_mul_round_ps(0xffff, _mm512_set1_ps(unit), sum, kRn);
    if (tail_groups > 0) {
      // ref::Fp4Range over the tail: acc += float(isum16) * (block_scale * a_scale), then 0.5 * acc.
      __m512 tail = _mm512_setzero_ps();
      for (int64_t t = 0; t < tail_groups; ++t) {
        const uint8_t* rec = act + r * act_stride + records + (chunks * 8 + t) * 32;
        const __m512i b0 = _mm512_loadu_si512(tail_codes + 2 * t * 64);
        const __m512i b1 = _mm512_loadu_si512(tail_codes + (2 * t + 1) * 64);
        __m512i isum = _mm512_dpbusd_epi32(Broadcast32(rec + 28), _mm512_shuffle_epi8(table, _mm512_and_si512(b0, low4)),
                                           Broadcast32(rec));
        isum = _mm512_dpbusd_epi32(isum, _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(b0, 4), low4)),
                                   Broadcast32(rec + 4));
        isum = _mm512_dpbusd_epi32(isum, _mm512_shuffle_epi8(table, _mm512_and_si512(b1, low4)), Broadcast32(rec + 8));
        isum = _mm512_dpbusd_epi32(isum, _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(b1, 4), low4)),
                                   Broadcast32(rec + 12));
        __m512 block_scale = GroupScales<kNvfp4>(scales + ((chunks * 8 + t) / kBlockGroups) * kPackedGroupRows);
        if constexpr (kNvfp4) block_scale = _mm512_maskz_mul_round_ps(0xffff, block_scale, _mm512_set1_ps(256.0f), kRn);  // exact
        const __m512 scale = _mm512_maskz_mul_round_ps(0xffff, block_scale, _mm512_set1_ps(Load32f(rec + 24)), kRn);
        tail = _mm512_maskz_add_round_ps(0xffff, tail, _mm512_maskz_mul_round_ps(0xffff, _mm512_maskz_cvtepi32_ps(0xffff, isum), scale, kRn), kRn);
      }
      out = _mm512_maskz_add_round_ps(0xffff, out, _mm512_maskz_mul_round_ps(0xffff, _mm512_set1_ps(0.5f), tail, kRn), kRn);
    }
    out = _mm512_maskz_mul_round_ps(0xffff, out, _mm512_set1_ps(global_scale), kRn);
    _mm512_mask_storeu_ps(y + r * ldy, store_mask, out);
  }
}

template <bool kNvfp4, int kRows>
void GroupRows(int64_t k, const uint8_t* group, const uint8_t* act, int64_t act_stride, int64_t records,
               float global_scale, float* y, int64_t ldy, __mmask16 store_mask, const uint8_t* prefetch) {
  GroupTile<kNvfp4, kRows>(k, group, act, act_stride, records, global_scale, y, ldy, store_mask, prefetch);
}

template <bool kNvfp4>
void PackedGemm(int64_t k, const uint8_t* packed, const uint8_t* act, int64_t act_stride, int64_t m,
                float global_scale, int64_t row_begin, int64_t row_end, float* y, int64_t ldy) {
  const int64_t records = Int8ActivationLayout(k).packed;
  const int64_t group_bytes = PackedFp4GroupBytes(kNvfp4 ? WeightFormat::kNvfp4 : WeightFormat::kMxfp4, k);
  const int64_t g_begin = row_begin / kPackedGroupRows;
  const int64_t g_end = (row_end + kPackedGroupRows - 1) / kPackedGroupRows;
  using Fn = void (*)(int64_t, const uint8_t*, const uint8_t*, int64_t, int64_t, float, float*, int64_t, __mmask16,
                      const uint8_t*);
  static constexpr Fn kTiles[kTileRows] = {GroupRows<kNvfp4, 1>, GroupRows<kNvfp4, 2>, GroupRows<kNvfp4, 3>,
                                           GroupRows<kNvfp4, 4>, GroupRows<kNvfp4, 5>, GroupRows<kNvfp4, 6>,
                                           GroupRows<kNvfp4, 7>, GroupRows<kNvfp4, 8>};
  for (int64_t g = g_begin; g < g_end; ++g) {
    const int64_t first = g * kPackedGroupRows;
    const int64_t lo = row_begin > first ? row_begin - first : 0;
    const int64_t hi = row_end - first < kPackedGroupRows ? row_end - first : kPackedGroupRows;
    const __mmask16 mask = static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
    const uint8_t* group = packed + g * group_bytes;
    // The next group is requested while the first tile passes over this one (the later tiles
    // find this one in L1 / L2).
    const uint8_t* next = g + 1 < g_end ? group + group_bytes : nullptr;
    for (int64_t i = 0; i < m; i += kTileRows) {
      const int rows = static_cast<int>(m - i < kTileRows ? m - i : kTileRows);
      kTiles[rows - 1](k, group, act + i * act_stride, act_stride, records, global_scale, y + i * ldy + first, ldy,
                       mask, i == 0 ? next : nullptr);
    }
  }
}

}  // namespace

void PackedMxfp4GemmAvx512(int64_t k, const uint8_t* packed, const uint8_t* act, int64_t act_stride, int64_t m,
                           float global_scale, int64_t row_begin, int64_t row_end, float* y, int64_t ldy) {
  PackedGemm<false>(k, packed, act, act_stride, m, global_scale, row_begin, row_end, y, ldy);
}

void PackedNvfp4GemmAvx512(int64_t k, const uint8_t* packed, const uint8_t* act, int64_t act_stride, int64_t m,
                           float global_scale, int64_t row_begin, int64_t row_end, float* y, int64_t ldy) {
  PackedGemm<true>(k, packed, act, act_stride, m, global_scale, row_begin, row_end, y, ldy);
}

}  // namespace ember::quant
