#include "media/audio_decode.h"

extern "C" {
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
}

#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "media/ffmpeg_input.h"

namespace ember::media {
namespace {

struct SwrDeleter {
  void operator()(SwrContext* s) const { swr_free(&s); }
};

// Sample `i` of channel `c` as float, with libswresample's conversions.
inline float SampleAt(const AVFrame* f, AVSampleFormat fmt, int channels, int c, int i) {
  const bool planar = av_sample_fmt_is_planar(fmt);
  const uint8_t* base = planar ? f->extended_data[c] : f->extended_data[0];
  const int k = planar ? i : i * channels + c;
  switch (av_get_packed_sample_fmt(fmt)) {
    case AV_SAMPLE_FMT_U8: return static_cast<float>(base[k] - 0x80) * (1.0f / (1 << 7));
    case AV_SAMPLE_FMT_S16: return static_cast<float>(reinterpret_cast<const int16_t*>(base)[k]) * (1.0f / (1 << 15));
    case AV_SAMPLE_FMT_S32:
      return static_cast<float>(reinterpret_cast<const int32_t*>(base)[k]) * (1.0f / (1u << 31));
    case AV_SAMPLE_FMT_S64:
      return static_cast<float>(reinterpret_cast<const int64_t*>(base)[k]) * (1.0f / static_cast<float>(1ull << 63));
    case AV_SAMPLE_FMT_FLT: return reinterpret_cast<const float*>(base)[k];
    case AV_SAMPLE_FMT_DBL: return static_cast<float>(reinterpret_cast<const double*>(base)[k]);
    default: return 0.0f;
  }
}

// The reference turns a NaN or infinite sample into NaN features for the whole clip, and so does
// a finite one that overflows float when the channels are summed or the resampler's filter
// overshoots (float PCM of 3e38): a request error, not garbage handed to the audio tower.
Status CheckFinite(const std::vector<float>& samples, int64_t rate) {
  for (size_t i = 0; i < samples.size(); ++i) {
    if (!std::isfinite(samples[i])) {
      return InvalidArgument(fmt::format(
          "the audio has a sample that is not a finite number (NaN or infinity, or too large for float32 once "
          "mixed to mono and resampled) at {:.3f} s; send PCM within [-1, 1]",
          static_cast<double>(i) / static_cast<double>(rate)));
    }
  }
  return Status::Ok();
}

}  // namespace

Expected<DecodedAudio> DecodeAudio(std::span<const uint8_t> bytes, const MediaLimits& limits, int64_t target_rate) {
  EMBER_RETURN_IF_ERROR(CheckEncodedSize(bytes, limits, "audio"));
  FfmpegInput input;
  EMBER_RETURN_IF_ERROR(input.Open(bytes, "audio"));
  int index = -1;
  for (unsigned i = 0; i < input.format()->nb_streams; ++i) {
    if (input.format()->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_AUDIO) {
      index = static_cast<int>(i);
      break;
    }
  }
  if (index < 0) return InvalidArgument("the input has no audio stream");
  const AVCodecParameters* par = input.format()->streams[index]->codecpar;
  if (par->sample_rate <= 0 || par->sample_rate > 768000) {
    return InvalidArgument(fmt::format("the audio's sample rate ({} Hz) is not plausible", par->sample_rate));
  }
  if (par->ch_layout.nb_channels <= 0 || par->ch_layout.nb_channels > 64) {
    return InvalidArgument(fmt::format("the audio has {} channels (1 to 64 are accepted)", par->ch_layout.nb_channels));
  }
  if (input.format()->duration != AV_NOPTS_VALUE && input.format()->duration > 0) {
    const double declared = static_cast<double>(input.format()->duration) / AV_TIME_BASE;
    if (declared > limits.max_audio_seconds + 1.0) {
      return InvalidArgument(fmt::format("the audio lasts {:.1f} s, over the limit of {:.1f} s", declared,
                                         limits.max_audio_seconds));
    }
  }
  EMBER_RETURN_IF_ERROR(input.OpenDecoder(index, "audio"));
  DecodedAudio out;
  out.source_rate = par->sample_rate;
  out.source_channels = par->ch_layout.nb_channels;
  out.sample_rate = target_rate;

  std::vector<float> mono;
  int64_t decoded_samples = 0;  // all channels
  PacketPtr packet(av_packet_alloc());
  FramePtr frame(av_frame_alloc());
  if (!packet || !frame) return ResourceExhausted("av_packet_alloc / av_frame_alloc failed");
  Status failure;
  auto drain = [&]() -> bool {
    while (true) {
      const int err = avcodec_receive_frame(input.decoder(), frame.get());
      if (err == AVERROR(EAGAIN) || err == AVERROR_EOF || err < 0) return true;
      const int channels = frame->ch_layout.nb_channels;
      const auto fmt = static_cast<AVSampleFormat>(frame->format);
      if (frame->sample_rate != out.source_rate || channels != out.source_channels) {
        failure = InvalidArgument(fmt::format("the audio changes format mid-stream ({} Hz x {} to {} Hz x {})",
                                              out.source_rate, out.source_channels, frame->sample_rate, channels));
        return false;
      }
      decoded_samples += static_cast<int64_t>(frame->nb_samples) * channels;
      if (decoded_samples > limits.max_decoded_samples ||
          static_cast<double>(mono.size() + frame->nb_samples) / out.source_rate > limits.max_audio_seconds) {
        failure = InvalidArgument(fmt::format("the audio decodes to more than {:.1f} s or {} samples (the limits)",
                                              limits.max_audio_seconds, limits.max_decoded_samples));
        return false;
      }
      const auto packed = av_get_packed_sample_fmt(fmt);
      if (packed != AV_SAMPLE_FMT_U8 && packed != AV_SAMPLE_FMT_S16 && packed != AV_SAMPLE_FMT_S32 &&
          packed != AV_SAMPLE_FMT_S64 && packed != AV_SAMPLE_FMT_FLT && packed != AV_SAMPLE_FMT_DBL) {
        failure = InvalidArgument(fmt::format("the audio decoder produced sample format {}", av_get_sample_fmt_name(fmt)));
        return false;
      }
      // numpy's mean over channels in float32: the sum in channel order, then / channels.
      for (int i = 0; i < frame->nb_samples; ++i) {
        float sum = SampleAt(frame.get(), fmt, channels, 0, i);
        for (int c = 1; c < channels; ++c) sum += SampleAt(frame.get(), fmt, channels, c, i);
        mono.push_back(channels == 1 ? sum : sum / static_cast<float>(channels));
      }
      av_frame_unref(frame.get());
    }
  };
  bool go = true;
  while (go && av_read_frame(input.format(), packet.get()) >= 0) {
    if (packet->stream_index == index) {
      const int err = avcodec_send_packet(input.decoder(), packet.get());
      av_packet_unref(packet.get());
      if (err < 0 && err != AVERROR(EAGAIN)) continue;  // a corrupt packet: skipped, as the ffmpeg CLI does
      go = drain();
    } else {
      av_packet_unref(packet.get());
    }
  }
  if (go) {
    avcodec_send_packet(input.decoder(), nullptr);
    drain();
  }
  EMBER_RETURN_IF_ERROR(failure);
  if (mono.empty()) return InvalidArgument("the audio stream has no samples");

  if (out.source_rate == target_rate) {
    EMBER_RETURN_IF_ERROR(CheckFinite(mono, target_rate));
    out.samples = std::move(mono);
    return out;
  }
  SwrContext* raw = nullptr;
  AVChannelLayout layout = AV_CHANNEL_LAYOUT_MONO;
  int err = swr_alloc_set_opts2(&raw, &layout, AV_SAMPLE_FMT_FLT, static_cast<int>(target_rate), &layout,
                                AV_SAMPLE_FMT_FLT, static_cast<int>(out.source_rate), 0, nullptr);
  std::unique_ptr<SwrContext, SwrDeleter> swr(raw);
  if (err < 0 || !swr || swr_init(swr.get()) < 0) return Internal("libswresample could not be initialised");
  const int64_t capacity = swr_get_out_samples(swr.get(), static_cast<int>(mono.size())) + 64;
  out.samples.resize(static_cast<size_t>(capacity));
  const uint8_t* in_planes[1] = {reinterpret_cast<const uint8_t*>(mono.data())};
  uint8_t* out_planes[1] = {reinterpret_cast<uint8_t*>(out.samples.data())};
  int produced = swr_convert(swr.get(), out_planes, static_cast<int>(capacity), in_planes, static_cast<int>(mono.size()));
  if (produced < 0) return Internal("libswresample failed to resample");
  int64_t total = produced;
  while (true) {  // flush the filter's delay
    out_planes[0] = reinterpret_cast<uint8_t*>(out.samples.data() + total);
    const int left = static_cast<int>(capacity - total);
    if (left <= 0) break;
    produced = swr_convert(swr.get(), out_planes, left, nullptr, 0);
    if (produced <= 0) break;
    total += produced;
  }
  out.samples.resize(static_cast<size_t>(total));
  // libswresample emits nothing for an input shorter than about half its filter (16 to 32 input
  // samples, flush included): a clip of under a millisecond or so.
  if (out.samples.empty()) {
    return InvalidArgument(fmt::format("the audio is too short to resample: {} samples at {} Hz give none at {} Hz; "
                                       "send at least a few milliseconds",
                                       mono.size(), out.source_rate, target_rate));
  }
  EMBER_RETURN_IF_ERROR(CheckFinite(out.samples, target_rate));
  return out;
}

int64_t NumAudioTokens(int64_t num_samples, const MuseProcessorConfig& c) {
  return (num_samples + c.samples_per_token - 1) / c.samples_per_token;
}

std::vector<float> PadToWholeTokens(std::span<const float> samples, const MuseProcessorConfig& c) {
  std::vector<float> out(samples.begin(), samples.end());
  out.resize(static_cast<size_t>(NumAudioTokens(static_cast<int64_t>(samples.size()), c) * c.samples_per_token), 0.0f);
  return out;
}

std::string RenderAudioPlaceholder(int64_t num_tokens) {
  std::string s = "<|soft_audio_start|>";
  for (int64_t i = 0; i < num_tokens; ++i) s += "<|audio|>";
  return s + "<|soft_audio_end|>";
}

}  // namespace ember::media
