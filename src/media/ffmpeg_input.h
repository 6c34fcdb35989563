// An FFmpeg demuxer over a byte buffer (a custom AVIOContext: no temporary files), shared by the
// video and audio decoders. Internal to src/media.
#pragma once

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
}

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/status.h"

namespace ember::media {

// Owners of the packets and frames a decode loop reuses.
struct PacketDeleter {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct FrameDeleter {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
using PacketPtr = std::unique_ptr<AVPacket, PacketDeleter>;
using FramePtr = std::unique_ptr<AVFrame, FrameDeleter>;

// "the video" + ": " + FFmpeg's message for `err`.
std::string AvErrorText(int err);

class FfmpegInput {
 public:
  FfmpegInput() = default;
  ~FfmpegInput();
  FfmpegInput(const FfmpegInput&) = delete;
  FfmpegInput& operator=(const FfmpegInput&) = delete;

  // Opens and probes `bytes` (which must outlive this object); `what` names it in errors.
  Status Open(std::span<const uint8_t> bytes, const char* what);
  // Opens a decoder for stream `index` (single-threaded, deterministic).
  Status OpenDecoder(int index, const char* what);

  AVFormatContext* format() { return format_; }
  AVCodecContext* decoder() { return decoder_; }
  // Rewinds to the start of the buffer for a second pass (a fresh demuxer).
  Status Reopen(const char* what);

 private:
  static int Read(void* opaque, uint8_t* buf, int size);
  static int64_t Seek(void* opaque, int64_t offset, int whence);
  void Close();

  std::span<const uint8_t> bytes_;
  int64_t pos_ = 0;
  AVIOContext* io_ = nullptr;
  AVFormatContext* format_ = nullptr;
  AVCodecContext* decoder_ = nullptr;
};

}  // namespace ember::media
