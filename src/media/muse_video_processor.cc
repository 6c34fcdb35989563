#include "media/muse_video_processor.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace ember::media {
namespace {

// torch.linspace(start, end, steps) for float32 on CPU, as its scalar kernel computes it (with
// fused multiply-add): the first half counts up from start, the second half down from end.
std::vector<float> LinspaceF32(float start, float end, int64_t steps) {
  std::vector<float> out(static_cast<size_t>(steps));
  if (steps == 1) {
    out[0] = start;
    return out;
  }
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int64_t halfway = steps / 2;
  for (int64_t i = 0; i < steps; ++i) {
    out[i] = i < halfway ? std::fma(step, static_cast<float>(i), start)
                         : std::fma(-step, static_cast<float>(steps - i - 1), end);
  }
  return out;
}

// Temporal groups of planes -> patches in (group, row, col) order, each (t, c, y, x).
void Patchify(const std::vector<std::vector<float>>& planes, int64_t out_h, int64_t out_w, int64_t P, int64_t T,
              ProcessedVisual* v) {
  const int64_t groups = static_cast<int64_t>(planes.size()) / T;
  const int64_t gh = out_h / P, gw = out_w / P, plane = out_h * out_w;
  v->patch_dim = T * 3 * P * P;
  v->num_patches = groups * gh * gw;
  v->pixel_values.resize(static_cast<size_t>(v->num_patches * v->patch_dim));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t i = 0; i < gh; ++i) {
      for (int64_t j = 0; j < gw; ++j) {
        float* patch = v->pixel_values.data() + ((g * gh + i) * gw + j) * v->patch_dim;
        for (int64_t t = 0; t < T; ++t) {
          const float* frame = planes[g * T + t].data();
          for (int64_t c = 0; c < 3; ++c) {
            for (int64_t y = 0; y < P; ++y) {
              std::memcpy(patch + ((t * 3 + c) * P + y) * P, frame + c * plane + (i * P + y) * out_w + j * P,
                          P * sizeof(float));
            }
          }
        }
      }
    }
  }
  v->grid_thw = {groups, gh, gw};
}

void FinishTimestamps(const VideoInfo& info, int64_t T, ProcessedVideo* video) {
  video->frame_timestamps.clear();
  for (int64_t idx : video->frame_indices) {
    video->frame_timestamps.push_back(static_cast<float>(idx) / static_cast<float>(info.fps));
  }
  const int64_t groups = video->visual.grid_thw[0];
  video->group_timestamps.clear();
  for (size_t i = 0; i < video->frame_timestamps.size() && int64_t(video->group_timestamps.size()) < groups; i += T) {
    video->group_timestamps.push_back(video->frame_timestamps[i]);
  }
  while (int64_t(video->group_timestamps.size()) < groups) {
    video->group_timestamps.push_back(video->group_timestamps.empty() ? 0.0f : video->group_timestamps.back());
  }
}

// Pads to a whole temporal patch by repeating the last frame, patchifies, adds timestamps.
Expected<ProcessedVideo> Assemble(std::vector<std::vector<float>> planes, int64_t out_h, int64_t out_w,
                                  const VideoInfo& info, const std::vector<int64_t>& indices,
                                  const MuseProcessorConfig& c) {
  if (planes.empty()) return InvalidArgument("the video has no frames to process");
  const int64_t T = c.video_temporal_patch_size;
  while (static_cast<int64_t>(planes.size()) % T != 0) planes.push_back(planes.back());
  ProcessedVideo video;
  video.info = info;
  video.frame_indices = indices;
  Patchify(planes, out_h, out_w, c.video_patch_size, T, &video.visual);
  video.visual.num_tokens = video.visual.num_patches / (c.video_merge_size * c.video_merge_size);
  FinishTimestamps(info, T, &video);
  return video;
}

}  // namespace

