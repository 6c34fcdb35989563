#include "media/media.h"

#include <xxhash.h>

#include <cstring>

#include <fmt/format.h>

namespace ember::media {

const char* MediaKindName(MediaKind kind) {
  switch (kind) {
    case MediaKind::kJpeg: return "JPEG";
    case MediaKind::kPng: return "PNG";
    case MediaKind::kWebp: return "WebP";
    case MediaKind::kGif: return "GIF";
    case MediaKind::kBmp: return "BMP";
    case MediaKind::kTiff: return "TIFF";
    case MediaKind::kWav: return "WAV";
    case MediaKind::kMp3: return "MP3";
    case MediaKind::kFlac: return "FLAC";
    case MediaKind::kOgg: return "Ogg";
    case MediaKind::kMp4: return "MP4/QuickTime";
    case MediaKind::kWebm: return "Matroska/WebM";
    case MediaKind::kAvi: return "AVI";
    case MediaKind::kUnknown: break;
  }
  return "unknown";
}

bool IsImageKind(MediaKind kind) {
  return kind == MediaKind::kJpeg || kind == MediaKind::kPng || kind == MediaKind::kWebp;
}

namespace {
bool StartsWith(std::span<const uint8_t> b, size_t offset, const char* magic, size_t n) {
  return b.size() >= offset + n && std::memcmp(b.data() + offset, magic, n) == 0;
}
}  // namespace

MediaKind SniffMediaKind(std::span<const uint8_t> b) {
  if (StartsWith(b, 0, "\xFF\xD8\xFF", 3)) return MediaKind::kJpeg;
  if (StartsWith(b, 0, "\x89PNG\r\n\x1A\n", 8)) return MediaKind::kPng;
  if (StartsWith(b, 0, "RIFF", 4) && StartsWith(b, 8, "WEBP", 4)) return MediaKind::kWebp;
  if (StartsWith(b, 0, "RIFF", 4) && StartsWith(b, 8, "WAVE", 4)) return MediaKind::kWav;
  if (StartsWith(b, 0, "RIFF", 4) && StartsWith(b, 8, "AVI ", 4)) return MediaKind::kAvi;
  if (StartsWith(b, 0, "GIF87a", 6) || StartsWith(b, 0, "GIF89a", 6)) return MediaKind::kGif;
  if (StartsWith(b, 0, "BM", 2)) return MediaKind::kBmp;
  if (StartsWith(b, 0, "II*\0", 4) || StartsWith(b, 0, "MM\0*", 4)) return MediaKind::kTiff;
  if (StartsWith(b, 0, "fLaC", 4)) return MediaKind::kFlac;
  if (StartsWith(b, 0, "OggS", 4)) return MediaKind::kOgg;
  if (StartsWith(b, 0, "ID3", 3)) return MediaKind::kMp3;
  if (b.size() >= 2 && b[0] == 0xFF && (b[1] & 0xE0) == 0xE0 && (b[1] & 0x06) != 0) return MediaKind::kMp3;
  if (StartsWith(b, 4, "ftyp", 4) || StartsWith(b, 4, "moov", 4) || StartsWith(b, 4, "mdat", 4)) {
    return MediaKind::kMp4;
  }
  if (StartsWith(b, 0, "\x1A\x45\xDF\xA3", 4)) return MediaKind::kWebm;
  return MediaKind::kUnknown;
}

ContentHash128 ContentHash(std::string_view key, std::span<const uint8_t> bytes) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  XXH3_128bits_update(state, key.data(), key.size());
  XXH3_128bits_update(state, bytes.data(), bytes.size());
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return {h.low64, h.high64};
}

Status CheckEncodedSize(std::span<const uint8_t> bytes, const MediaLimits& limits, const char* what) {
  if (bytes.empty()) return InvalidArgument(fmt::format("the {} is empty (0 bytes)", what));
  if (static_cast<int64_t>(bytes.size()) > limits.max_encoded_bytes) {
    return InvalidArgument(fmt::format("the {} is {} bytes, over the limit of {} bytes", what, bytes.size(),
                                       limits.max_encoded_bytes));
  }
  return Status::Ok();
}

}  // namespace ember::media
