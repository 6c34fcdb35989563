// Portable block-scaled dots on the SIMD activation layout (block_scaled_dot.h): the structure of
// the AVX2 / AVX-512 kernels (16 int32 lane sums of 8 elements per 128-element chunk, one f32
// multiply-add per lane) in plain C++, for hosts without AVX2 and as a check on the layout that
// does not depend on intrinsics. Baseline x86-64 compilers vectorise the lane loops with SSE2.
#include <array>
#include <cstring>

#include "quant/block_scaled_dot_variants.h"

namespace ember::quant {
namespace {

// 2 * e2m1 by code: sign << 3 | magnitude.
constexpr int8_t kE2m1Twice[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
constexpr int kLanes = kChunk / 8;

// f32 value of every scale byte (e4m3 for NVFP4, e8m0 for MXFP4), so that the inner loops look up
// instead of decoding.
template <bool kNvfp4>
const std::array<float, 256>& ScaleTable() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c)
      t[c] = kNvfp4 ? E4m3ToFloat(static_cast<uint8_t>(c)) : E8m0ToFloat(static_cast<uint8_t>(c));
    return t;
  }();
  return table;
}

template <bool kNvfp4>
// `prefetch` is ignored: the portable loops are compute bound (~0.6 GB/s).
void Fp4Dot(int64_t k, const uint8_t* codes, const uint8_t* scales, const uint8_t* act, int64_t act_stride, int rows,
            float* out, const uint8_t* /*prefetch*/) {
  const ActivationLayout l = Int8ActivationLayout(k);
  const int64_t chunks = k / kChunk;
  const std::array<float, 256>& scale_value = ScaleTable<kNvfp4>();
  for (int r = 0; r < rows; ++r) {
    const uint8_t* a = act + r * act_stride;
    float acc[kLanes] = {};
    for (int64_t c = 0; c < chunks; ++c) {
      const uint8_t* chunk = codes + c * 64;
      const uint8_t* abs = a + l.abs + c * kChunk;
      const uint8_t* flip = a + l.flip + c * kChunk;
      float lane_scale[kLanes];
      std::memcpy(lane_scale, a + l.lane_scale + c * kLanes * 4, sizeof(lane_scale));
      int32_t sum[kLanes] = {};
      for (int b = 0; b < 64; ++b) {
        sum[b / 4] +=
            abs[b] * kE2m1Twice[(chunk[b] & 0xf) ^ flip[b]] + abs[64 + b] * kE2m1Twice[(chunk[b] >> 4) ^ flip[64 + b]];
      }
      for (int lane = 0; lane < kLanes; ++lane) {
        const float w_scale = scale_value[kNvfp4 ? scales[c * 8 + lane / 2] : scales[c * 4 + lane / 4]];
        acc[lane] += static_cast<float>(sum[lane]) * (w_scale * lane_scale[lane]);
      }
    }
    float total = 0.0f;
    for (float v : acc) total += v;
    out[r] = 0.5f * total + ref::Fp4Range(kNvfp4, k, chunks * kChunk, k, codes, scales, a);
  }
}

void Fp8Dot(int64_t k, const uint8_t* codes, const float* block_scales, const float* x, int64_t x_stride, int rows,
            float* out, const uint8_t* /*prefetch*/) {
  // e4m3 values by code, built once: a table lookup per element instead of bit assembly.
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[c] = E4m3ToFloat(static_cast<uint8_t>(c));
    return t;
  }();
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + r * x_stride;
    float acc = 0.0f;
    for (int64_t b0 = 0; b0 < k; b0 += kFp8ScaleBlock) {
      float part[8] = {};
      for (int64_t i = b0; i < k && i < b0 + kFp8ScaleBlock; i += 8) {
        for (int j = 0; j < 8; ++j) part[j] += table[codes[i + j]] * xr[i + j];
      }
      float block = 0.0f;
      for (float v : part) block += v;
      acc += block * (block_scales != nullptr ? block_scales[b0 / kFp8ScaleBlock] : 1.0f);
    }
    out[r] = acc;
  }
}

}  // namespace

constinit const BlockDotVariant kBlockDotGeneric = {
    {{WeightFormat::kMxfp4, Fp4Dot<false>}, {WeightFormat::kNvfp4, Fp4Dot<true>}}, Fp8Dot};

}  // namespace ember::quant
