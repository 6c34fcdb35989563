// MuseGlimmerImageProcessor (transformers 5.23, TorchvisionBackend) in C++: smart_resize under
// the token cap, the uint8 Lanczos antialiased resize torchvision runs (resize.h), rescale and
// normalise fused as transformers does ((x - mean/rescale) / (std/rescale) in float32), and
// patchify with the temporal repeat. Bit-exact against the fixtures in tests/unit/media.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/status.h"
#include "media/image_decode.h"
#include "media/muse_processor_config.h"

namespace ember::media {

struct ProcessedVisual {
  std::vector<float> pixel_values;  // [num_patches, T * 3 * P * P], each patch (t, c, y, x) order
  std::array<int64_t, 3> grid_thw{0, 0, 0};
  int64_t num_patches = 0;          // t * h * w
  int64_t patch_dim = 0;            // T * 3 * P * P
  int64_t num_tokens = 0;           // t * h * w / merge^2: <|patch|> or <|video|> placeholders
};

// transformers' smart_resize: the (height, width) in pixels, multiples of `patch_size` (which is
// patch * merge), whose patch grid is closest in aspect ratio under `max_tokens` patches.
std::pair<int64_t, int64_t> SmartResize(int64_t height, int64_t width, int64_t patch_size, int64_t max_tokens);

// Placeholder count for an image of this size without processing it (vLLM's get_num_image_tokens).
int64_t NumImageTokens(int64_t height, int64_t width, const MuseProcessorConfig& config);

// One decoded image -> pixel_values with grid (1, h, w). `max_image_tokens` < 0 uses the config's.
Expected<ProcessedVisual> ProcessImage(const RgbImage& image, const MuseProcessorConfig& config,
                                       int64_t max_image_tokens = -1);

// <|image_start|> + <|patch|> * num_tokens + <|image_end|> (MuseSparkProcessor.replace_image_token).
std::string RenderImagePlaceholder(const ProcessedVisual& visual);

// Shared by the video processor: resize one frame to (out_h, out_w) and write its normalised
// values into `dst` (3 planes of out_h * out_w floats).
void ResizeNormalizeFrame(const RgbImage& frame, int64_t out_h, int64_t out_w, const std::array<float, 3>& mean,
                          const std::array<float, 3>& std, double rescale_factor, float* dst);

}  // namespace ember::media
