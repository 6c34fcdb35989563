#include "media/ffmpeg_input.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

namespace ember::media {

std::string AvErrorText(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(err, buf, sizeof(buf));
  return buf;
}

FfmpegInput::~FfmpegInput() { Close(); }

void FfmpegInput::Close() {
  if (decoder_ != nullptr) avcodec_free_context(&decoder_);
  if (format_ != nullptr) avformat_close_input(&format_);
  if (io_ != nullptr) {
    av_freep(&io_->buffer);
    avio_context_free(&io_);
  }
}

int FfmpegInput::Read(void* opaque, uint8_t* buf, int size) {
  auto* self = static_cast<FfmpegInput*>(opaque);
  const int64_t left = static_cast<int64_t>(self->bytes_.size()) - self->pos_;
  if (left <= 0) return AVERROR_EOF;
  const int n = static_cast<int>(std::min<int64_t>(left, size));
  std::memcpy(buf, self->bytes_.data() + self->pos_, n);
  self->pos_ += n;
  return n;
}

int64_t FfmpegInput::Seek(void* opaque, int64_t offset, int whence) {
  auto* self = static_cast<FfmpegInput*>(opaque);
  const auto size = static_cast<int64_t>(self->bytes_.size());
  int64_t target;
  switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE: return size;
    case SEEK_SET: target = offset; break;
    case SEEK_CUR: target = self->pos_ + offset; break;
    case SEEK_END: target = size + offset; break;
    default: return AVERROR(EINVAL);
  }
  if (target < 0 || target > size) return AVERROR(EINVAL);
  self->pos_ = target;
  return target;
}

namespace {

// FFmpeg demuxers (by their names) whose files hold their streams themselves: MP4/QuickTime,
// Matroska/WebM, AVI, FLV, ASF, MPEG-TS/PS, Ogg and the audio formats.
constexpr const char* kSelfContainedFormats =
    "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,flv,asf,mpegts,mpeg,ogg,wav,w64,mp3,flac,aac,aiff,caf,au,amr";

int RefuseNestedOpen(AVFormatContext* /*context*/, AVIOContext** /*pb*/, const char* /*url*/, int /*flags*/,
                     AVDictionary** /*options*/) {
  return AVERROR(EPERM);
}

}  // namespace

Status FfmpegInput::Open(std::span<const uint8_t> bytes, const char* what) {
  // FFmpeg would print every complaint about a hostile file to stderr; errors come back as
  // Status instead. (Process-wide: nothing else in ember uses FFmpeg's log.)
  static std::once_flag quiet;
  std::call_once(quiet, [] { av_log_set_level(AV_LOG_QUIET); });
  Close();
  bytes_ = bytes;
  pos_ = 0;
  constexpr int kBufferSize = 1 << 16;
  auto* buffer = static_cast<uint8_t*>(av_malloc(kBufferSize));
  if (buffer == nullptr) return ResourceExhausted("av_malloc failed");
  io_ = avio_alloc_context(buffer, kBufferSize, 0, this, &FfmpegInput::Read, nullptr, &FfmpegInput::Seek);
  if (io_ == nullptr) {
    av_free(buffer);
    return ResourceExhausted("avio_alloc_context failed");
  }
  format_ = avformat_alloc_context();
  if (format_ == nullptr) return ResourceExhausted("avformat_alloc_context failed");
  format_->pb = io_;
  format_->flags |= AVFMT_FLAG_CUSTOM_IO;
  // The request's bytes are all a demuxer may read: playlists (HLS, ffconcat), image sequences and
  // external references would otherwise make FFmpeg open files or URLs on the server. So any
  // nested open fails, and only self-contained containers are demuxed at all.
  format_->io_open = &RefuseNestedOpen;
  // Probing reads at most the first MiB and 5 s of packets: a hostile file cannot make probing slow.
  AVDictionary* options = nullptr;
  av_dict_set(&options, "format_whitelist", kSelfContainedFormats, 0);
  av_dict_set(&options, "probesize", "1048576", 0);
  av_dict_set(&options, "analyzeduration", "5000000", 0);
  int err = avformat_open_input(&format_, nullptr, nullptr, &options);
  av_dict_free(&options);
  if (err < 0) {
    // avformat_open_input frees the context on failure.
    format_ = nullptr;
    return InvalidArgument(fmt::format("the {} is not in a container format FFmpeg recognises ({})", what,
                                       AvErrorText(err)));
  }
  err = avformat_find_stream_info(format_, nullptr);
  if (err < 0) {
    return InvalidArgument(fmt::format("the {} could not be read: {}", what, AvErrorText(err)));
  }
  return Status::Ok();
}

Status FfmpegInput::Reopen(const char* what) { return Open(bytes_, what); }

Status FfmpegInput::OpenDecoder(int index, const char* what) {
  AVStream* stream = format_->streams[index];
  const AVCodec* codec = avcodec_find_decoder(stream->codecpar->codec_id);
  if (codec == nullptr) {
    return InvalidArgument(fmt::format("the {}'s codec ({}) is not supported", what,
                                       avcodec_get_name(stream->codecpar->codec_id)));
  }
  decoder_ = avcodec_alloc_context3(codec);
  if (decoder_ == nullptr) return ResourceExhausted("avcodec_alloc_context3 failed");
  int err = avcodec_parameters_to_context(decoder_, stream->codecpar);
  if (err < 0) return InvalidArgument(fmt::format("the {}'s codec parameters are invalid: {}", what, AvErrorText(err)));
  decoder_->thread_count = 1;
  decoder_->pkt_timebase = stream->time_base;
  err = avcodec_open2(decoder_, codec, nullptr);
  if (err < 0) {
    return InvalidArgument(fmt::format("the {}'s {} decoder could not start: {}", what, codec->name, AvErrorText(err)));
  }
  return Status::Ok();
}

}  // namespace ember::media
