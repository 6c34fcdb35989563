// Scalar reference dot products: the oracle the SIMD variants are tested against.
//
// Each block's integer sum is exact; the f32 work is one scale product per block (per
// super-block for K-quants) and one running f32 sum, so these differ from the SIMD variants only
// in the order of the f32 additions.
#include <cstdint>

#include "core/dtypes.h"
#include "quant/gguf_blocks.h"
#include "quant/gguf_dot_variants.h"

namespace ember::quant {
namespace ref {
namespace {

// Low 4 bits of element j (< 32) of a Q4/Q5 block: low nibbles hold 0-15, high nibbles 16-31.
int Nibble(const uint8_t qs[kQK / 2], int j) { return j < kQK / 2 ? (qs[j] & 0x0f) : (qs[j - kQK / 2] >> 4); }

// Bit 4 of element j of a Q5 block, as 0 or 16.
int Q5High(const uint8_t qh[4], int j) { return ((qh[j / 8] >> (j % 8)) & 1) << 4; }

float DotQ4_0(int64_t n, const void* w, const void* x) {
  const auto* wb = static_cast<const BlockQ4_0*>(w);
  const auto* xb = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int32_t isum = 0;
    for (int j = 0; j < kQK; ++j) isum += (Nibble(wb[i].qs, j) - 8) * xb[i].qs[j];
    sum += F16ToF32(wb[i].d) * F16ToF32(xb[i].d) * static_cast<float>(isum);
  }
  return sum;
}

// w = d * q + m: sum_j w_j * a_j * da = d * da * sum q_j a_j + m * da * sum a_j.
float DotQ4_1(int64_t n, const void* w, const void* x) {
  const auto* wb = static_cast<const BlockQ4_1*>(w);
  const auto* xb = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int32_t isum = 0, asum = 0;
    for (int j = 0; j < kQK; ++j) {
      isum += Nibble(wb[i].qs, j) * xb[i].qs[j];
      asum += xb[i].qs[j];
    }
    const float da = F16ToF32(xb[i].d);
    sum +=
        F16ToF32(wb[i].d) * da * static_cast<float>(isum) + F16ToF32(wb[i].m) * da * static_cast<float>(asum);
  }
  return sum;
}

float DotQ5_0(int64_t n, const void* w, const void* x) {
  const auto* wb = static_cast<const BlockQ5_0*>(w);
  const auto* xb = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int32_t isum = 0;
    for (int j = 0; j < kQK; ++j) isum += ((Nibble(wb[i].qs, j) | Q5High(wb[i].qh, j)) - 16) * xb[i].qs[j];
    sum += F16ToF32(wb[i].d) * F16ToF32(xb[i].d) * static_cast<float>(isum);
  }
  return sum;
}

float DotQ5_1(int64_t n, const void* w, const void* x) {
  const auto* wb = static_cast<const BlockQ5_1*>(w);
  const auto* xb = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int32_t isum = 0, asum = 0;
    for (int j = 0; j < kQK; ++j) {
      isum += (Nibble(wb[i].qs, j) | Q5High(wb[i].qh, j)) * xb[i].qs[j];
      asum += xb[i].qs[j];
    }
    const float da = F16ToF32(xb[i].d);
    sum +=
        F16ToF32(wb[i].d) * da * static_cast<float>(isum) + F16ToF32(wb[i].m) * da * static_cast<float>(asum);
  }
  return sum;
}

float DotQ8_0(int64_t n, const void* w, const void* x) {
  const auto* wb = static_cast<const BlockQ8_0*>(w);
  const auto* xb = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int32_t isum = 0;
    for (int j = 0; j < kQK; ++j) isum += wb[i].qs[j] * xb[i].qs[j];
    sum += F16ToF32(wb[i].d) * F16ToF32(xb[i].d) * static_cast<float>(isum);
  }
  return sum;
}

