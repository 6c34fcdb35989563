// AVX-512 (F, BW, VL) + VNNI dot products (built with those flags; chosen only when CPUID has
// the whole set, see CpuFeatures::HasAvx512Set).
//
// 32-element formats: one block per 256-bit register; vpdpbusd multiplies unsigned weight bytes
// by signed activation bytes and adds groups of four straight into int32 (replacing AVX2's
// pmaddubsw + pmaddwd pair). Quant offsets and minimums use the activation row's precomputed
// da * sum(a) (gguf_dot.h); Q5's fifth bit is added under a byte mask made directly from qh.
// K-quants: 64 elements (two Q4_K sub-blocks, four Q6_K ones) per 512-bit register; pmaddubsw
// gives int16 pairs and vpdpwssd multiplies them by the sub-block scales (shuffled into place
// with vpshufb) and accumulates int32, so a super-block needs one float conversion.
// Every kernel also has a multi-row form (VecDotRowsFn, for prefill) made from the same code.
//
// Everything here has internal linkage (see gguf_blocks.h for why that matters).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "quant/gguf_blocks.h"
#include "quant/gguf_dot_variants.h"

namespace ember::quant {
namespace {

float F16(uint16_t bits) { return _cvtsh_ss(bits); }

float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

__m256i LoadBytes(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
__m512i LoadBytes512(const void* p) { return _mm512_loadu_si512(p); }

// sum of u * s over each group of four bytes, as 8 int32 lanes.
__m256i Dot4(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }

__m256 Accumulate(__m256i isum, float scale, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(scale), acc);
}
__m256 Accumulate(__m256i isum, __m256 scale, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc);
}

// An f16 value converted into all eight lanes: vpbroadcastw from memory + vcvtph2ps, half the
// instructions of a scalar conversion followed by a broadcast.
__m256 BroadcastF16(uint16_t bits) { return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<int16_t>(bits))); }

// The 32 low nibbles of a Q4/Q5 block in element order (low nibbles 0-15, high nibbles 16-31).
// The 16 bytes go to both lanes in one load (vbroadcasti128); vpsrlvw shifts only the high lane.
__m256i Nibbles(const uint8_t* qs) {
  const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i shifts = _mm256_setr_epi64x(0, 0, 0x0004000400040004, 0x0004000400040004);
  return _mm256_and_si256(_mm256_srlv_epi16(both, shifts), _mm256_set1_epi8(0x0f));
}

// Adds 16 to byte j of q where bit j of the little-endian u32 qh is set.
__m256i AddQ5HighBits(__m256i q, const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  return _mm256_mask_add_epi8(q, static_cast<__mmask32>(bits), q, _mm256_set1_epi8(16));
}

// Per-block scale and scale * sum(q) of a Q8_0 activation row (gguf_dot.h). The offset is
// computed here rather than with Q8_0BlockSumsOffset: see the note at the top of the file.
const uint8_t* BlockSums(const void* x, int64_t nb) {
  return static_cast<const uint8_t*>(x) + (nb * static_cast<int64_t>(sizeof(BlockQ8_0)) + 7) / 8 * 8;
}

// An f32 at any alignment, broadcast (vbroadcastss from memory: a load, no ALU work).
__m256 BroadcastF32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_ps(v);
}
__m128 LoadF32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof(v));
  return _mm_set_ss(v);
}

// One block's contribution is split in two running sums:
//   scaled += float(sum_j q_j a_j) * (d * da)          (8 lanes, reduced at the end)
//   shift  += c * (da * sum_j a_j)                      (lane 0 only)
// with c = d for Q4_0/Q5_0 (whose value d * (q - offset) needs -offset * d * da * sum(a)) and
// c = m for Q4_1/Q5_1 (value d * q + m). da and da * sum(a) come precomputed with the
// activation row, so the only per-block f16 conversions are the weight's own. Two block
// parities each get their own sums: independent FMA chains.
struct Sums {
  __m256 scaled = _mm256_setzero_ps();
  __m128 shift = _mm_setzero_ps();
};

