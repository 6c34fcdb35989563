// Audio as a request sends it (media/audio_decode.h: any self-contained FFmpeg audio container,
// or a video's track, resampled to 24 kHz mono). Beyond "no crash": the samples stay within the
// duration limit, are finite, and the padded input is whole tokens.
#include <cmath>

#include "media/audio_decode.h"
#include "media/muse_processor_config.h"
#include "media_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember::media;
  static const MediaLimits limits = ember::fuzz::SmallMediaLimits();
  static const MuseProcessorConfig config;
  auto audio = DecodeAudio({data, size}, limits, config.sampling_rate);
  if (!audio.ok()) return 0;
  const auto samples = static_cast<int64_t>(audio->samples.size());
  // One output block of slack past the limit: the resampler may flush a partial block.
  if (audio->sample_rate != config.sampling_rate || samples < 1 ||
      samples > static_cast<int64_t>(limits.max_audio_seconds * config.sampling_rate) + 8192) {
    __builtin_trap();
  }
  for (float s : audio->samples) {
    if (!std::isfinite(s)) __builtin_trap();
  }
  const std::vector<float> padded = PadToWholeTokens(audio->samples, config);
  if (static_cast<int64_t>(padded.size()) != NumAudioTokens(samples, config) * config.samples_per_token) {
    __builtin_trap();
  }
  return 0;
}