// Q4_K / Q5_K: w = (d * sc_s) * q - (dmin * m_s) on sub-block s, so per super-block
//   sum w * a * da = d * da * sum_s sc_s * sum(q a) - dmin * da * sum_s m_s * sum(a),
// where sum(a) over a sub-block of 32 is two of Q8_K's 16-element bsums.
template <typename Block, bool kHasHighBit>
float DotQ45_K(int64_t n, const void* w, const void* x) {
  const auto* wb = static_cast<const Block*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    uint8_t scales[8], mins[8];
    UnpackQ4KScales(wb[i].scales, scales, mins);
    int32_t sumi = 0, summ = 0;
    for (int s = 0; s < 8; ++s) {
      int32_t isum = 0;
      for (int l = 0; l < 32; ++l) {
        int q = (wb[i].qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0x0f;
        if constexpr (kHasHighBit) q |= ((wb[i].qh[l] >> s) & 1) << 4;
        isum += q * xb[i].qs[32 * s + l];
      }
      sumi += scales[s] * isum;
      summ += mins[s] * (xb[i].bsums[2 * s] + xb[i].bsums[2 * s + 1]);
    }
    sum += F16ToF32(wb[i].d) * xb[i].d * static_cast<float>(sumi) -
           F16ToF32(wb[i].dmin) * xb[i].d * static_cast<float>(summ);
  }
  return sum;
}

float DotQ6_K(int64_t n, const void* w, const void* x) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    int32_t sumi = 0;
    for (int g = 0; g < kQKK / 16; ++g) {
      int32_t isum = 0;
      for (int e = 16 * g; e < 16 * g + 16; ++e) {
        const int h = e / 128, r = e % 128;
        const uint8_t low_byte = wb[i].ql[64 * h + r % 64];
        const int low = (r < 64 ? low_byte : low_byte >> 4) & 0x0f;
        const int high = (wb[i].qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        isum += ((low | (high << 4)) - 32) * xb[i].qs[e];
      }
      sumi += wb[i].scales[g] * isum;
    }
    sum += F16ToF32(wb[i].d) * xb[i].d * static_cast<float>(sumi);
  }
  return sum;
}

}  // namespace

float DotF32(int64_t n, const void* w, const void* x) {
  const auto* wf = static_cast<const float*>(w);
  const auto* xf = static_cast<const float*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += wf[i] * xf[i];
  return sum;
}

float DotF16(int64_t n, const void* w, const void* x) {
  const auto* wh = static_cast<const uint16_t*>(w);
  const auto* xf = static_cast<const float*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += F16ToF32(wh[i]) * xf[i];
  return sum;
}

float DotBF16(int64_t n, const void* w, const void* x) {
  const auto* wh = static_cast<const uint16_t*>(w);
  const auto* xf = static_cast<const float*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += BF16ToF32(wh[i]) * xf[i];
  return sum;
}

}  // namespace ref

// The reference loops are plain integer multiply-adds that the compiler already vectorises for
// baseline x86-64; a separately maintained "portable fast" copy would buy nothing measurable, so
// the generic level registers this same variant (kDotVariants, gguf_dot.cc).
constinit const DotVariant kDotRef = {
    {GgmlType::kF32, &ref::DotF32},
    {GgmlType::kF16, &ref::DotF16},
    {GgmlType::kBF16, &ref::DotBF16},
    {GgmlType::kQ4_0, &ref::DotQ4_0},
    {GgmlType::kQ4_1, &ref::DotQ4_1},
    {GgmlType::kQ5_0, &ref::DotQ5_0},
    {GgmlType::kQ5_1, &ref::DotQ5_1},
    {GgmlType::kQ8_0, &ref::DotQ8_0},
    {GgmlType::kQ4_K, &ref::DotQ45_K<BlockQ4_K, false>},
    {GgmlType::kQ5_K, &ref::DotQ45_K<BlockQ5_K, true>},
    {GgmlType::kQ6_K, &ref::DotQ6_K},
};

}  // namespace ember::quant