// kStep(weight block, activation block, its Q8_0BlockSum bytes, sums) adds one block. kRows
// activation rows (spaced `stride` bytes) go through each weight block together: the weight's
// nibbles and scales are decoded once (the compiler shares them across the inlined steps) and
// every row keeps its own sums, so row r gets exactly the operations of a one-row call, in the
// same order: bit-identical results whatever kRows is (GgufMatMul's batch invariance).
template <typename WeightBlock, auto kStep, int kRows>
void SumBlocks(int64_t nb, const void* w, const void* x, int64_t stride, float shift_factor, float* out) {
  const auto* wb = static_cast<const WeightBlock*>(w);
  const BlockQ8_0* xb[kRows];
  const uint8_t* sums[kRows];
  for (int r = 0; r < kRows; ++r) {
    const void* row = static_cast<const uint8_t*>(x) + r * stride;
    xb[r] = static_cast<const BlockQ8_0*>(row);
    sums[r] = BlockSums(row, nb);
  }
  constexpr int64_t kSumBytes = 2 * sizeof(float);
  Sums even[kRows], odd[kRows];
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    for (int r = 0; r < kRows; ++r) kStep(wb[i], xb[r][i], sums[r] + i * kSumBytes, even[r]);
    for (int r = 0; r < kRows; ++r) kStep(wb[i + 1], xb[r][i + 1], sums[r] + (i + 1) * kSumBytes, odd[r]);
  }
  if (i < nb) {
    for (int r = 0; r < kRows; ++r) kStep(wb[i], xb[r][i], sums[r] + i * kSumBytes, even[r]);
  }
  for (int r = 0; r < kRows; ++r) {
    const float shift = _mm_cvtss_f32(_mm_add_ss(even[r].shift, odd[r].shift));
    out[r] = HorizontalSum(_mm256_add_ps(even[r].scaled, odd[r].scaled)) + shift_factor * shift;
  }
}

// The VecDotFn (one row) and VecDotRowsFn (up to kMaxDotRows) of a 32-element format.
template <typename WeightBlock, auto kStep, int kShift>
float DotBlocks(int64_t n, const void* w, const void* x) {
  float out;
  SumBlocks<WeightBlock, kStep, 1>(n / kQK, w, x, 0, static_cast<float>(kShift), &out);
  return out;
}
template <typename WeightBlock, auto kStep, int kShift>
void DotBlocksRows(int64_t n, const void* w, const void* x, int64_t stride, int rows, float* out) {
  constexpr float kFactor = static_cast<float>(kShift);
  switch (rows) {
    case 4: return SumBlocks<WeightBlock, kStep, 4>(n / kQK, w, x, stride, kFactor, out);
    case 3: return SumBlocks<WeightBlock, kStep, 3>(n / kQK, w, x, stride, kFactor, out);
    case 2: return SumBlocks<WeightBlock, kStep, 2>(n / kQK, w, x, stride, kFactor, out);
    default: return SumBlocks<WeightBlock, kStep, 1>(n / kQK, w, x, stride, kFactor, out);
  }
}

// Q4_0/Q5_0: scaled += dot(q, a) * d * da; shift += d * (da * sum(a)); result scaled - offset * shift.
void OffsetStep(__m256i isum, uint16_t d_bits, const uint8_t* sums, Sums& s) {
  const __m256 d = BroadcastF16(d_bits);
  s.scaled = Accumulate(isum, _mm256_mul_ps(d, BroadcastF32(sums)), s.scaled);
  s.shift = _mm_fmadd_ss(_mm256_castps256_ps128(d), LoadF32(sums + 4), s.shift);
}

// Q4_1/Q5_1: d and m are adjacent f16s, converted together from one 32-bit broadcast.
template <typename Block>
void MinStep(const Block& wb, __m256i isum, const uint8_t* sums, Sums& s) {
  static_assert(offsetof(Block, d) == 0 && offsetof(Block, m) == 2);
  uint32_t dm_bits;
  std::memcpy(&dm_bits, &wb, sizeof(dm_bits));
  const __m256 dm = _mm256_cvtph_ps(_mm_set1_epi32(static_cast<int32_t>(dm_bits)));  // d, m, d, m, ...
  s.scaled = Accumulate(isum, _mm256_mul_ps(_mm256_moveldup_ps(dm), BroadcastF32(sums)), s.scaled);
  s.shift = _mm_fmadd_ss(_mm_movehdup_ps(_mm256_castps256_ps128(dm)), LoadF32(sums + 4), s.shift);
}

void StepQ4_0(const BlockQ4_0& wb, const BlockQ8_0& xb, const uint8_t* sums, Sums& s) {
  OffsetStep(Dot4(Nibbles(wb.qs), LoadBytes(xb.qs)), wb.d, sums, s);
}

void StepQ5_0(const BlockQ5_0& wb, const BlockQ8_0& xb, const uint8_t* sums, Sums& s) {
  OffsetStep(Dot4(AddQ5HighBits(Nibbles(wb.qs), wb.qh), LoadBytes(xb.qs)), wb.d, sums, s);
}

