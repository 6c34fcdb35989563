// The Muse Spark / Muse Glimmer processor parameters (image processor, video processor and audio
// feature extractor), with transformers' class defaults, optionally read from a model directory.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace ember::media {

struct MuseProcessorConfig {
  // Shared by the image and video processors (transformers' class attributes).
  int64_t patch_size = 14;
  int64_t temporal_patch_size = 2;
  int64_t merge_size = 2;
  std::array<float, 3> image_mean{0.5f, 0.5f, 0.5f};  // IMAGENET_STANDARD_MEAN
  std::array<float, 3> image_std{0.5f, 0.5f, 0.5f};   // IMAGENET_STANDARD_STD
  double rescale_factor = 1.0 / 255.0;
  // MuseGlimmerImageProcessor
  int64_t max_image_tokens = 4096;  // merged tokens per image
  // MuseGlimmerVideoProcessor
  int64_t max_video_frame_tokens = 144;  // merged tokens per frame
  int64_t num_frames = 96;               // at most this many sampled frames
  double fps = 2.0;                      // frames sampled per second of video
  std::string frame_timestamp_format = "Time: {timestamp:.1f}s";
  // MuseSparkFeatureExtractor
  int64_t sampling_rate = 24000;
  int64_t samples_per_token = 1920;
  // The video and image processors may disagree in a config file; these hold the video's.
  int64_t video_patch_size = 14;
  int64_t video_temporal_patch_size = 2;
  int64_t video_merge_size = 2;
  std::array<float, 3> video_mean{0.5f, 0.5f, 0.5f};
  std::array<float, 3> video_std{0.5f, 0.5f, 0.5f};
  double video_rescale_factor = 1.0 / 255.0;
};

// Reads `dir`/preprocessor_config.json (image processor keys at the top level, or audio keys
// when it is the feature extractor's), `dir`/video_preprocessor_config.json and
// `dir`/processor_config.json (nested "image_processor" / "video_processor" /
// "feature_extractor" objects, transformers 5's layout), each when present, later ones
// overriding. Missing files and keys keep the defaults; keys ember cannot honour (do_resize
// false, a resample other than LANCZOS, a timestamp format it cannot render) are errors.
Expected<MuseProcessorConfig> LoadMuseProcessorConfig(const std::string& dir);

// A short stable string of every field that changes processed outputs: cache keys add it to the
// content hash (media.h), so a model with other processor settings never hits stale entries.
std::string ProcessorConfigKey(const MuseProcessorConfig& config);

// Renders frame_timestamp_format for one timestamp as Python's str.format would for a 0-d
// float32 tensor: "{timestamp:.Nf}" (fixed, N digits, round-half-even on the binary value),
// "{timestamp}" (Python repr of the double), "{{" / "}}" literals. Unsupported specs fail.
Expected<std::string> FormatTimestamp(const std::string& format, float timestamp);

}  // namespace ember::media
