// The packed GEMMs (gguf_packed.h) of the 32-element types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) with
// AVX2 + FMA + F16C, over the same packed copy as the AVX-512 tiles and with the same bits.
//
// Without them an AVX2 host multiplied every (weight row, activation row) pair with the row dot
// (~17 vector uops per 32 multiply-adds for Q4_1), so a step of n tokens cost nearly n one-token
// steps (SmolLM2-135M Q4_1 on a Zen 3 EPYC: 6.5 ms for one token, +5.5 ms per further token):
// prefill ran at decode speed per token and speculative verification could never pay. Here a
// 16-row group is two halves of eight rows, lane c of a ymm belonging to output row 8h + c: the
// 32 bytes of a half of each 64-byte vector of the layout are four weight bytes per row, which
// pmaddubsw multiplies by four broadcast activation bytes (pairs into int16) and pmaddwd by ones
// widens to int32, the AVX2 form of the AVX-512 tiles' vpdpbusd. The scale work (one conversion,
// one product, the FMAs) covers eight outputs at once.
//
// Same bits as the AVX-512 tiles: per (activation row, output row) the integer of every block is
// the exact q . a (int16 partial sums are added only where they cannot overflow: four-bit quants
// eight pmaddubsw results, five-bit four; Q8_0 uses the sign trick on the file's signed q instead
// of the q + 128 bytes, whose unsigned products could saturate pmaddubsw's int16 pairs), and the
// f32 operations per block are the AVX-512 tile's, in its order, lane by lane.
//
// Helpers have internal linkage and the inline helpers of gguf_blocks.h / gguf_dot.h are not
// called (see gguf_blocks.h for why).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "quant/gguf_packed.h"
#include "quant/matmul_tiling.h"

namespace ember::quant {
namespace {

constexpr int kTileRows = 4;  // activation rows per pass over a half-group's blocks
constexpr int kHalfRows = 8;  // output rows per ymm
constexpr int64_t kQ8_0BlockBytes = 34;

void PrefetchAhead(const uint8_t* p, int64_t bytes) {
  for (int64_t offset = 0; offset < bytes; offset += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes + offset), _MM_HINT_T0);
  }
}

// A Q8_0 activation row's Q8_0BlockSum array (gguf_dot.h Q8_0BlockSumsOffset).
const uint8_t* BlockSums(const uint8_t* row, int64_t nb) { return row + (nb * kQ8_0BlockBytes + 7) / 8 * 8; }

float LoadF32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

__m256i Broadcast32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

__m256i Load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Eight f16 scales (one per row of the half) as f32.
__m256 LoadScales(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// 16 where bit i of the 32 bits at p is set, else 0, for byte i: the fifth bits of a half's rows
// (bits 32h .. 32h + 31 of one of the layout's u64 masks).
__m256i FifthBits(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  // Byte i of the broadcast holds source byte i / 8 (pshufb works within 128-bit lanes, and every
  // lane of the broadcast holds all four bytes).
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(bits)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                           3, 3, 3, 3, 3, 3, 3));
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select), _mm256_set1_epi8(16));
}

enum class Legacy { kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0 };

template <Legacy kType>
constexpr int64_t BlockBytes() {
  return kType == Legacy::kQ4_0   ? kPackedQ4_0BlockBytes
         : kType == Legacy::kQ4_1 ? kPackedQ4_1BlockBytes
         : kType == Legacy::kQ5_0 ? kPackedQ5_0BlockBytes
         : kType == Legacy::kQ5_1 ? kPackedQ5_1BlockBytes
                                  : kPackedQ8_0BlockBytes;
}

