// Images as a request sends them (media/image_decode.h: JPEG, PNG and WebP by their magic bytes,
// EXIF orientation, alpha), then Muse Spark's image processor. Beyond "no crash": a decoded
// image keeps its limits and its buffer is exactly width x height x 3, and the processed patches
// agree with their grid.
#include "media/image_decode.h"
#include "media/muse_image_processor.h"
#include "media/muse_processor_config.h"
#include "media_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember::media;
  static const MediaLimits limits = ember::fuzz::SmallMediaLimits();
  static const MuseProcessorConfig config;
  auto image = DecodeImage({data, size}, limits);
  if (!image.ok()) return 0;
  if (image->width < 1 || image->height < 1 || image->width > limits.max_image_side ||
      image->height > limits.max_image_side || image->width * image->height > limits.max_image_pixels ||
      static_cast<int64_t>(image->pixels.size()) != image->width * image->height * 3) {
    __builtin_trap();
  }
  // A smaller token budget than the released one keeps each input fast; the resize and
  // patchify are the same code.
  auto processed = ProcessImage(*image, config, /*max_image_tokens=*/256);
  if (!processed.ok()) return 0;
  const auto& g = processed->grid_thw;
  if (g[0] * g[1] * g[2] != processed->num_patches ||
      static_cast<int64_t>(processed->pixel_values.size()) != processed->num_patches * processed->patch_dim ||
      processed->num_tokens * config.merge_size * config.merge_size != processed->num_patches) {
    __builtin_trap();
  }
  return 0;
}
