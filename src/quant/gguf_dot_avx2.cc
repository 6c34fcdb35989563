// AVX2 + FMA + F16C dot products (built with those flags; chosen only when CPUID has them).
//
// Integer core: pmaddubsw multiplies unsigned weight bytes by signed activation bytes and adds
// adjacent pairs into int16 (no saturation here: |pair| <= 2 * 63 * 127 for the widest 6-bit
// quants), pmaddwd by ones (or by the K-quant sub-block scales) widens to int32. Formats whose
// quants carry an offset (Q4_0: q - 8, Q5_0: q - 16) or a minimum (Q4_1, Q5_1) multiply the
// unsigned q and apply the rest through the activation row's precomputed da * sum(a)
// (gguf_dot.h). f16 scales are converted with F16C, exactly like F16ToF32.
//
// Everything here has internal linkage: nothing compiled with AVX2 flags may be an inline or
// template function shared with baseline translation units (see gguf_blocks.h).
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

// int16 pairs -> int32 lanes.
__m256i WidenPairs(__m256i pairs) { return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)); }

// The 32 low nibbles of a Q4/Q5 block as bytes in element order (low nibbles are elements
// 0-15, high nibbles 16-31).
__m256i Nibbles(const uint8_t* qs) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(0x0f));
}

// Bit 4 of each of a Q5 block's quants, as 0x10 or 0 per byte: byte j tests bit j of qh.
__m256i Q5HighBits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  // Byte j of the broadcast holds qh byte j / 8 (pshufb indexes within each 128-bit lane, and
  // every lane of the broadcast holds the same four bytes).
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(bits)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2,
                                           2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i select = _mm256_set1_epi64x(0x8040201008040201);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// acc += float(isum) * scale.
__m256 Accumulate(__m256i isum, float scale, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(scale), acc);
}
__m256 Accumulate(__m256i isum, __m256 scale, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc);
}

// An f16 value converted into all eight lanes: vpbroadcastw from memory + vcvtph2ps, half the
// instructions of a scalar conversion followed by a broadcast.
__m256 BroadcastF16(uint16_t bits) { return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<int16_t>(bits))); }

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

// kStep(weight block, activation block, its Q8_0BlockSum bytes, sums) adds one block.
template <typename WeightBlock, auto kStep>
float SumBlocks(int64_t nb, const void* w, const void* x, float shift_factor) {
  const auto* wb = static_cast<const WeightBlock*>(w);
  const auto* xb = static_cast<const BlockQ8_0*>(x);
  const uint8_t* sums = BlockSums(x, nb);
  constexpr int64_t kSumBytes = 2 * sizeof(float);
  Sums even, odd;
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    kStep(wb[i], xb[i], sums + i * kSumBytes, even);
    kStep(wb[i + 1], xb[i + 1], sums + (i + 1) * kSumBytes, odd);
  }
  if (i < nb) kStep(wb[i], xb[i], sums + i * kSumBytes, even);
  const float shift = _mm_cvtss_f32(_mm_add_ss(even.shift, odd.shift));
  return HorizontalSum(_mm256_add_ps(even.scaled, odd.scaled)) + shift_factor * shift;
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

// sum_j q_j * a_j for unsigned q, as 8 int32 lanes.
__m256i UnsignedDot(__m256i q, __m256i a) { return WidenPairs(_mm256_maddubs_epi16(q, a)); }

void StepQ4_0(const BlockQ4_0& wb, const BlockQ8_0& xb, const uint8_t* sums, Sums& s) {
  OffsetStep(UnsignedDot(Nibbles(wb.qs), LoadBytes(xb.qs)), wb.d, sums, s);
}
float DotQ4_0(int64_t n, const void* w, const void* x) {
  return SumBlocks<BlockQ4_0, StepQ4_0>(n / kQK, w, x, -8.0f);
}

void StepQ5_0(const BlockQ5_0& wb, const BlockQ8_0& xb, const uint8_t* sums, Sums& s) {
  const __m256i q = _mm256_or_si256(Nibbles(wb.qs), Q5HighBits(wb.qh));
  OffsetStep(UnsignedDot(q, LoadBytes(xb.qs)), wb.d, sums, s);
}
float DotQ5_0(int64_t n, const void* w, const void* x) {
  return SumBlocks<BlockQ5_0, StepQ5_0>(n / kQK, w, x, -16.0f);
}

void StepQ4_1(const BlockQ4_1& wb, const BlockQ8_0& xb, const uint8_t* sums, Sums& s) {
  MinStep(wb, UnsignedDot(Nibbles(wb.qs), LoadBytes(xb.qs)), sums, s);
}
float DotQ4_1(int64_t n, const void* w, const void* x) {
  return SumBlocks<BlockQ4_1, StepQ4_1>(n / kQK, w, x, 1.0f);
}

void StepQ5_1(const BlockQ5_1& wb, const BlockQ8_0& xb, const uint8_t* sums, Sums& s) {
  const __m256i q = _mm256_or_si256(Nibbles(wb.qs), Q5HighBits(wb.qh));
  MinStep(wb, UnsignedDot(q, LoadBytes(xb.qs)), sums, s);
}
float DotQ5_1(int64_t n, const void* w, const void* x) {
  return SumBlocks<BlockQ5_1, StepQ5_1>(n / kQK, w, x, 1.0f);
}

// Signed x signed: |w| times a with w's sign moved onto it (a is never -128, so no overflow).
void StepQ8_0(const BlockQ8_0& wb, const BlockQ8_0& xb, const uint8_t* sums, Sums& s) {
  const __m256i wq = LoadBytes(wb.qs);
  const __m256i pairs =
      _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(LoadBytes(xb.qs), wq));
  s.scaled = Accumulate(WidenPairs(pairs), _mm256_mul_ps(BroadcastF16(wb.d), BroadcastF32(sums)), s.scaled);
}
float DotQ8_0(int64_t n, const void* w, const void* x) {
  return SumBlocks<BlockQ8_0, StepQ8_0>(n / kQK, w, x, 0.0f);
}

