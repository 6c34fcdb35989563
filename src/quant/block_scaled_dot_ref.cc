// Scalar reference dots: the oracle every other variant is tested against. Never optimise them.
#include <cstring>

#include "quant/block_scaled_dot_variants.h"

namespace ember::quant {
namespace ref {

float Fp4Range(bool nvfp4, int64_t k, int64_t k0, int64_t k1, const uint8_t* codes, const uint8_t* scales,
               const uint8_t* act) {
  const ActivationLayout l = Int8ActivationLayout(k);
  const auto* q = reinterpret_cast<const int8_t*>(act + l.q);
  float acc = 0.0f;
  for (int64_t g = k0; g < k1; g += 16) {
    int32_t isum = 0;
    for (int64_t i = g; i < g + 16; ++i) {
      const uint8_t code = (codes[i / 2] >> (4 * (i % 2))) & 0xf;
      isum += static_cast<int32_t>(2.0f * E2m1ToFloat(code)) * q[i];
    }
    const float block_scale =
        nvfp4 ? E4m3ToFloat(scales[g / kNvfp4BlockSize]) : E8m0ToFloat(scales[g / kMxfp4BlockSize]);
    float act_scale;
    std::memcpy(&act_scale, act + l.scale + g / 16 * 4, 4);
    acc += static_cast<float>(isum) * (block_scale * act_scale);
  }
  return 0.5f * acc;
}

}  // namespace ref

namespace {

template <bool kNvfp4>
// `prefetch` is ignored: the oracle is compute bound.
void Fp4Dot(int64_t k, const uint8_t* codes, const uint8_t* scales, const uint8_t* act, int64_t act_stride, int rows,
            float* out, const uint8_t* /*prefetch*/) {
  for (int r = 0; r < rows; ++r) out[r] = ref::Fp4Range(kNvfp4, k, 0, k, codes, scales, act + r * act_stride);
}

void Fp8Dot(int64_t k, const uint8_t* codes, const float* block_scales, const float* x, int64_t x_stride, int rows,
            float* out, const uint8_t* /*prefetch*/) {
  for (int r = 0; r < rows; ++r) {
    float acc = 0.0f;
    for (int64_t b = 0; b * kFp8ScaleBlock < k; ++b) {
      float block = 0.0f;
      for (int64_t i = b * kFp8ScaleBlock; i < k && i < (b + 1) * kFp8ScaleBlock; ++i) {
        block += E4m3ToFloat(codes[i]) * x[r * x_stride + i];
      }
      acc += block * (block_scales != nullptr ? block_scales[b] : 1.0f);
    }
    out[r] = acc;
  }
}

}  // namespace

constinit const BlockDotVariant kBlockDotRef = {
    {{WeightFormat::kMxfp4, Fp4Dot<false>}, {WeightFormat::kNvfp4, Fp4Dot<true>}}, Fp8Dot};

}  // namespace ember::quant
