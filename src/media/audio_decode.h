// Audio bytes (any container and codec libavformat/libavcodec know: WAV, MP3, FLAC, Ogg, the
// audio stream of an MP4/WebM for use_audio_in_video) -> mono float32 at the model's rate
// (24 kHz for Muse Spark), the waveform MuseSparkFeatureExtractor takes.
//
// Reference (tests/unit/media/README.md): samples decoded by libavcodec and converted to float
// as libswresample does (s16 / 2^15, ...), channels averaged (arithmetic mean, as librosa,
// soundfile and torchaudio backends of transformers' load_audio do), then resampled by
// libswresample with its default settings (what `ffmpeg -ar 24000` does to a mono f32 stream).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "media/media.h"
#include "media/muse_processor_config.h"

namespace ember::media {

struct DecodedAudio {
  std::vector<float> samples;  // mono at `sample_rate`
  int64_t sample_rate = 0;
  int64_t source_rate = 0;
  int64_t source_channels = 0;
};

// On success the samples are never empty and all finite: an input that decodes to nothing, is
// too short to resample, or holds NaN/infinite samples is an InvalidArgument saying so.
Expected<DecodedAudio> DecodeAudio(std::span<const uint8_t> bytes, const MediaLimits& limits,
                                   int64_t target_rate = 24000);

// ceil(num_samples / samples_per_token): MuseSparkProcessor.replace_audio_token's count.
int64_t NumAudioTokens(int64_t num_samples, const MuseProcessorConfig& config);

// The feature extractor's input_values for one clip: zero-padded on the right to a whole number
// of tokens (padding="longest" of a batch of one, pad_to_multiple_of=samples_per_token).
std::vector<float> PadToWholeTokens(std::span<const float> samples, const MuseProcessorConfig& config);

// <|soft_audio_start|> + <|audio|> * num_tokens + <|soft_audio_end|>.
std::string RenderAudioPlaceholder(int64_t num_tokens);

}  // namespace ember::media
