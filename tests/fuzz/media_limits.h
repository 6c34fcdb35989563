// The limits the media fuzz targets decode under: the server's kinds of bounds, made small so
// that each input runs in milliseconds and a bound that is not enforced shows up as a slow unit
// or a large allocation (run.sh's -timeout and -rss_limit_mb), not only as a crash.
#pragma once

#include "media/media.h"

namespace ember::fuzz {

inline media::MediaLimits SmallMediaLimits() {
  media::MediaLimits limits;
  limits.max_encoded_bytes = 1 << 20;
  limits.max_image_pixels = 1 << 20;
  limits.max_image_side = 4096;
  limits.max_video_frame_pixels = 640 * 480;
  limits.max_video_frames = 256;
  limits.max_video_seconds = 30;
  limits.max_audio_seconds = 30;
  limits.max_decoded_samples = 30 * 48'000 * 2;
  return limits;
}

}  // namespace ember::fuzz
