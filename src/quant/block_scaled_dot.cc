#include "quant/block_scaled_dot.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "quant/block_scaled_dot_variants.h"

namespace ember::quant {
namespace {

int64_t Align64(int64_t n) { return (n + 63) / 64 * 64; }

}  // namespace

// amx runs the avx512 dots (no tile code here yet).
constinit const IsaTable<BlockDotVariant> kBlockDotVariants(
    "quant::BlockDotVariant",
    {&kBlockDotRef, &kBlockDotGeneric, &kBlockDotAvx2, &kBlockDotAvx512, &kBlockDotAvx512});

ActivationLayout Int8ActivationLayout(int64_t k) {
  ActivationLayout l;
  l.q = 0;
  l.scale = Align64(l.q + k);
  l.abs = Align64(l.scale + k / 16 * 4);
  l.flip = Align64(l.abs + k);
  l.lane_scale = Align64(l.flip + k);
  l.packed = Align64(l.lane_scale + k / 8 * 4);
  l.bytes = Align64(l.packed + k / 16 * 32);
  return l;
}

void QuantizeActivationInt8(const float* x, int64_t k, uint8_t* out) {
  EMBER_CHECK(k % 16 == 0, "int8 activations need a multiple of 16 elements, got {}", k);
  static const bool avx512 = IsaSupported(Isa::kAvx512);
  if (avx512) return QuantizeActivationInt8Avx512(x, k, out);
  QuantizeActivationInt8Portable(x, k, out);
}

void QuantizeActivationInt8Portable(const float* x, int64_t k, uint8_t* out) {
  const ActivationLayout l = Int8ActivationLayout(k);
  int8_t* __restrict q = reinterpret_cast<int8_t*>(out + l.q);
  // Adding and subtracting 1.5 * 2^23 rounds an f32 of magnitude below 2^22 to the nearest integer,
  // ties to even (the default rounding mode), without a libm call (baseline x86-64 has no roundss).
  constexpr float kRound = 12582912.0f;
  // The loops are written so the compiler vectorizes them (fixed trip counts, `a < b ? b : a` for
  // max, which is what maxps computes, restrict pointers): the decode GEMV runs this serially
  // before the rows are split over threads.
  for (int64_t g = 0; g < k / 16; ++g) {
    const float* xg = x + g * 16;
    // Four partial maxima of |x|: a NaN element is skipped as std::max(amax, NaN) skips it.
    float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = 0; i < 16; ++i) {
      const float a = std::fabs(xg[i]);
      part[i % 4] = part[i % 4] < a ? a : part[i % 4];
    }
    const float amax = std::max(std::max(part[0], part[1]), std::max(part[2], part[3]));
    const float d = amax / 127.0f;
    const float inverse = d > 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < 16; ++i) {
      float v = xg[i] * inverse;
      v = -127.0f < v ? v : -127.0f;  // std::max(-127, v): NaN becomes -127
      v = v < 127.0f ? v : 127.0f;    // std::min(127, v)
      q[g * 16 + i] = static_cast<int8_t>((v + kRound) - kRound);
    }
    std::memcpy(out + l.scale + g * 4, &d, 4);
    std::memcpy(out + l.lane_scale + g * 8, &d, 4);
    std::memcpy(out + l.lane_scale + g * 8 + 4, &d, 4);
  }
  uint8_t* __restrict abs = out + l.abs;
  uint8_t* __restrict flip = out + l.flip;
  for (int64_t c0 = 0; c0 < k; c0 += kChunk) {
    const int64_t half = std::min(kChunk, k - c0) / 2;
    for (int odd = 0; odd < 2; ++odd) {
      for (int64_t j = 0; j < half; ++j) {
        const int8_t v = q[c0 + 2 * j + odd];
        abs[c0 + odd * half + j] = static_cast<uint8_t>(v < 0 ? -v : v);
        flip[c0 + odd * half + j] = static_cast<uint8_t>((v >> 7) & 0x08);
      }
    }
  }
}

}  // namespace ember::quant
