// The packed GEMMs (gguf_packed.h) with AVX-512 VNNI. Helpers have internal linkage and the
// inline helpers of gguf_blocks.h / gguf_dot.h are not called (see gguf_blocks.h for why).
#include "quant/gguf_packed.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "quant/gguf_packed_operands.h"
#include "quant/matmul_tiling.h"

namespace ember::quant {
namespace {

// The all-ones maskz forms compile to the plain instructions; GCC 12's unmasked forms pass an
// "undefined" vector that trips -Wmaybe-uninitialized once inlined.
constexpr __mmask16 kAll = 0xffff;
constexpr int kTileRows = 4;  // activation rows per pass over a group's blocks
constexpr int64_t kQ8_0BlockBytes = 34;

// The packed matrix is one sequential stream per thread: each block requests the lines
// kPrefetchBytes ahead of it, a few per block, rather than a group's worth in one burst before the
// group (a burst of prefetches fills the line-fill buffers and stalls the loads behind it, as
// matmul_tiling.h says of the row dots).
void PrefetchAhead(const uint8_t* p, int64_t bytes) {
  for (int64_t offset = 0; offset < bytes; offset += 64) _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes + offset), _MM_HINT_T0);
}

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

// isum + sum_e q[j] byte 4c + e times a[4j + e] over the 4 * kSteps activation bytes at a, per
// row c.
template <int kSteps = 8>
__m512i Dot32(__m512i isum, const __m512i* q, const uint8_t* a) {
  for (int j = 0; j < kSteps; ++j) isum = _mm512_dpbusd_epi32(isum, q[j], _mm512_set1_epi32(Load32(a + 4 * j)));
  return isum;
}

// Adds 16 to the bytes of q[j] whose bit is set in the j-th u64 mask at p (the fifth bit of
// Q5_0 / Q5_1 / Q5_K).
void AddFifthBits(const uint8_t* p, __m512i q[8]) {
  const __m512i sixteen = _mm512_set1_epi8(16);
  for (int j = 0; j < 8; ++j) {
    uint64_t high;
    std::memcpy(&high, p + 8 * j, sizeof(high));
    q[j] = _mm512_mask_add_epi8(q[j], static_cast<__mmask64>(high), q[j], sixteen);
  }
}

enum class Legacy { kQ4_0, kQ4_1, kQ5_0, kQ5_1 };

// kRows activation rows against one 16-row group of a 32-element type: out[r * ldy + c] for
// c < cols. Q4_0 / Q5_0 fold their offset (8, 16) into one FMA at the end; Q4_1 / Q5_1 keep the
// minimum's products in a second chain (gguf_packed.h has each sequence).
template <Legacy kType, int kRows>
void TileLegacy(int64_t nb, const uint8_t* group, const uint8_t* const* rows, float* y, int64_t ldy, int cols) {
  constexpr bool kMin = kType == Legacy::kQ4_1 || kType == Legacy::kQ5_1;
  constexpr bool kFifthBit = kType == Legacy::kQ5_0 || kType == Legacy::kQ5_1;
  constexpr int64_t kBlockBytes = kType == Legacy::kQ4_0   ? kPackedQ4_0BlockBytes
                                  : kType == Legacy::kQ4_1 ? kPackedQ4_1BlockBytes
                                  : kType == Legacy::kQ5_0 ? kPackedQ5_0BlockBytes
                                                           : kPackedQ5_1BlockBytes;
  constexpr int kNibbles = kMin ? 64 : 32;  // after d (and m)
  const uint8_t* sums[kRows];
  for (int r = 0; r < kRows; ++r) sums[r] = BlockSums(rows[r], nb);
  // acc: the d * da * (q . a) chain; second: d * (da * sum(a)) (Q4_0, Q5_0) or m * (da * sum(a)).
  __m512 acc[kRows], second[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = second[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = group + b * kBlockBytes;
    PrefetchAhead(block, kBlockBytes);
    const __m512 d = _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block)));
    const __m512 dm =
        kMin ? _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 32))) : d;
    __m512i q[8];
    DecodeNibbles(block + kNibbles, q);
    if constexpr (kFifthBit) AddFifthBits(block + kNibbles + 256, q);
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* a = rows[r] + b * kQ8_0BlockBytes + 2;  // the block's 32 quants
      const __m512i isum = Dot32(_mm512_setzero_si512(), q, a);
      const uint8_t* s = sums[r] + 8 * b;  // Q8_0BlockSum {da, da * sum(a)}
      acc[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, isum), _mm512_mul_ps(d, _mm512_set1_ps(LoadF32(s))), acc[r]);
      second[r] = _mm512_fmadd_ps(dm, _mm512_set1_ps(LoadF32(s + 4)), second[r]);
    }
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1);
  for (int r = 0; r < kRows; ++r) {
    const __m512 offset = _mm512_set1_ps(kType == Legacy::kQ4_0 ? -8.0f : -16.0f);
    const __m512 out = kMin ? _mm512_add_ps(acc[r], second[r]) : _mm512_fmadd_ps(second[r], offset, acc[r]);
    _mm512_mask_storeu_ps(y + r * ldy, mask, out);
  }
}