// Q4_K/Q5_K packed 6-bit scales and mins (layout in gguf_blocks.h), unpacked four at a time
// with 32-bit masks. A local version of UnpackQ4KScales: see the note at the top of the file.
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

template <typename Block, bool kHasHighBit>
float DotQ45_K(int64_t n, const void* w, const void* x) {
  const auto* wb = static_cast<const Block*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const ScalesMins sm = UnpackScales(wb[i].scales);
    acc_min = Accumulate(MinTerms(sm.mins, xb[i].bsums), F16(wb[i].dmin) * xb[i].d, acc_min);
    // Scale s is broadcast to all words with pshufb, index bytes (2s, 2s + 1) in every word.
    const __m256i scales16 = _mm256_broadcastsi128_si256(BytesToWords(sm.scales));
    __m256i pick = _mm256_set1_epi16(0x0100);
    const __m256i next = _mm256_set1_epi8(2);
    [[maybe_unused]] __m256i high = _mm256_setzero_si256();
    if constexpr (kHasHighBit) high = LoadBytes(wb[i].qh);
    __m256i sumi = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      // Sub-block 2c: low nibbles of 32 bytes; sub-block 2c + 1: their high nibbles.
      const __m256i bytes = LoadBytes(wb[i].qs + 32 * c);
      __m256i q0 = _mm256_and_si256(bytes, low4);
      __m256i q1 = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
      if constexpr (kHasHighBit) {
        // Bit s of qh[l] is bit 4 of element 32s + l: bit 0 of each byte, moved to bit 4.
        const __m256i bit4 = _mm256_set1_epi8(0x10);
        q0 = _mm256_or_si256(q0, _mm256_and_si256(_mm256_slli_epi16(high, 4), bit4));
        high = _mm256_srli_epi16(high, 1);
        q1 = _mm256_or_si256(q1, _mm256_and_si256(_mm256_slli_epi16(high, 4), bit4));
        high = _mm256_srli_epi16(high, 1);
      }
      const __m256i p0 = _mm256_maddubs_epi16(q0, LoadBytes(xb[i].qs + 64 * c));
      const __m256i p1 = _mm256_maddubs_epi16(q1, LoadBytes(xb[i].qs + 64 * c + 32));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p0, _mm256_shuffle_epi8(scales16, pick)));
      pick = _mm256_add_epi8(pick, next);
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p1, _mm256_shuffle_epi8(scales16, pick)));
      pick = _mm256_add_epi8(pick, next);
    }
    acc = Accumulate(sumi, F16(wb[i].d) * xb[i].d, acc);
  }
  return HorizontalSum(acc) - HorizontalSum(acc_min);
}

// Q6_K: q in [0, 63] unsigned, value scale * (q - 32); the -32 is applied once per super-block
// as 32 * sum_g scale_g * bsums_g.
float DotQ6_K(int64_t n, const void* w, const void* x) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i bits45 = _mm256_set1_epi8(0x30);
  // Picks int16 scale g for the low 128-bit lane and g + 1 for the high one out of a broadcast
  // (scale g, scale g + 1) pair: maddubs pairs 0-7 are elements 0-15 (sub-block g), 8-15 the next.
  const __m256i pick = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2,
                                        3, 2, 3, 2, 3, 2, 3, 2, 3);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const __m256i scales16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[i].scales)));
    alignas(32) int16_t scales[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(scales), scales16);
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = LoadBytes(wb[i].ql + 64 * h);
      const __m256i ql1 = LoadBytes(wb[i].ql + 64 * h + 32);
      const __m256i qh = LoadBytes(wb[i].qh + 32 * h);
      // Elements 128h + 32t + l: low nibbles of ql0, ql1, then high nibbles of ql0, ql1; high
      // bits 2t, 2t + 1 of qh[l], moved to bits 4-5.
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
          _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45)),
      };
      for (int t = 0; t < 4; ++t) {
        const int g = 8 * h + 2 * t;
        int32_t scale_pair;
        std::memcpy(&scale_pair, &scales[g], sizeof(scale_pair));
        const __m256i sc = _mm256_shuffle_epi8(_mm256_set1_epi32(scale_pair), pick);
        const __m256i p = _mm256_maddubs_epi16(q[t], LoadBytes(xb[i].qs + 128 * h + 32 * t));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, sc));
      }
    }
    const __m256i offset = _mm256_madd_epi16(scales16, LoadBytes(xb[i].bsums));
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(offset, 5));
    acc = Accumulate(sumi, F16(wb[i].d) * xb[i].d, acc);
  }
  return HorizontalSum(acc);
}

}  // namespace

constinit const DotVariant kDotAvx2 = {
    {GgmlType::kF32, &ref::DotF32},
    {GgmlType::kF16, &ref::DotF16},
    {GgmlType::kBF16, &ref::DotBF16},
    {GgmlType::kQ4_0, &DotQ4_0},
    {GgmlType::kQ4_1, &DotQ4_1},
    {GgmlType::kQ5_0, &DotQ5_0},
    {GgmlType::kQ5_1, &DotQ5_1},
    {GgmlType::kQ8_0, &DotQ8_0},
    {GgmlType::kQ4_K, &DotQ45_K<BlockQ4_K, false>},
    {GgmlType::kQ5_K, &DotQ45_K<BlockQ5_K, true>},
    {GgmlType::kQ6_K, &DotQ6_K},
};

}  // namespace ember::quant
