// Videos as a request sends them (media/muse_video_processor.h: FFmpeg demuxing from memory over
// the self-contained containers only, frame sampling, Muse Spark's video processor). Beyond "no
// crash": the patches agree with their grid, one timestamp per sampled frame and per temporal
// group, and the sampled frames are in order inside the stream.
#include "media/muse_processor_config.h"
#include "media/muse_video_processor.h"
#include "media_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember::media;
  static const MediaLimits limits = ember::fuzz::SmallMediaLimits();
  static const MuseProcessorConfig config = [] {
    MuseProcessorConfig c;
    c.num_frames = 8;              // fewer frames per input, the same sampling and resize code
    c.max_video_frame_tokens = 16;
    return c;
  }();
  auto video = ProcessVideo({data, size}, limits, config);
  if (!video.ok()) return 0;
  const ProcessedVisual& v = video->visual;
  const int64_t merge = config.video_merge_size;
  if (v.grid_thw[0] * v.grid_thw[1] * v.grid_thw[2] != v.num_patches ||
      static_cast<int64_t>(v.pixel_values.size()) != v.num_patches * v.patch_dim ||
      v.num_tokens * merge * merge != v.num_patches ||
      video->frame_indices.size() != video->frame_timestamps.size() ||
      static_cast<int64_t>(video->group_timestamps.size()) != v.grid_thw[0] ||
      static_cast<int64_t>(video->frame_indices.size()) > config.num_frames + config.video_temporal_patch_size) {
    __builtin_trap();
  }
  for (size_t i = 1; i < video->frame_indices.size(); ++i) {
    if (video->frame_indices[i] < video->frame_indices[i - 1]) __builtin_trap();
  }
  (void)RenderVideoPlaceholder(*video, config);
  return 0;
}