void StepQ4_1(const BlockQ4_1& wb, const BlockQ8_0& xb, const uint8_t* sums, Sums& s) {
  MinStep(wb, Dot4(Nibbles(wb.qs), LoadBytes(xb.qs)), sums, s);
}

void StepQ5_1(const BlockQ5_1& wb, const BlockQ8_0& xb, const uint8_t* sums, Sums& s) {
  MinStep(wb, Dot4(AddQ5HighBits(Nibbles(wb.qs), wb.qh), LoadBytes(xb.qs)), sums, s);
}

// Signed x signed: |w| times a with w's sign moved onto it (a is never -128).
void StepQ8_0(const BlockQ8_0& wb, const BlockQ8_0& xb, const uint8_t* sums, Sums& s) {
  const __m256i wq = LoadBytes(wb.qs);
  const __m256i isum = Dot4(_mm256_abs_epi8(wq), _mm256_sign_epi8(LoadBytes(xb.qs), wq));
  s.scaled = Accumulate(isum, _mm256_mul_ps(BroadcastF16(wb.d), BroadcastF32(sums)), s.scaled);
}

// Q4_K/Q5_K packed 6-bit scales and mins, four at a time with 32-bit masks (a local version of
// UnpackQ4KScales, which must not be called from this file).
struct ScalesMins {
  uint64_t scales;  // byte s: the 6-bit scale of sub-block s
  uint64_t mins;    // byte s: its 6-bit min
};
// Kept in registers: spilling to a stack array and reloading it as a vector would stall on
// store forwarding (several narrow stores feeding one wide load).
ScalesMins UnpackScales(const uint8_t packed[12]) {
  uint32_t s[3];
  std::memcpy(s, packed, sizeof(s));
  const uint32_t sc_lo = s[0] & 0x3f3f3f3fu;
  const uint32_t sc_hi = (s[2] & 0x0f0f0f0fu) | ((s[0] >> 2) & 0x30303030u);
  const uint32_t m_lo = s[1] & 0x3f3f3f3fu;
  const uint32_t m_hi = ((s[2] >> 4) & 0x0f0f0f0fu) | ((s[1] >> 2) & 0x30303030u);
  return {sc_lo | (uint64_t{sc_hi} << 32), m_lo | (uint64_t{m_hi} << 32)};
}

// The eight bytes of v as eight int16 words.
__m128i BytesToWords(uint64_t v) { return _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(v))); }

// sum_s m_s * (bsums[2s] + bsums[2s + 1]) as 8 int32 lanes.
__m256i MinTerms(uint64_t mins, const int16_t bsums[16]) {
  const __m128i m8 = _mm_cvtsi64_si128(static_cast<int64_t>(mins));
  const __m128i pairs = _mm_shuffle_epi8(m8, _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7));
  return _mm256_madd_epi16(_mm256_cvtepu8_epi16(pairs), LoadBytes(bsums));
}

// The all-ones maskz forms below compile to the plain instructions; GCC 12's unmasked ones pass
// an "undefined" vector that trips -Wmaybe-uninitialized once inlined.
constexpr __mmask8 kAll8 = 0xff;

__m256i Reduce512(__m512i v) {
  return _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(0xf, v, 0),
                          _mm512_maskz_extracti64x4_epi64(0xf, v, 1));
}

// The 32 bytes at p in both halves.
__m512i Broadcast256(const void* p) { return _mm512_maskz_broadcast_i64x4(kAll8, LoadBytes(p)); }

// Words 0-15 = lo, words 16-31 = hi.
__m512i SplitWords(int16_t lo, int16_t hi) {
  return _mm512_maskz_inserti64x4(kAll8, _mm512_set1_epi16(lo), _mm256_set1_epi16(hi), 1);
}

