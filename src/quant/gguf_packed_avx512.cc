// The packed Q5_0 GEMM (gguf_packed.h) with AVX-512 VNNI. Helpers have internal linkage and the
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

// kRows activation rows against one 16-row group: out[r * ldy + c] for c < cols.
template <int kRows>
void Tile(int64_t nb, const uint8_t* group, const uint8_t* const* rows, float* y, int64_t ldy, int cols) {
  const uint8_t* sums[kRows];
  for (int r = 0; r < kRows; ++r) sums[r] = BlockSums(rows[r], nb);
  __m512 acc[kRows], shift[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = shift[r] = _mm512_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i sixteen = _mm512_set1_epi8(16);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = group + b * kPackedBlockBytes;
    const __m512 d = _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block)));
    __m512i q[8];
    for (int t = 0; t < 4; ++t) {
      const __m512i v = _mm512_loadu_si512(block + 32 + 64 * t);
      q[2 * t] = _mm512_and_si512(v, low4);
      q[2 * t + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    }
    for (int j = 0; j < 8; ++j) {
      uint64_t high;
      std::memcpy(&high, block + 288 + 8 * j, sizeof(high));
      q[j] = _mm512_mask_add_epi8(q[j], static_cast<__mmask64>(high), q[j], sixteen);
    }
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* a = rows[r] + b * kQ8_0BlockBytes + 2;  // the block's 32 quants
      __m512i isum = _mm512_setzero_si512();
      for (int j = 0; j < 8; ++j) isum = _mm512_dpbusd_epi32(isum, q[j], _mm512_set1_epi32(Load32(a + 4 * j)));
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

}  // namespace

void PackedQ5_0RowsAvx512(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                          const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  const int64_t nb = k / 32;
  const int64_t group_bytes = nb * kPackedBlockBytes;
  for (int64_t g = group_begin; g < group_end; ++g) {
    const uint8_t* group = packed + g * group_bytes;
    if (g + 1 < group_end) {  // the next group, while this one is reduced m times
      for (int64_t offset = 0; offset < group_bytes; offset += 64) __builtin_prefetch(group + group_bytes + offset);
    }
    const int cols = static_cast<int>(std::min<int64_t>(kPackRows, n - g * kPackRows));
    float* out = y + g * kPackRows;
    int64_t i = 0;
    const uint8_t* rows[kTileRows];
    for (; i + kTileRows <= m; i += kTileRows) {
      for (int r = 0; r < kTileRows; ++r) rows[r] = act + (i + r) * act_bytes;
      Tile<kTileRows>(nb, group, rows, out + i * n, n, cols);
    }
    for (; i < m; ++i) {
      rows[0] = act + i * act_bytes;
      Tile<1>(nb, group, rows, out + i * n, n, cols);
    }
  }
}

}  // namespace ember::quant