// Q8_0: the weights are stored as q + 128 (unsigned), and each activation row carries
// -128 * sum(a) per block (ExtendQ8_0Activation) as the integer dot's starting value, so the
// integer is exactly q . a.
template <int kRows>
void TileQ8_0(int64_t nb, const uint8_t* group, const uint8_t* const* rows, float* y, int64_t ldy, int cols) {
  const uint8_t* sums[kRows];
  const uint8_t* offsets[kRows];
  for (int r = 0; r < kRows; ++r) {
    sums[r] = BlockSums(rows[r], nb);
    offsets[r] = sums[r] + 8 * nb;
  }
  __m512 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = group + b * kPackedQ8_0BlockBytes;
    PrefetchAhead(block, kPackedQ8_0BlockBytes);
    const __m512 d = _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block)));
    __m512i q[8];
    for (int j = 0; j < 8; ++j) q[j] = _mm512_loadu_si512(block + 32 + 64 * j);
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* a = rows[r] + b * kQ8_0BlockBytes + 2;
      const __m512i isum = Dot32(_mm512_set1_epi32(Load32(offsets[r] + 4 * b)), q, a);
      acc[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, isum),
                               _mm512_mul_ps(d, _mm512_set1_ps(LoadF32(sums[r] + 8 * b))), acc[r]);
    }
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1);
  for (int r = 0; r < kRows; ++r) _mm512_mask_storeu_ps(y + r * ldy, mask, acc[r]);
}

constexpr int64_t kQ8_KBlockBytes = 292;  // f32 d, 256 quants, 16 int16 bsums

// Q4_K, and Q5_K (kFifthBit: Q4_K's layout followed by the sub-blocks' fifth-bit masks).
template <bool kFifthBit, int kRows>
void TileQ45_K(int64_t nb, const uint8_t* group, const uint8_t* const* rows, float* y, int64_t ldy, int cols) {
  __m512 acc[kRows], acc_min[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = acc_min[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    constexpr int64_t kBlockBytes = kFifthBit ? kPackedQ5_KBlockBytes : kPackedQ4_KBlockBytes;
    const uint8_t* block = group + b * kBlockBytes;
    __m512i sumi[kRows], summin[kRows];
    for (int r = 0; r < kRows; ++r) sumi[r] = summin[r] = _mm512_setzero_si512();
    for (int sb = 0; sb < 8; ++sb) {
      PrefetchAhead(block + sb * kBlockBytes / 8, kBlockBytes / 8);
      const __m512i scale = _mm512_maskz_cvtepu8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 64 + 16 * sb)));
      const __m512i min = _mm512_maskz_cvtepu8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 192 + 16 * sb)));
      const __m512i min_pair = _mm512_or_si512(min, _mm512_maskz_slli_epi32(kAll, min, 16));  // (m, m) as int16s
      __m512i q[8];
      DecodeNibbles(block + 320 + 256 * sb, q);
      if constexpr (kFifthBit) AddFifthBits(block + kPackedQ4_KBlockBytes + 64 * sb, q);
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* a = rows[r] + b * kQ8_KBlockBytes;
        sumi[r] = _mm512_add_epi32(sumi[r], _mm512_mullo_epi32(Dot32(_mm512_setzero_si512(), q, a + 4 + 32 * sb), scale));
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

// The 6-bit q of a Q6_K sub-block (384 bytes at sub): the low nibbles decode as Q4_K's and the top
// two bits are merged in (a shift and one vpternlogd per 4-byte step).
void DecodeQ6_KSubBlock(const uint8_t* sub, __m512i q[8]) {
  const __m512i top_mask = _mm512_set1_epi8(0x30);
  DecodeNibbles(sub, q);
  for (int u = 0; u < 2; ++u) {
    const __m512i top = _mm512_loadu_si512(sub + 256 + 64 * u);
    // Bits 2s, 2s + 1 of each byte to bits 4, 5 (16-bit shifts: the 0x30 mask drops what
    // crosses between bytes).
    const __m512i shifted[4] = {_mm512_slli_epi16(top, 4), _mm512_slli_epi16(top, 2), top, _mm512_srli_epi16(top, 2)};
    for (int s = 0; s < 4; ++s) q[4 * u + s] = _mm512_ternarylogic_epi32(q[4 * u + s], shifted[s], top_mask, 0xf8);
  }
}