// The K-quant dots take kRows activation rows (spaced `stride` bytes) per weight row, like
// SumBlocks: the weight's scales and quants are unpacked once, and each row keeps its own
// accumulators and sees the one-row operation sequence, so its result has the same bits.
template <typename Block, bool kHasHighBit, int kRows>
void SumQ45_K(int64_t n, const void* w, const void* x, int64_t stride, float* out) {
  const auto* wb = static_cast<const Block*>(w);
  const BlockQ8_K* xb[kRows];
  for (int r = 0; r < kRows; ++r) xb[r] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(x) + r * stride);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  // The 32 bytes of a chunk sit in both halves; the low half keeps the low nibbles (sub-block
  // 2c), the high half shifts down the high nibbles (sub-block 2c + 1).
  const __m512i nibble_shift = SplitWords(0, 4);
  __m256 acc[kRows], acc_min[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = acc_min[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const ScalesMins sm = UnpackScales(wb[i].scales);
    const float dmin = F16(wb[i].dmin);
    for (int r = 0; r < kRows; ++r) {
      acc_min[r] = Accumulate(MinTerms(sm.mins, xb[r][i].bsums), dmin * xb[r][i].d, acc_min[r]);
    }
    // The eight int16 scales in every 128-bit lane; vpshufb (one uop, unlike vpermw) then picks
    // scale 2c for words 0-15 and 2c + 1 for words 16-31 (index bytes 4c, 4c + 1 / 4c + 2, 4c + 3).
    const __m512i scales16 = _mm512_maskz_broadcast_i32x4(0xffff, BytesToWords(sm.scales));
    [[maybe_unused]] __m512i high = _mm512_setzero_si512();
    [[maybe_unused]] __m512i high_select = high;  // bit 2c of qh in the low half, 2c + 1 high
    if constexpr (kHasHighBit) {
      high = Broadcast256(wb[i].qh);
      high_select = SplitWords(0x0101, 0x0202);
    }
    __m512i pick = SplitWords(0x0100, 0x0302);
    __m512i sumi[kRows];
    for (int r = 0; r < kRows; ++r) sumi[r] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m512i bytes = Broadcast256(wb[i].qs + 32 * c);
      __m512i q = _mm512_and_si512(_mm512_srlv_epi16(bytes, nibble_shift), low4);
      if constexpr (kHasHighBit) {
        q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(high, high_select), q, _mm512_set1_epi8(16));
        high_select = _mm512_slli_epi16(high_select, 2);  // bytes stay <= 0x80: no carry across
      }
      const __m512i scale_words = _mm512_shuffle_epi8(scales16, pick);
      for (int r = 0; r < kRows; ++r) {
        const __m512i pairs = _mm512_maddubs_epi16(q, LoadBytes512(xb[r][i].qs + 64 * c));
        sumi[r] = _mm512_dpwssd_epi32(sumi[r], pairs, scale_words);
      }
      pick = _mm512_add_epi8(pick, _mm512_set1_epi8(4));
    }
    const float d = F16(wb[i].d);
    for (int r = 0; r < kRows; ++r) acc[r] = Accumulate(Reduce512(sumi[r]), d * xb[r][i].d, acc[r]);
  }
  for (int r = 0; r < kRows; ++r) out[r] = HorizontalSum(acc[r]) - HorizontalSum(acc_min[r]);
}

// Q6_K: q in [0, 63] unsigned, value scale * (q - 32); the -32 is applied once per super-block
// as 32 * sum_g scale_g * bsums_g.
template <int kRows>
void SumQ6_K(int64_t n, const void* w, const void* x, int64_t stride, float* out) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const BlockQ8_K* xb[kRows];
  for (int r = 0; r < kRows; ++r) xb[r] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(x) + r * stride);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
  // Elements 0-31 of a half take qh bits 0-1 (shift left 4), 32-63 bits 2-3 (left 2);
  // elements 64-95 bits 4-5 (no shift), 96-127 bits 6-7 (right 2).
  const __m512i shift_first = SplitWords(4, 2);
  const __m512i shift_second = SplitWords(0, 2);
  // Word w of a 64-element product vector covers elements 2w, 2w + 1, i.e. sub-block base + w / 8:
  // 128-bit lane L needs scale base + L in all its words. With scales 0-7 (then 8-15) in every
  // lane, vpshufb with index bytes (2L, 2L + 1) picks scale L, and (2L + 8, 2L + 9) scale L + 4.
  const __m512i pick_first = _mm512_set_epi32(
      0x07060706, 0x07060706, 0x07060706, 0x07060706, 0x05040504, 0x05040504, 0x05040504, 0x05040504,
      0x03020302, 0x03020302, 0x03020302, 0x03020302, 0x01000100, 0x01000100, 0x01000100, 0x01000100);
  const __m512i pick_second = _mm512_add_epi8(pick_first, _mm512_set1_epi8(8));
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const __m256i scales16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[i].scales)));
    const __m512i scales_lanes[2] = {
        _mm512_maskz_broadcast_i32x4(0xffff, _mm256_castsi256_si128(scales16)),
        _mm512_maskz_broadcast_i32x4(0xffff, _mm256_extracti128_si256(scales16, 1))};
    __m512i sumi[kRows];
    for (int r = 0; r < kRows; ++r) sumi[r] = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = LoadBytes512(wb[i].ql + 64 * h);
      const __m512i qh = Broadcast256(wb[i].qh + 32 * h);
      const __m512i q0 = _mm512_or_si512(_mm512_and_si512(ql, low4),
                                         _mm512_and_si512(_mm512_sllv_epi16(qh, shift_first), bits45));
      const __m512i q1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                         _mm512_and_si512(_mm512_srlv_epi16(qh, shift_second), bits45));
      const __m512i scale0 = _mm512_shuffle_epi8(scales_lanes[h], pick_first);
      const __m512i scale1 = _mm512_shuffle_epi8(scales_lanes[h], pick_second);
      for (int r = 0; r < kRows; ++r) {
        const __m512i p0 = _mm512_maddubs_epi16(q0, LoadBytes512(xb[r][i].qs + 128 * h));
        const __m512i p1 = _mm512_maddubs_epi16(q1, LoadBytes512(xb[r][i].qs + 128 * h + 64));
        sumi[r] = _mm512_dpwssd_epi32(sumi[r], p0, scale0);
        sumi[r] = _mm512_dpwssd_epi32(sumi[r], p1, scale1);
      }
    }
    const float d = F16(wb[i].d);
    for (int r = 0; r < kRows; ++r) {
      const __m256i offset = _mm256_madd_epi16(scales16, LoadBytes(xb[r][i].bsums));
      const __m256i total = _mm256_sub_epi32(Reduce512(sumi[r]), _mm256_slli_epi32(offset, 5));
      acc[r] = Accumulate(total, d * xb[r][i].d, acc[r]);
    }
  }
  for (int r = 0; r < kRows; ++r) out[r] = HorizontalSum(acc[r]);
}

