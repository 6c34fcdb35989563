// Video bytes -> the frames transformers' Muse video processor would sample, decoded with
// libavformat / libavcodec and converted to RGB24 with libswscale, from memory (no temp files).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/status.h"
#include "media/image_decode.h"
#include "media/media.h"

namespace ember::media {

// What transformers' VideoMetadata holds for the sampler.
struct VideoInfo {
  double fps = 0;                // the stream's average frame rate (r_frame_rate, then 24, if unknown)
  int64_t total_num_frames = 0;  // packets of the video stream, counted (container headers can lie)
  double duration_seconds = 0;   // total_num_frames / fps
  int64_t width = 0;
  int64_t height = 0;
};

// Chooses which frames to keep once the stream is counted (indices ascending, < total_num_frames).
using FrameSampler = std::function<Expected<std::vector<int64_t>>(const VideoInfo&)>;
// Receives each kept frame in order: `position` indexes the sampler's list.
using FrameSink = std::function<Status(int64_t position, RgbImage frame)>;

// Decodes the best video stream: counts its frames (checking max_video_frames, the duration and
// the frame size against `limits` before decoding anything), asks `sample` for indices, then
// decodes in order and hands each wanted frame to `sink`. If the decoder yields fewer frames
// than counted, missing trailing indices repeat the last decoded frame (transformers' video
// readers would return fewer frames; the processor pads to the temporal patch the same way).
Expected<VideoInfo> DecodeVideo(std::span<const uint8_t> bytes, const MediaLimits& limits,
                                const FrameSampler& sample, const FrameSink& sink);

// Convenience for tests and tools: the sampled frames collected in memory.
struct DecodedVideo {
  VideoInfo info;
  std::vector<int64_t> frame_indices;
  std::vector<RgbImage> frames;
};
Expected<DecodedVideo> DecodeVideoFrames(std::span<const uint8_t> bytes, const MediaLimits& limits,
                                         const FrameSampler& sample);

}  // namespace ember::media