// Q6_K: per 32-element sub-block the low nibbles decode as Q4_K's and the top two bits are
// merged in (a shift and one vpternlogd per 4-byte step); two 16-element groups per sub-block
// with their own scales. The -32 offset is sum_g sc_g * bsums_g, accumulated by vpdpwssd from
// the (sc_2p, sc_2p+1) pairs, and subtracted as an integer per super-block.
template <int kRows>
void TileQ6_K(int64_t nb, const uint8_t* group, const uint8_t* const* rows, float* y, int64_t ldy, int cols) {
  __m512 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = group + b * kPackedQ6_KBlockBytes;
    __m512i sumi[kRows], offset[kRows];
    for (int r = 0; r < kRows; ++r) sumi[r] = offset[r] = _mm512_setzero_si512();
    for (int sb = 0; sb < 8; ++sb) {
      PrefetchAhead(block + sb * kPackedQ6_KBlockBytes / 8, kPackedQ6_KBlockBytes / 8);
      // Lane c: int16 (sc_2sb, sc_2sb+1); and each of them sign-extended to 32 bits.
      const __m512i pair = _mm512_maskz_cvtepi8_epi16(~__mmask32{0}, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 32 + 32 * sb)));
      const __m512i scale_lo = _mm512_maskz_srai_epi32(kAll, _mm512_maskz_slli_epi32(kAll, pair, 16), 16);
      const __m512i scale_hi = _mm512_maskz_srai_epi32(kAll, pair, 16);
      const uint8_t* sub = block + 288 + 384 * sb;
      __m512i q[8];
      DecodeQ6_KSubBlock(sub, q);
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* a = rows[r] + b * kQ8_KBlockBytes;
        const __m512i lo = Dot32<4>(_mm512_setzero_si512(), q, a + 4 + 32 * sb);
        const __m512i hi = Dot32<4>(_mm512_setzero_si512(), q + 4, a + 4 + 32 * sb + 16);
        sumi[r] = _mm512_add_epi32(sumi[r], _mm512_add_epi32(_mm512_mullo_epi32(lo, scale_lo), _mm512_mullo_epi32(hi, scale_hi)));
        // sc_2sb * bsums[2 sb] + sc_2sb+1 * bsums[2 sb + 1].
        offset[r] = _mm512_dpwssd_epi32(offset[r], pair, _mm512_set1_epi32(Load32(a + 260 + 4 * sb)));
      }
    }
    const __m512 d = _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block)));
    for (int r = 0; r < kRows; ++r) {
      const __m512 da = _mm512_set1_ps(LoadF32(rows[r] + b * kQ8_KBlockBytes));
      const __m512i total = _mm512_sub_epi32(sumi[r], _mm512_maskz_slli_epi32(kAll, offset[r], 5));
      acc[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, total), _mm512_mul_ps(d, da), acc[r]);
    }
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1);
  for (int r = 0; r < kRows; ++r) _mm512_mask_storeu_ps(y + r * ldy, mask, acc[r]);
}

// Each type's tiles as one class template argument: Tiles::template kFor<r> runs r rows.
using TileFn = void (*)(int64_t nb, const uint8_t* group, const uint8_t* const* rows, float* y, int64_t ldy,
                        int cols);
template <Legacy kType>
struct LegacyTiles {
  template <int kRows>
  static constexpr TileFn kFor = &TileLegacy<kType, kRows>;
};
struct Q8_0Tiles {
  template <int kRows>
  static constexpr TileFn kFor = &TileQ8_0<kRows>;
};
template <bool kFifthBit>
struct Q45_KTiles {
  template <int kRows>
  static constexpr TileFn kFor = &TileQ45_K<kFifthBit, kRows>;
};
struct Q6_KTiles {
  template <int kRows>
  static constexpr TileFn kFor = &TileQ6_K<kRows>;
};

