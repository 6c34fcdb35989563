// The resize torchvision applies for MuseGlimmer's processors: tvF.resize(uint8 CHW tensor,
// interpolation=LANCZOS, antialias=True) on CPU, which runs torch's native uint8 antialiased
// kernel (interpolate(mode="lanczos", antialias=True)). That kernel is separable, horizontal pass
// first with a uint8 (clamped) intermediate, and its weights are Pillow-SIMD's: double-precision
// Lanczos-3 taps over a support scaled by the downscale factor, normalised to sum 1, then rounded
// to int16 with the most fractional bits that keep the largest weight below 2^15. Reproduced
// here bit for bit (tests/unit/media: every fixture's resized pixels equal transformers').
#pragma once

#include <cstdint>
#include <vector>

namespace ember::media {

// One axis' taps: output i reads input [first[i], first[i] + count[i]) with weights
// weights[i * max_taps + k]; every weight has `precision` fractional bits.
struct ResampleTaps {
  std::vector<int32_t> first;
  std::vector<int32_t> count;
  std::vector<int16_t> weights;
  int32_t max_taps = 0;
  int32_t precision = 0;
};

ResampleTaps LanczosAntialiasTaps(int64_t in_size, int64_t out_size);

// Resizes an interleaved RGB (channels = 3) or any-channel uint8 image. Returns `in` unchanged in
// size when the size is the same (as torchvision does).
std::vector<uint8_t> ResizeLanczosAntialias(const uint8_t* in, int64_t in_h, int64_t in_w, int64_t channels,
                                            int64_t out_h, int64_t out_w);

}  // namespace ember::media
