// MuseGlimmerVideoProcessor (transformers 5.23) in C++: frame sampling (sample_frames, with
// torch.linspace's float32 arithmetic), smart_resize under max_video_frame_tokens, the same
// Lanczos resize and normalisation as images, padding to the temporal patch by repeating the last
// frame, patchify; and MuseSparkProcessor.replace_video_token's placeholder text.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "media/muse_image_processor.h"
#include "media/muse_processor_config.h"
#include "media/video_decode.h"

namespace ember::media {

struct ProcessedVideo {
  ProcessedVisual visual;                // grid_thw = (groups, h, w); num_tokens over all groups
  VideoInfo info;
  std::vector<int64_t> frame_indices;    // sampled frames of the stream
  std::vector<float> frame_timestamps;   // index / fps per sampled frame (float32, as transformers)
  std::vector<float> group_timestamps;   // one per temporal group: the prompt's "Time: ..." values
};

// sample_frames: min(int(total * fps / video_fps), num_frames, total) rounded down to a multiple
// of the temporal patch (at least one patch, at most total), spread by torch.linspace(0, total-1)
// in float32 and truncated to integers.
std::vector<int64_t> SampleFrameIndices(const VideoInfo& info, const MuseProcessorConfig& config);

// Decodes and processes a video (the whole path the server calls).
Expected<ProcessedVideo> ProcessVideo(std::span<const uint8_t> bytes, const MediaLimits& limits,
                                      const MuseProcessorConfig& config);

// Processes already-sampled frames (all the same size) whose stream is described by `info`.
Expected<ProcessedVideo> ProcessVideoFrames(const std::vector<RgbImage>& frames, const VideoInfo& info,
                                            const std::vector<int64_t>& frame_indices,
                                            const MuseProcessorConfig& config);

// MuseSparkProcessor.replace_video_token: <|vid_start|> then per temporal group the formatted
// timestamp and tokens_per_group <|video|>, groups separated by <|vid_frame_separator|>, and
// <|vid_end|> after the last.
Expected<std::string> RenderVideoPlaceholder(const ProcessedVideo& video, const MuseProcessorConfig& config);

}  // namespace ember::media
