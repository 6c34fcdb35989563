// Image bytes -> the RGB picture transformers' Muse processors see: JPEG (libjpeg-turbo), PNG
// (libpng) and WebP (libwebp), told apart by magic bytes. The reference is PIL as transformers
// uses it: Image.open(bytes), ImageOps.exif_transpose (load_image and load_image_as_tensor both
// apply the EXIF orientation), then transformers' convert_to_rgb for PIL inputs, which composites
// any transparency (alpha channel, or a tRNS colour / palette entry) onto white with
// PIL.Image.alpha_composite. README.md lists where this differs from PIL and why.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "media/media.h"

namespace ember::media {

struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> pixels;  // height * width * 3, rows top to bottom, R G B interleaved
};

// Any failure (empty, truncated, corrupt, not an image, unsupported format, over a limit) is an
// InvalidArgument whose message says what was wrong.
Expected<RgbImage> DecodeImage(std::span<const uint8_t> bytes, const MediaLimits& limits);

// EXIF orientation (1..8) from a TIFF-structured EXIF block (with or without the "Exif\0\0"
// prefix); 1 when absent or unreadable. Exposed for tests.
int ExifOrientation(std::span<const uint8_t> exif);

// Applies an EXIF orientation exactly as PIL's ImageOps.exif_transpose does (2..8; 1 is a no-op).
RgbImage ApplyExifOrientation(RgbImage image, int orientation);

// PIL's alpha_composite of an RGBA pixel over opaque white, then dropped alpha (bit-exact).
void CompositeOverWhite(const uint8_t* rgba, int64_t num_pixels, uint8_t* rgb);

}  // namespace ember::media