// Groups [group_begin, group_end): kTileRows activation rows per pass over a group's blocks,
// then the 1-3 rows left in one pass (a verification step of 5-7 tokens is one 4-row pass and
// one more, not four more), each row's sequence the same whichever tile holds it.
template <class Tiles>
void Groups(const uint8_t* packed, int64_t n, int64_t nb, int64_t block_bytes, int64_t group_begin,
            int64_t group_end, const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  static_assert(kTileRows == 4);
  constexpr TileFn kTiles[kTileRows] = {Tiles::template kFor<1>, Tiles::template kFor<2>, Tiles::template kFor<3>,
                                        Tiles::template kFor<4>};
  const int64_t group_bytes = nb * block_bytes;
  for (int64_t g = group_begin; g < group_end; ++g) {
    const uint8_t* group = packed + g * group_bytes;
    const int cols = static_cast<int>(std::min<int64_t>(kPackRows, n - g * kPackRows));
    float* out = y + g * kPackRows;
    const uint8_t* rows[kTileRows];
    for (int64_t i = 0; i < m; i += kTileRows) {
      const int tile = static_cast<int>(std::min<int64_t>(kTileRows, m - i));
      for (int r = 0; r < tile; ++r) rows[r] = act + (i + r) * act_bytes;
      kTiles[tile - 1](nb, group, rows, out + i * n, n, cols);
    }
  }
}

// The tile GEMM's operands (gguf_packed_operands.h) of a 32-element type's group: the decode of
// TileLegacy / TileQ8_0, stored instead of multiplied.
template <Legacy kType, bool kQ8_0 = false>
void UnpackLegacy(const uint8_t* group, int64_t nb, uint8_t* operands) {
  constexpr bool kMin = kType == Legacy::kQ4_1 || kType == Legacy::kQ5_1;
  constexpr bool kFifthBit = kType == Legacy::kQ5_0 || kType == Legacy::kQ5_1;
  constexpr int64_t kBlockBytes = kQ8_0                    ? kPackedQ8_0BlockBytes
                                  : kType == Legacy::kQ4_0 ? kPackedQ4_0BlockBytes
                                  : kType == Legacy::kQ4_1 ? kPackedQ4_1BlockBytes
                                  : kType == Legacy::kQ5_0 ? kPackedQ5_0BlockBytes
                                                           : kPackedQ5_1BlockBytes;
  constexpr int kNibbles = kMin ? 64 : 32;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = group + b * kBlockBytes;
    uint8_t* out = operands + b * kLegacyOperandBytes;
    PrefetchAhead(block, kBlockBytes);
    __m512i q[8];
    if constexpr (kQ8_0) {
      // Back from q + 128 to the file's signed q (the tiles have a signed x signed product).
      const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
      for (int j = 0; j < 8; ++j) q[j] = _mm512_xor_si512(_mm512_loadu_si512(block + 32 + 64 * j), flip);
    } else {
      DecodeNibbles(block + kNibbles, q);
      if constexpr (kFifthBit) AddFifthBits(block + kNibbles + 256, q);
    }
    for (int j = 0; j < 8; ++j) _mm512_store_si512(out + 64 * j, q[j]);
    const __m512 d = _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block)));
    const __m512 dm =
        kMin ? _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 32))) : d;
    _mm512_store_ps(out + 512, d);
    _mm512_store_ps(out + 576, dm);
  }
}

// Q4_K / Q5_K: TileQ45_K's decode and its widened scales and (m, m) pairs.
template <bool kFifthBit>
void UnpackQ45_K(const uint8_t* group, int64_t nb, uint8_t* operands) {
  constexpr int64_t kBlockBytes = kFifthBit ? kPackedQ5_KBlockBytes : kPackedQ4_KBlockBytes;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = group + b * kBlockBytes;
    uint8_t* out = operands + b * kQ45_KOperandBytes;
    for (int sb = 0; sb < 8; ++sb) {
      PrefetchAhead(block + sb * kBlockBytes / 8, kBlockBytes / 8);
      const __m512i scale = _mm512_maskz_cvtepu8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 64 + 16 * sb)));
      const __m512i min = _mm512_maskz_cvtepu8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 192 + 16 * sb)));
      _mm512_store_si512(out + 4224 + 64 * sb, scale);
      _mm512_store_si512(out + 4736 + 64 * sb, _mm512_or_si512(min, _mm512_maskz_slli_epi32(kAll, min, 16)));
      __m512i q[8];
      DecodeNibbles(block + 320 + 256 * sb, q);
      if constexpr (kFifthBit) AddFifthBits(block + kPackedQ4_KBlockBytes + 64 * sb, q);
      for (int j = 0; j < 8; ++j) _mm512_store_si512(out + kBTileBytes * sb + 64 * j, q[j]);
    }
    _mm512_store_ps(out + 4096, _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block))));
    _mm512_store_ps(out + 4160,
                    _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 32))));
  }
}

