#include "media/video_decode.h"

extern "C" {
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}

#include <cmath>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "media/ffmpeg_input.h"

namespace ember::media {
namespace {


int FindVideoStream(AVFormatContext* format) {
  for (unsigned i = 0; i < format->nb_streams; ++i) {
    const AVStream* s = format->streams[i];
    if (s->codecpar->codec_type == AVMEDIA_TYPE_VIDEO && (s->disposition & AV_DISPOSITION_ATTACHED_PIC) == 0) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// RGB24 with the conversion the ffmpeg CLI's auto-inserted scaler uses (bicubic flags, the
// frame's colour matrix and range), so frames equal `ffmpeg -pix_fmt rgb24`'s.
Status ToRgb(const AVFrame* frame, SwsContext** sws, RgbImage* out) {
  const auto fmt = static_cast<AVPixelFormat>(frame->format);
  *sws = sws_getCachedContext(*sws, frame->width, frame->height, fmt, frame->width, frame->height,
                              AV_PIX_FMT_RGB24, SWS_BICUBIC, nullptr, nullptr, nullptr);
  if (*sws == nullptr) return InvalidArgument("the video's pixel format cannot be converted to RGB");
  int* inv_table = nullptr;
  int* table = nullptr;
  int src_range = 0, dst_range = 0, brightness = 0, contrast = 0, saturation = 0;
  if (sws_getColorspaceDetails(*sws, &inv_table, &src_range, &table, &dst_range, &brightness, &contrast,
                               &saturation) >= 0) {
    const int cs = frame->colorspace == AVCOL_SPC_UNSPECIFIED ? SWS_CS_DEFAULT : frame->colorspace;
    const int* coefs = sws_getCoefficients(cs);
    const bool full = frame->color_range == AVCOL_RANGE_JPEG || fmt == AV_PIX_FMT_YUVJ420P ||
                      fmt == AV_PIX_FMT_YUVJ422P || fmt == AV_PIX_FMT_YUVJ444P;
    sws_setColorspaceDetails(*sws, coefs, full ? 1 : src_range, table, dst_range, brightness, contrast, saturation);
  }
  out->width = frame->width;
  out->height = frame->height;
  out->pixels.resize(static_cast<size_t>(frame->width) * frame->height * 3);
  uint8_t* dst[4] = {out->pixels.data(), nullptr, nullptr, nullptr};
  int dst_stride[4] = {frame->width * 3, 0, 0, 0};
  sws_scale(*sws, frame->data, frame->linesize, 0, frame->height, dst, dst_stride);
  return Status::Ok();
}

}  // namespace

Expected<VideoInfo> DecodeVideo(std::span<const uint8_t> bytes, const MediaLimits& limits, const FrameSampler& sample,
                                const FrameSink& sink) {
  EMBER_RETURN_IF_ERROR(CheckEncodedSize(bytes, limits, "video"));
  FfmpegInput input;
  EMBER_RETURN_IF_ERROR(input.Open(bytes, "video"));
  int index = FindVideoStream(input.format());
  if (index < 0) return InvalidArgument("the video has no video stream");
  AVStream* stream = input.format()->streams[index];
  VideoInfo info;
  info.width = stream->codecpar->width;
  info.height = stream->codecpar->height;
  if (info.width <= 0 || info.height <= 0) {
    return InvalidArgument(fmt::format("the video stream declares a frame size of {}x{}", info.width, info.height));
  }
  if (info.width * info.height > limits.max_video_frame_pixels) {
    return InvalidArgument(fmt::format("the video's frames are {}x{} = {} pixels, over the limit of {} pixels",
                                       info.width, info.height, info.width * info.height,
                                       limits.max_video_frame_pixels));
  }
  const AVRational rate = stream->avg_frame_rate.num > 0 && stream->avg_frame_rate.den > 0 ? stream->avg_frame_rate
                                                                                           : stream->r_frame_rate;
  info.fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 24.0;  // transformers' default when unknown
  if (!(info.fps > 0) || !std::isfinite(info.fps) || info.fps > 1000) {
    return InvalidArgument(fmt::format("the video's frame rate ({}) is not plausible", info.fps));
  }
  if (input.format()->duration != AV_NOPTS_VALUE && input.format()->duration > 0) {
    const double declared = static_cast<double>(input.format()->duration) / AV_TIME_BASE;
    if (declared > limits.max_video_seconds) {
      return InvalidArgument(fmt::format("the video lasts {:.1f} s, over the limit of {:.1f} s", declared,
                                         limits.max_video_seconds));
    }
  }
  // Pass 1: count the stream's packets (no decoding).
  PacketPtr packet(av_packet_alloc());
  if (!packet) return ResourceExhausted("av_packet_alloc failed");
  int64_t total = 0;
  while (av_read_frame(input.format(), packet.get()) >= 0) {
    if (packet->stream_index == index) ++total;
    av_packet_unref(packet.get());
    if (total > limits.max_video_frames) {
      return InvalidArgument(fmt::format("the video has more than {} frames (the limit)", limits.max_video_frames));
    }
  }
  if (total == 0) return InvalidArgument("the video stream has no frames");
  info.total_num_frames = total;
  info.duration_seconds = static_cast<double>(total) / info.fps;
  if (info.duration_seconds > limits.max_video_seconds) {
    return InvalidArgument(fmt::format("the video lasts {:.1f} s ({} frames at {:.3f} fps), over the limit of {:.1f} s",
                                       info.duration_seconds, total, info.fps, limits.max_video_seconds));
  }
  EMBER_ASSIGN_OR_RETURN(std::vector<int64_t> wanted, sample(info));
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (wanted[i] < 0 || wanted[i] >= total || (i > 0 && wanted[i] < wanted[i - 1])) {
      return Internal("the frame sampler returned indices that are not ascending within the video");
    }
  }
  if (wanted.empty()) return info;

  // Pass 2: decode in order, converting only the wanted frames.
  EMBER_RETURN_IF_ERROR(input.Reopen("video"));
  index = FindVideoStream(input.format());
  if (index < 0) return InvalidArgument("the video has no video stream");
  EMBER_RETURN_IF_ERROR(input.OpenDecoder(index, "video"));
  FramePtr frame(av_frame_alloc());
  if (!frame) return ResourceExhausted("av_frame_alloc failed");
  SwsContext* sws_raw = nullptr;  // freed after the decode loop, which never returns early
  size_t next = 0;         // position in `wanted`
  int64_t decoded = 0;     // frames decoded so far
  RgbImage last;
  Status failure;
  auto drain = [&]() -> bool {  // false when done or failed
    while (true) {
      const int err = avcodec_receive_frame(input.decoder(), frame.get());
      if (err == AVERROR(EAGAIN) || err == AVERROR_EOF) return true;
      if (err < 0) return true;  // a corrupt frame: skip it, as the ffmpeg CLI does
      if (frame->width != info.width || frame->height != info.height) {
        failure = InvalidArgument(fmt::format("the video changes frame size mid-stream ({}x{} to {}x{})", info.width,
                                              info.height, frame->width, frame->height));
        return false;
      }
      const int64_t k = decoded++;
      if (next < wanted.size() && wanted[next] == k) {
        RgbImage rgb;
        failure = ToRgb(frame.get(), &sws_raw, &rgb);
        if (!failure.ok()) return false;
        while (next + 1 < wanted.size() && wanted[next + 1] == k) {
          failure = sink(static_cast<int64_t>(next++), rgb);
          if (!failure.ok()) return false;
        }
        last = rgb;
        failure = sink(static_cast<int64_t>(next++), std::move(rgb));
        if (!failure.ok()) return false;
      }
      av_frame_unref(frame.get());
      if (next == wanted.size()) return false;
    }
  };
  bool go = true;
  while (go && av_read_frame(input.format(), packet.get()) >= 0) {
    if (packet->stream_index == index) {
      const int err = avcodec_send_packet(input.decoder(), packet.get());
      av_packet_unref(packet.get());
      if (err < 0 && err != AVERROR(EAGAIN)) continue;  // a corrupt packet: skip it
      go = drain();
    } else {
      av_packet_unref(packet.get());
    }
  }
  if (go) {
    avcodec_send_packet(input.decoder(), nullptr);  // flush delayed frames
    drain();
  }
  sws_freeContext(sws_raw);
  EMBER_RETURN_IF_ERROR(failure);
  if (next < wanted.size()) {
    if (decoded == 0 || last.pixels.empty()) return InvalidArgument("no frame of the video could be decoded");
    while (next < wanted.size()) EMBER_RETURN_IF_ERROR(sink(static_cast<int64_t>(next++), last));
  }
  return info;
}

Expected<DecodedVideo> DecodeVideoFrames(std::span<const uint8_t> bytes, const MediaLimits& limits,
                                         const FrameSampler& sample) {
  DecodedVideo out;
  auto sampler = [&](const VideoInfo& info) -> Expected<std::vector<int64_t>> {
    auto indices = sample(info);
    if (indices.ok()) out.frame_indices = *indices;
    return indices;
  };
  auto sink = [&](int64_t, RgbImage frame) {
    out.frames.push_back(std::move(frame));
    return Status::Ok();
  };
  EMBER_ASSIGN_OR_RETURN(out.info, DecodeVideo(bytes, limits, sampler, sink));
  return out;
}

}  // namespace ember::media