std::vector<int64_t> SampleFrameIndices(const VideoInfo& info, const MuseProcessorConfig& c) {
  const int64_t total = info.total_num_frames;
  const int64_t T = c.video_temporal_patch_size;
  if (total <= 0) return {};
  const double video_fps = info.fps > 0 ? info.fps : 24.0;
  int64_t n = static_cast<int64_t>(static_cast<double>(total) * c.fps / video_fps);  // Python int(): truncation
  n = std::min({n, c.num_frames, total});
  n = std::max(T, (n / T) * T);
  n = std::min(n, total);
  std::vector<int64_t> indices;
  for (float v : LinspaceF32(0.0f, static_cast<float>(total - 1), n)) indices.push_back(static_cast<int64_t>(v));
  return indices;
}

Expected<ProcessedVideo> ProcessVideoFrames(const std::vector<RgbImage>& frames, const VideoInfo& info,
                                            const std::vector<int64_t>& frame_indices, const MuseProcessorConfig& c) {
  if (frames.empty()) return InvalidArgument("the video has no frames to process");
  const int64_t P = c.video_patch_size;
  const int64_t h = frames[0].height, w = frames[0].width;
  const auto [out_h, out_w] = SmartResize(h, w, P * c.video_merge_size, c.max_video_frame_tokens);
  std::vector<std::vector<float>> planes;
  for (const RgbImage& f : frames) {
    if (f.height != h || f.width != w) return InvalidArgument("the video's frames differ in size");
    planes.emplace_back(static_cast<size_t>(3 * out_h * out_w));
    ResizeNormalizeFrame(f, out_h, out_w, c.video_mean, c.video_std, c.video_rescale_factor, planes.back().data());
  }
  return Assemble(std::move(planes), out_h, out_w, info, frame_indices, c);
}

Expected<ProcessedVideo> ProcessVideo(std::span<const uint8_t> bytes, const MediaLimits& limits,
                                      const MuseProcessorConfig& c) {
  const int64_t P = c.video_patch_size;
  std::vector<int64_t> indices;
  std::vector<std::vector<float>> planes;
  int64_t out_h = 0, out_w = 0;
  auto sampler = [&](const VideoInfo& info) -> Expected<std::vector<int64_t>> {
    indices = SampleFrameIndices(info, c);
    const auto size = SmartResize(info.height, info.width, P * c.video_merge_size, c.max_video_frame_tokens);
    out_h = size.first;
    out_w = size.second;
    return indices;
  };
  // Each frame is resized and normalised as it arrives: only the small processed planes are kept.
  auto sink = [&](int64_t, RgbImage frame) -> Status {
    planes.emplace_back(static_cast<size_t>(3 * out_h * out_w));
    ResizeNormalizeFrame(frame, out_h, out_w, c.video_mean, c.video_std, c.video_rescale_factor, planes.back().data());
    return Status::Ok();
  };
  EMBER_ASSIGN_OR_RETURN(VideoInfo info, DecodeVideo(bytes, limits, sampler, sink));
  return Assemble(std::move(planes), out_h, out_w, info, indices, c);
}

Expected<std::string> RenderVideoPlaceholder(const ProcessedVideo& video, const MuseProcessorConfig& c) {
  const int64_t groups = video.visual.grid_thw[0];
  const int64_t per_group =
      video.visual.grid_thw[1] * video.visual.grid_thw[2] / (c.video_merge_size * c.video_merge_size);
  std::string s = "<|vid_start|>";
  for (int64_t g = 0; g < groups; ++g) {
    const float ts = g < int64_t(video.group_timestamps.size()) ? video.group_timestamps[g] : 0.0f;
    EMBER_ASSIGN_OR_RETURN(std::string stamp, FormatTimestamp(c.frame_timestamp_format, ts));
    s += stamp;
    for (int64_t k = 0; k < per_group; ++k) s += "<|video|>";
    s += g < groups - 1 ? "<|vid_frame_separator|>" : "<|vid_end|>";
  }
  return s;
}

}  // namespace ember::media