// VecDotFn and VecDotRowsFn forms of a kernel with the SumQ45_K / SumQ6_K signature.
template <auto kSum1, auto kSum2, auto kSum3, auto kSum4>
struct KDot {
  static float One(int64_t n, const void* w, const void* x) {
    float out;
    kSum1(n, w, x, 0, &out);
    return out;
  }
  static void Rows(int64_t n, const void* w, const void* x, int64_t stride, int rows, float* out) {
    switch (rows) {
      case 4: return kSum4(n, w, x, stride, out);
      case 3: return kSum3(n, w, x, stride, out);
      case 2: return kSum2(n, w, x, stride, out);
      default: return kSum1(n, w, x, stride, out);
    }
  }
};
template <typename Block, bool kHigh>
using DotQ45_K = KDot<SumQ45_K<Block, kHigh, 1>, SumQ45_K<Block, kHigh, 2>, SumQ45_K<Block, kHigh, 3>,
                      SumQ45_K<Block, kHigh, 4>>;
using DotQ6_K = KDot<SumQ6_K<1>, SumQ6_K<2>, SumQ6_K<3>, SumQ6_K<4>>;

}  // namespace

constinit const DotVariant kDotAvx512 = {
    {GgmlType::kF32, &ref::DotF32},
    {GgmlType::kF16, &ref::DotF16},
    {GgmlType::kBF16, &ref::DotBF16},
    {GgmlType::kQ4_0, &DotBlocks<BlockQ4_0, StepQ4_0, -8>, &DotBlocksRows<BlockQ4_0, StepQ4_0, -8>},
    {GgmlType::kQ4_1, &DotBlocks<BlockQ4_1, StepQ4_1, 1>, &DotBlocksRows<BlockQ4_1, StepQ4_1, 1>},
    {GgmlType::kQ5_0, &DotBlocks<BlockQ5_0, StepQ5_0, -16>, &DotBlocksRows<BlockQ5_0, StepQ5_0, -16>},
    {GgmlType::kQ5_1, &DotBlocks<BlockQ5_1, StepQ5_1, 1>, &DotBlocksRows<BlockQ5_1, StepQ5_1, 1>},
    {GgmlType::kQ8_0, &DotBlocks<BlockQ8_0, StepQ8_0, 0>, &DotBlocksRows<BlockQ8_0, StepQ8_0, 0>},
    {GgmlType::kQ4_K, &DotQ45_K<BlockQ4_K, false>::One, &DotQ45_K<BlockQ4_K, false>::Rows},
    {GgmlType::kQ5_K, &DotQ45_K<BlockQ5_K, true>::One, &DotQ45_K<BlockQ5_K, true>::Rows},
    {GgmlType::kQ6_K, &DotQ6_K::One, &DotQ6_K::Rows},
};

}  // namespace ember::quant
