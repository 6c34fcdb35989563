// Shared vocabulary of src/media: the limits every decoder checks before it allocates, what kind
// of medium a byte buffer holds (sniffed from magic bytes, never from a file name or a MIME type
// a client sent) and the content hash the encoder cache and prefix cache key on.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ember::media {

// What one request may make the decoders do. Every limit is checked as early as the information
// exists: encoded size first, then dimensions / duration from the header, before any pixel or
// sample buffer is allocated. A violation is an InvalidArgument naming the value and the limit.
struct MediaLimits {
  int64_t max_encoded_bytes = 64ll << 20;          // any one image, video or audio file
  int64_t max_image_pixels = 50'000'000;           // width * height of one image (PIL warns at 89M)
  int64_t max_image_side = 32'768;                 // either side of an image
  int64_t max_video_frame_pixels = 8'847'360;      // width * height of one video frame (4096x2160)
  int64_t max_video_frames = 36'000;               // frames in the video stream (counted, not trusted)
  double max_video_seconds = 1200.0;               // duration of a video
  double max_audio_seconds = 1200.0;               // duration of an audio stream (after decoding)
  int64_t max_decoded_samples = 1200ll * 48'000 * 2;  // decoded PCM samples, all channels counted
};

enum class MediaKind { kUnknown, kJpeg, kPng, kWebp, kGif, kBmp, kTiff, kWav, kMp3, kFlac, kOgg, kMp4, kWebm, kAvi };

const char* MediaKindName(MediaKind kind);
bool IsImageKind(MediaKind kind);  // JPEG, PNG, WebP (the ones DecodeImage accepts)

// The kind from the first bytes (magic numbers). kUnknown when nothing matches: the FFmpeg-based
// decoders still try their own probing then, so an exotic container is not refused here.
MediaKind SniffMediaKind(std::span<const uint8_t> bytes);

struct ContentHash128 {
  uint64_t lo = 0;
  uint64_t hi = 0;
  friend bool operator==(const ContentHash128&, const ContentHash128&) = default;
};

// 128-bit XXH3 (seed 0) of `key` followed by the RAW ENCODED BYTES. The raw bytes, not the decoded
// pixels, so that a cache lookup costs no decoding; the processed tensor is a pure function of
// (bytes, what they are decoded as, processor config), so `key` holds the latter two (the
// modality and ProcessorConfigKey in muse_processor_config.h). Two encodings of the same picture
// hash differently; that only costs a cache miss.
ContentHash128 ContentHash(std::string_view key, std::span<const uint8_t> bytes);

// Checks bytes.size() against limits.max_encoded_bytes; `what` names the input ("image").
Status CheckEncodedSize(std::span<const uint8_t> bytes, const MediaLimits& limits, const char* what);

}  // namespace ember::media