// kRows activation rows against half h (rows 8h .. 8h + 7) of one 16-row group:
// out[r * ldy + c] for c < cols. `prefetch`: the first pass over the group, which streams it from
// memory (it reads a part of every line of each block: 32 bytes of each 64-byte vector); later
// passes, the other half and further activation rows, find it in cache.
template <Legacy kType, int kRows>
void TileHalf(int64_t nb, const uint8_t* group, int h, const uint8_t* const* rows, float* y, int64_t ldy, int cols,
              bool prefetch) {
  constexpr bool kQ8 = kType == Legacy::kQ8_0;
  constexpr bool kMin = kType == Legacy::kQ4_1 || kType == Legacy::kQ5_1;
  constexpr bool kFifthBit = kType == Legacy::kQ5_0 || kType == Legacy::kQ5_1;
  constexpr int64_t kBlockBytes = BlockBytes<kType>();
  constexpr int kQuants = kQ8 ? 32 : kMin ? 64 : 32;  // where the quant vectors start, after d (and m)
  // pmaddubsw results summed as int16 before widening: |pair| <= 2 * 15 * 127 for four-bit quants
  // (eight fit in int16), 2 * 31 * 127 for five-bit ones (four); Q8_0's 2 * 128 * 127 only one.
  constexpr int kPerWiden = kQ8 ? 1 : kFifthBit ? 4 : 8;
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const uint8_t* sums[kRows];
  for (int r = 0; r < kRows; ++r) sums[r] = BlockSums(rows[r], nb);
  // acc: the d * da * (q . a) chain; second: d * (da * sum(a)) (Q4_0, Q5_0) or m * (da * sum(a)).
  __m256 acc[kRows], second[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = second[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = group + b * kBlockBytes;
    if (prefetch) PrefetchAhead(block, kBlockBytes);
    __m256i isum[kRows], part[kRows];
    for (int r = 0; r < kRows; ++r) isum[r] = part[r] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      // Step j: elements 4j .. 4j + 3 of each row (the layout's nibble vectors hold steps 2t and
      // 2t + 1 as the low and high nibbles of vector t; Q8_0's vector j is step j).
      __m256i q, sign;
      if constexpr (kQ8) {
        const __m256i signed_q = _mm256_xor_si256(Load256(block + kQuants + 64 * j + 32 * h), _mm256_set1_epi8(-128));
        q = _mm256_sign_epi8(signed_q, signed_q);  // |q|: pmaddubsw's unsigned side
        sign = signed_q;
      } else {
        const __m256i v = Load256(block + kQuants + 64 * (j / 2) + 32 * h);
        q = _mm256_and_si256(j % 2 == 0 ? v : _mm256_srli_epi16(v, 4), low4);
        if constexpr (kFifthBit) q = _mm256_or_si256(q, FifthBits(block + kQuants + 256 + 8 * j + 4 * h));
      }
      for (int r = 0; r < kRows; ++r) {
        __m256i a = Broadcast32(rows[r] + b * kQ8_0BlockBytes + 2 + 4 * j);
        if constexpr (kQ8) a = _mm256_sign_epi8(a, sign);
        part[r] = _mm256_add_epi16(part[r], _mm256_maddubs_epi16(q, a));
        if ((j + 1) % kPerWiden == 0) {
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(part[r], ones));
          part[r] = _mm256_setzero_si256();
        }
      }
    }
    const __m256 d = LoadScales(block + 16 * h);
    const __m256 dm = kMin ? LoadScales(block + 32 + 16 * h) : d;
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* s = sums[r] + 8 * b;  // Q8_0BlockSum {da, da * sum(a)}
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_mul_ps(d, _mm256_set1_ps(LoadF32(s))), acc[r]);
      if constexpr (!kQ8) second[r] = _mm256_fmadd_ps(dm, _mm256_set1_ps(LoadF32(s + 4)), second[r]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    const __m256 offset = _mm256_set1_ps(kType == Legacy::kQ4_0 ? -8.0f : -16.0f);
    const __m256 out = kQ8     ? acc[r]
                       : kMin ? _mm256_add_ps(acc[r], second[r])
                              : _mm256_fmadd_ps(second[r], offset, acc[r]);
    if (cols == kHalfRows) {
      _mm256_storeu_ps(y + r * ldy, out);
    } else {
      alignas(32) float tmp[kHalfRows];
      _mm256_store_ps(tmp, out);
      std::memcpy(y + r * ldy, tmp, static_cast<size_t>(cols) * sizeof(float));
    }
  }
}

using TileFn = void (*)(int64_t nb, const uint8_t* group, int h, const uint8_t* const* rows, float* y, int64_t ldy,
                        int cols, bool prefetch);

// Groups [group_begin, group_end), each as two halves: kTileRows activation rows per pass over a
// half's blocks, then the 1-3 rows left in one pass, each row's sequence the same whichever tile
// holds it.
template <Legacy kType>
void Groups(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end, const uint8_t* act,
            int64_t m, int64_t act_bytes, float* y) {
  static_assert(kTileRows == 4);
  constexpr TileFn kTiles[kTileRows] = {&TileHalf<kType, 1>, &TileHalf<kType, 2>, &TileHalf<kType, 3>,
                                        &TileHalf<kType, 4>};
  const int64_t nb = k / 32;
  const int64_t group_bytes = nb * BlockBytes<kType>();
  for (int64_t g = group_begin; g < group_end; ++g) {
    const uint8_t* group = packed + g * group_bytes;
    const int64_t left = std::min<int64_t>(kPackRows, n - g * kPackRows);
    for (int h = 0; h * kHalfRows < left; ++h) {
      const int cols = static_cast<int>(std::min<int64_t>(kHalfRows, left - h * kHalfRows));
      float* out = y + g * kPackRows + h * kHalfRows;
      const uint8_t* rows[kTileRows];
      for (int64_t i = 0; i < m; i += kTileRows) {
        const int tile = static_cast<int>(std::min<int64_t>(kTileRows, m - i));
        for (int r = 0; r < tile; ++r) rows[r] = act + (i + r) * act_bytes;
        kTiles[tile - 1](nb, group, h, rows, out + i * n, n, cols, h == 0 && i == 0);
      }
    }
  }
}

}  // namespace

void PackedRowsQ4_0Avx2(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                        const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  Groups<Legacy::kQ4_0>(packed, n, k, group_begin, group_end, act, m, act_bytes, y);
}
void PackedRowsQ4_1Avx2(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                        const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  Groups<Legacy::kQ4_1>(packed, n, k, group_begin, group_end, act, m, act_bytes, y);
}
void PackedRowsQ5_0Avx2(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                        const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  Groups<Legacy::kQ5_0>(packed, n, k, group_begin, group_end, act, m, act_bytes, y);
}
void PackedRowsQ5_1Avx2(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                        const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  Groups<Legacy::kQ5_1>(packed, n, k, group_begin, group_end, act, m, act_bytes, y);
}
void PackedRowsQ8_0Avx2(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                        const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  Groups<Legacy::kQ8_0>(packed, n, k, group_begin, group_end, act, m, act_bytes, y);
}

}  // namespace ember::quant
