// The packed Q5_0 and Q4_K GEMMs (gguf_packed.h) with AVX-512 VNNI. Helpers have internal linkage and the
// inline helpers of gguf_blocks.h / gguf_dot.h are not called (see gguf_blocks.h for why).
#include "quant/gguf_packed.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace ember::quant {
namespace {

// The all-ones maskz forms compile to the plain instructions; GCC 12's unmasked forms pass an
// "undefined" vector that trips -Wmaybe-uninitialized once inlined.
constexpr __mmask16 kAll = 0xffff;
constexpr int kTileRows = 4;  // activation rows per pass over a group's blocks
constexpr int64_t kQ8_0BlockBytes = 34;
constexpr float kOffset = -16.0f;  // Q5_0 value: d * (q - 16)

// A Q8_0 activation row's Q8_0BlockSum array (gguf_dot.h Q8_0BlockSumsOffset).
const uint8_t* BlockSums(const uint8_t* row, int64_t nb) { return row + (nb * kQ8_0BlockBytes + 7) / 8 * 8; }

int32_t Load32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
float LoadF32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// The four 64-byte vectors at p (Q5_0's nibble layout) as eight vectors of 16 rows x 4 bytes.
void DecodeNibbles(const uint8_t* p, __m512i q[8]) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (int t = 0; t < 4; ++t) {
    const __m512i v = _mm512_loadu_si512(p + 64 * t);
    q[2 * t] = _mm512_and_si512(v, low4);
    q[2 * t + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
  }
}

// sum_e q[j] byte 4c + e times a[4j + e] over the 32 activation bytes at a, per row c.
__m512i Dot32(const __m512i q[8], const uint8_t* a) {
  __m512i isum = _mm512_setzero_si512();
  for (int j = 0; j < 8; ++j) isum = _mm512_dpbusd_epi32(isum, q[j], _mm512_set1_epi32(Load32(a + 4 * j)));
  return isum;
}

// kRows activation rows against one 16-row group: out[r * ldy + c] for c < cols.
template <int kRows>
void TileQ5_0(int64_t nb, const uint8_t* group, const uint8_t* const* rows, float* y, int64_t ldy, int cols) {
  const uint8_t* sums[kRows];
  for (int r = 0; r < kRows; ++r) sums[r] = BlockSums(rows[r], nb);
  __m512 acc[kRows], shift[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = shift[r] = _mm512_setzero_ps();
  const __m512i sixteen = _mm512_set1_epi8(16);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = group + b * kPackedBlockBytes;
    const __m512 d = _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block)));
    __m512i q[8];
    DecodeNibbles(block + 32, q);
    for (int j = 0; j < 8; ++j) {
      uint64_t high;
      std::memcpy(&high, block + 288 + 8 * j, sizeof(high));
      q[j] = _mm512_mask_add_epi8(q[j], static_cast<__mmask64>(high), q[j], sixteen);
    }
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* a = rows[r] + b * kQ8_0BlockBytes + 2;  // the block's 32 quants
      const __m512i isum = Dot32(q, a);
      const uint8_t* s = sums[r] + 8 * b;  // Q8_0BlockSum {da, da * sum(a)}
      acc[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, isum), _mm512_mul_ps(d, _mm512_set1_ps(LoadF32(s))), acc[r]);
      shift[r] = _mm512_fmadd_ps(d, _mm512_set1_ps(LoadF32(s + 4)), shift[r]);
    }
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1);
  for (int r = 0; r < kRows; ++r) {
    _mm512_mask_storeu_ps(y + r * ldy, mask, _mm512_fmadd_ps(shift[r], _mm512_set1_ps(kOffset), acc[r]));
  }
}

constexpr int64_t kQ8_KBlockBytes = 292;  // f32 d, 256 quants, 16 int16 bsums

template <int kRows>
void TileQ4_K(int64_t nb, const uint8_t* group, const uint8_t* const* rows, float* y, int64_t ldy, int cols) {
  __m512 acc[kRows], acc_min[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = acc_min[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = group + b * kPackedQ4_KBlockBytes;
    __m512i sumi[kRows], summin[kRows];
    for (int r = 0; r < kRows; ++r) sumi[r] = summin[r] = _mm512_setzero_si512();
    for (int sb = 0; sb < 8; ++sb) {
      const __m512i scale = _mm512_maskz_cvtepu8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 64 + 16 * sb)));
      const __m512i min = _mm512_maskz_cvtepu8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 192 + 16 * sb)));
      const __m512i min_pair = _mm512_or_si512(min, _mm512_maskz_slli_epi32(kAll, min, 16));  // (m, m) as int16s
      __m512i q[8];
      DecodeNibbles(block + 320 + 256 * sb, q);
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* a = rows[r] + b * kQ8_KBlockBytes;
        sumi[r] = _mm512_add_epi32(sumi[r], _mm512_mullo_epi32(Dot32(q, a + 4 + 32 * sb), scale));
        // m * bsums[2 sb] + m * bsums[2 sb + 1]: the sub-block's 32 activation quants summed.
        summin[r] = _mm512_dpwssd_epi32(summin[r], min_pair, _mm512_set1_epi32(Load32(a + 260 + 4 * sb)));
      }
    }
    const __m512 d = _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block)));
    const __m512 dmin = _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 32)));
    for (int r = 0; r < kRows; ++r) {
      const __m512 da = _mm512_set1_ps(LoadF32(rows[r] + b * kQ8_KBlockBytes));
      acc[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, sumi[r]), _mm512_mul_ps(d, da), acc[r]);
      acc_min[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, summin[r]), _mm512_mul_ps(dmin, da), acc_min[r]);
    }
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1);
  for (int r = 0; r < kRows; ++r) _mm512_mask_storeu_ps(y + r * ldy, mask, _mm512_sub_ps(acc[r], acc_min[r]));
}

// Groups [group_begin, group_end): kTileRows activation rows per pass over a group's blocks,
// then one at a time; the next group is prefetched while this one is reduced m times.
template <auto kTile, auto kTileOne>
void Groups(const uint8_t* packed, int64_t n, int64_t nb, int64_t block_bytes, int64_t group_begin,
            int64_t group_end, const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  const int64_t group_bytes = nb * block_bytes;
  for (int64_t g = group_begin; g < group_end; ++g) {
    const uint8_t* group = packed + g * group_bytes;
    if (g + 1 < group_end) {
      for (int64_t offset = 0; offset < group_bytes; offset += 64) __builtin_prefetch(group + group_bytes + offset);
    }
    const int cols = static_cast<int>(std::min<int64_t>(kPackRows, n - g * kPackRows));
    float* out = y + g * kPackRows;
    int64_t i = 0;
    const uint8_t* rows[kTileRows];
    for (; i + kTileRows <= m; i += kTileRows) {
      for (int r = 0; r < kTileRows; ++r) rows[r] = act + (i + r) * act_bytes;
      kTile(nb, group, rows, out + i * n, n, cols);
    }
    for (; i < m; ++i) {
      rows[0] = act + i * act_bytes;
      kTileOne(nb, group, rows, out + i * n, n, cols);
    }
  }
}

}  // namespace

void PackedRowsQ5_0Avx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  Groups<TileQ5_0<kTileRows>, TileQ5_0<1>>(packed, n, k / 32, kPackedBlockBytes, group_begin, group_end, act, m,
                                           act_bytes, y);
}

void PackedRowsQ4_KAvx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  Groups<TileQ4_K<kTileRows>, TileQ4_K<1>>(packed, n, k / 256, kPackedQ4_KBlockBytes, group_begin, group_end, act,
                                           m, act_bytes, y);
}

}  // namespace ember::quant