// Q6_K: TileQ6_K's decode, its two int32 scales per sub-block and the (sc_2s, sc_2s+1) pairs.
void UnpackQ6_K(const uint8_t* group, int64_t nb, uint8_t* operands) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = group + b * kPackedQ6_KBlockBytes;
    uint8_t* out = operands + b * kQ6_KOperandBytes;
    for (int sb = 0; sb < 8; ++sb) {
      PrefetchAhead(block + sb * kPackedQ6_KBlockBytes / 8, kPackedQ6_KBlockBytes / 8);
      const __m512i pair = _mm512_maskz_cvtepi8_epi16(~__mmask32{0}, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 32 + 32 * sb)));
      _mm512_store_si512(out + 4160 + 64 * sb, _mm512_maskz_srai_epi32(kAll, _mm512_maskz_slli_epi32(kAll, pair, 16), 16));
      _mm512_store_si512(out + 4672 + 64 * sb, _mm512_maskz_srai_epi32(kAll, pair, 16));
      _mm512_store_si512(out + 5184 + 64 * sb, pair);
      __m512i q[8];
      DecodeQ6_KSubBlock(block + 288 + 384 * sb, q);
      for (int j = 0; j < 8; ++j) _mm512_store_si512(out + kBTileBytes * sb + 64 * j, q[j]);
    }
    _mm512_store_ps(out + 4096, _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block))));
  }
}

}  // namespace

void UnpackGroupQ4_0Avx512(const uint8_t* group, int64_t nb, uint8_t* operands) {
  UnpackLegacy<Legacy::kQ4_0>(group, nb, operands);
}
void UnpackGroupQ4_1Avx512(const uint8_t* group, int64_t nb, uint8_t* operands) {
  UnpackLegacy<Legacy::kQ4_1>(group, nb, operands);
}
void UnpackGroupQ5_0Avx512(const uint8_t* group, int64_t nb, uint8_t* operands) {
  UnpackLegacy<Legacy::kQ5_0>(group, nb, operands);
}
void UnpackGroupQ5_1Avx512(const uint8_t* group, int64_t nb, uint8_t* operands) {
  UnpackLegacy<Legacy::kQ5_1>(group, nb, operands);
}
// Q8_0 has no minimum: its Legacy argument only selects d as the second scale row.
void UnpackGroupQ8_0Avx512(const uint8_t* group, int64_t nb, uint8_t* operands) {
  UnpackLegacy<Legacy::kQ4_0, true>(group, nb, operands);
}
void UnpackGroupQ4_KAvx512(const uint8_t* group, int64_t nb, uint8_t* operands) {
  UnpackQ45_K<false>(group, nb, operands);
}
void UnpackGroupQ5_KAvx512(const uint8_t* group, int64_t nb, uint8_t* operands) {
  UnpackQ45_K<true>(group, nb, operands);
}
void UnpackGroupQ6_KAvx512(const uint8_t* group, int64_t nb, uint8_t* operands) { UnpackQ6_K(group, nb, operands); }

void PackedRowsQ4_0Avx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  Groups<LegacyTiles<Legacy::kQ4_0>>(
      packed, n, k / 32, kPackedQ4_0BlockBytes, group_begin, group_end, act, m, act_bytes, y);
}

void PackedRowsQ4_1Avx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  Groups<LegacyTiles<Legacy::kQ4_1>>(
      packed, n, k / 32, kPackedQ4_1BlockBytes, group_begin, group_end, act, m, act_bytes, y);
}

void PackedRowsQ5_0Avx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  Groups<LegacyTiles<Legacy::kQ5_0>>(
      packed, n, k / 32, kPackedQ5_0BlockBytes, group_begin, group_end, act, m, act_bytes, y);
}

void PackedRowsQ5_1Avx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  Groups<LegacyTiles<Legacy::kQ5_1>>(
      packed, n, k / 32, kPackedQ5_1BlockBytes, group_begin, group_end, act, m, act_bytes, y);
}

void PackedRowsQ8_0Avx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  Groups<Q8_0Tiles>(packed, n, k / 32, kPackedQ8_0BlockBytes, group_begin, group_end, act,
                                           m, act_bytes, y);
}

void PackedRowsQ4_KAvx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  Groups<Q45_KTiles<false>>(packed, n, k / 256, kPackedQ4_KBlockBytes, group_begin,
                                                           group_end, act, m, act_bytes, y);
}

void PackedRowsQ5_KAvx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  Groups<Q45_KTiles<true>>(packed, n, k / 256, kPackedQ5_KBlockBytes, group_begin,
                                                         group_end, act, m, act_bytes, y);
}

void PackedRowsQ6_KAvx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  Groups<Q6_KTiles>(packed, n, k / 256, kPackedQ6_KBlockBytes, group_begin, group_end, act,
                                           m, act_bytes, y);
}

}  // namespace ember::quant
