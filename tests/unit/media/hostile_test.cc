// Hostile and broken inputs: every one is a clear InvalidArgument, never a crash, a hang or a
// huge allocation (the suite also runs under ASan/UBSan).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>

#include "media/audio_decode.h"
#include "media/image_decode.h"
#include "media/muse_processor_config.h"
#include "media/muse_video_processor.h"
#include "media_testdata.h"

namespace ember::media {
namespace {

using testing::ReadBytes;
using testing::TestdataPath;

void ExpectInvalid(const Status& s, const std::string& fragment) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << "message: " << s.message();
}

std::vector<uint8_t> Truncated(std::vector<uint8_t> b, double keep) {
  b.resize(static_cast<size_t>(b.size() * keep));
  return b;
}

TEST(HostileImages, EmptyAndUnknown) {
  ExpectInvalid(DecodeImage({}, MediaLimits{}).status(), "empty");
  const std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'};
  ExpectInvalid(DecodeImage(text, MediaLimits{}).status(), "not JPEG, PNG or WebP");
  const std::vector<uint8_t> gif = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0};
  ExpectInvalid(DecodeImage(gif, MediaLimits{}).status(), "GIF");
  ExpectInvalid(DecodeImage(ReadBytes("tone_24k_mono.wav"), MediaLimits{}).status(), "WAV");
}

TEST(HostileImages, OverTheEncodedSizeLimit) {
  MediaLimits limits;
  limits.max_encoded_bytes = 100;
  ExpectInvalid(DecodeImage(ReadBytes("rgb_odd.png"), limits).status(), "over the limit of 100 bytes");
}

TEST(HostileImages, TruncatedFilesOfEveryFormat) {
  for (const char* file : {"rgb_odd.png", "tall.jpg", "lossy.webp", "lossless_alpha.webp", "palette.png", "q444.jpg"}) {
    for (double keep : {0.02, 0.3, 0.7, 0.99}) {
      SCOPED_TRACE(std::string(file) + " kept " + std::to_string(keep));
      const auto r = DecodeImage(Truncated(ReadBytes(file), keep), MediaLimits{});
      EXPECT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    }
  }
}

// A "JPEG" that is a PNG (by name or MIME type) is decoded as what its bytes are.
TEST(HostileImages, MislabelledFormatIsSniffed) {
  auto r = DecodeImage(ReadBytes("rgb_odd.png"), MediaLimits{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->width, 97);
}

// Headers declaring enormous dimensions are refused before any pixel buffer exists.
TEST(HostileImages, DecompressionBombsAreRefusedFromTheHeader) {
  // PNG: rewrite IHDR to 60000 x 60000 (CRC left wrong: the size check comes first or the CRC
  // check fails; either way an error, never a 10 GB allocation).
  std::vector<uint8_t> png = ReadBytes("rgb_odd.png");
  const uint8_t big[8] = {0, 0, 0xEA, 0x60, 0, 0, 0xEA, 0x60};
  std::memcpy(png.data() + 16, big, 8);
  EXPECT_EQ(DecodeImage(png, MediaLimits{}).status().code(), StatusCode::kInvalidArgument);
  // With a tight pixel limit a real file fails on its header.
  MediaLimits tight;
  tight.max_image_pixels = 1000;
  ExpectInvalid(DecodeImage(ReadBytes("rgb_odd.png"), tight).status(), "over the limit of 1000 pixels");
  ExpectInvalid(DecodeImage(ReadBytes("tall.jpg"), tight).status(), "over the limit of 1000 pixels");
  ExpectInvalid(DecodeImage(ReadBytes("lossy.webp"), tight).status(), "over the limit of 1000 pixels");
  // JPEG SOF0 patched to 65000 x 65000.
  std::vector<uint8_t> jpg = ReadBytes("q444.jpg");
  for (size_t i = 2; i + 9 < jpg.size(); ++i) {
    if (jpg[i] == 0xFF && jpg[i + 1] == 0xC0) {
      jpg[i + 5] = 0xFD, jpg[i + 6] = 0xE8, jpg[i + 7] = 0xFD, jpg[i + 8] = 0xE8;
      break;
    }
  }
  ExpectInvalid(DecodeImage(jpg, MediaLimits{}).status(), "65000x65000");
}

TEST(HostileImages, CorruptBodies) {
  for (const char* file : {"rgb_odd.png", "tall.jpg", "lossy.webp"}) {
    std::vector<uint8_t> b = ReadBytes(file);
    for (size_t i = b.size() / 3; i < b.size() - 16; i += 7) b[i] ^= 0x5A;  // scramble past the header
    const auto r = DecodeImage(b, MediaLimits{});
    // libjpeg may recover from corrupt entropy data (a damaged picture, as PIL shows it); PNG's
    // CRCs and WebP's checks must reject it. Either way: no crash, and errors are InvalidArgument.
    if (!r.ok()) {
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << file;
      }
  }
}

TEST(HostileVideo, NotAVideoOrNoVideoStream) {
  const MuseProcessorConfig config;
  ExpectInvalid(ProcessVideo({}, MediaLimits{}, config).status(), "empty");
  const std::vector<uint8_t> junk(4096, 0x42);
  EXPECT_EQ(ProcessVideo(junk, MediaLimits{}, config).status().code(), StatusCode::kInvalidArgument);
  ExpectInvalid(ProcessVideo(ReadBytes("tone_22k.mp3"), MediaLimits{}, config).status(), "no video stream");
  ExpectInvalid(ProcessVideo(ReadBytes("tone_s16_44k_stereo.wav"), MediaLimits{}, config).status(), "no video stream");
}

TEST(HostileVideo, TruncatedAndOverLimits) {
  const MuseProcessorConfig config;
  for (const char* file : {"shapes.mp4", "shapes_vp9.webm", "shapes_audio.mp4"}) {
    for (double keep : {0.05, 0.5, 0.9}) {
      const auto r = ProcessVideo(Truncated(ReadBytes(file), keep), MediaLimits{}, config);
      if (!r.ok()) {
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << file << " " << r.status().ToString();
      }
    }
  }
  MediaLimits limits;
  limits.max_video_frames = 10;
  ExpectInvalid(ProcessVideo(ReadBytes("shapes.mp4"), limits, config).status(), "more than 10 frames");
  limits = MediaLimits{};
  limits.max_video_seconds = 1.0;
  ExpectInvalid(ProcessVideo(ReadBytes("shapes.mp4"), limits, config).status(), "over the limit of 1.0 s");
  limits = MediaLimits{};
  limits.max_video_frame_pixels = 1000;
  ExpectInvalid(ProcessVideo(ReadBytes("shapes.mp4"), limits, config).status(), "over the limit of 1000 pixels");
}

TEST(HostileAudio, EmptyJunkNoStreamTruncatedAndLimits) {
  ExpectInvalid(DecodeAudio({}, MediaLimits{}).status(), "empty");
  const std::vector<uint8_t> junk(4096, 0x42);
  EXPECT_EQ(DecodeAudio(junk, MediaLimits{}).status().code(), StatusCode::kInvalidArgument);
  ExpectInvalid(DecodeAudio(ReadBytes("shapes.mp4"), MediaLimits{}).status(), "no audio stream");
  // A WAV header with a data chunk of 0 samples.
  std::vector<uint8_t> wav = ReadBytes("tone_24k_mono.wav");
  for (size_t i = 12; i + 8 <= wav.size(); ++i) {
    if (std::memcmp(wav.data() + i, "data", 4) == 0) {
      std::memset(wav.data() + i + 4, 0, 4);
      wav.resize(i + 8);
      break;
    }
  }
  ExpectInvalid(DecodeAudio(wav, MediaLimits{}).status(), "no samples");
  for (const char* file : {"tone_22k.mp3", "tone_48k_stereo.flac", "tone_8k.ogg", "tone_s16_44k_stereo.wav"}) {
    for (double keep : {0.01, 0.5}) {
      const auto r = DecodeAudio(Truncated(ReadBytes(file), keep), MediaLimits{});
      if (!r.ok()) {
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << file << " " << r.status().ToString();
      }
    }
  }
  MediaLimits limits;
  limits.max_audio_seconds = 0.1;
  ExpectInvalid(DecodeAudio(ReadBytes("tone_s16_44k_stereo.wav"), limits).status(), "limit");
  limits = MediaLimits{};
  limits.max_decoded_samples = 1000;
  ExpectInvalid(DecodeAudio(ReadBytes("tone_48k_stereo.flac"), limits).status(), "1000 samples");
}

// A WAV of IEEE float samples (format 3), 32- or 64-bit, interleaved channels.
template <typename Sample>
std::vector<uint8_t> FloatWav(uint32_t rate, uint16_t channels, const std::vector<Sample>& samples) {
  const uint16_t bits = 8 * sizeof(Sample);
  const uint16_t block = channels * sizeof(Sample);
  const auto data_bytes = static_cast<uint32_t>(samples.size() * sizeof(Sample));
  std::vector<uint8_t> out;
  auto put = [&](const void* p, size_t n) {
    out.insert(out.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  };
  auto u32 = [&](uint32_t v) { put(&v, 4); };
  auto u16 = [&](uint16_t v) { put(&v, 2); };
  put("RIFF", 4);
  u32(36 + data_bytes);
  put("WAVEfmt ", 8);
  u32(16);
  u16(3);
  u16(channels);
  u32(rate);
  u32(rate * block);
  u16(block);
  u16(bits);
  put("data", 4);
  u32(data_bytes);
  put(samples.data(), data_bytes);
  return out;
}

TEST(HostileAudio, ClipsTooShortForTheResamplerAreRefused) {
  // libswresample emits nothing for 21 samples at 24,032 Hz (the fuzzer's find: 40 channels of a
  // 1.7 kB WAV); a clip at the model's rate needs no resampler and one sample is enough.
  ExpectInvalid(DecodeAudio(FloatWav<float>(24032, 1, std::vector<float>(21, 0.25f)), MediaLimits{}).status(),
                "too short to resample");
  ExpectInvalid(DecodeAudio(FloatWav<float>(44100, 2, std::vector<float>(2 * 5, 0.25f)), MediaLimits{}).status(),
                "too short to resample");
  const auto one = DecodeAudio(FloatWav<float>(24000, 1, {0.25f}), MediaLimits{});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->samples, std::vector<float>{0.25f});
  const auto enough = DecodeAudio(FloatWav<float>(24032, 1, std::vector<float>(100, 0.25f)), MediaLimits{});
  ASSERT_TRUE(enough.ok()) << enough.status().ToString();
  EXPECT_EQ(enough->samples.size(), 100u);  // 100 * 24000 / 24032 = 99.9
}

TEST(HostileAudio, NonFiniteSamplesAreRefused) {
  std::vector<float> nan_at_half(2000, 0.1f);
  nan_at_half[1200] = std::numeric_limits<float>::quiet_NaN();
  ExpectInvalid(DecodeAudio(FloatWav(24000, 1, nan_at_half), MediaLimits{}).status(), "at 0.050 s");
  ExpectInvalid(DecodeAudio(FloatWav(16000, 1, nan_at_half), MediaLimits{}).status(), "not a finite number");
  std::vector<double> too_large(1000, 0.1);
  too_large[10] = 1e300;  // finite as a double, infinite as float
  ExpectInvalid(DecodeAudio(FloatWav(24000, 1, too_large), MediaLimits{}).status(), "not a finite number");
  // Finite in every channel, infinite once summed for the mean.
  ExpectInvalid(DecodeAudio(FloatWav(24000, 2, std::vector<float>(2000, 3e38f)), MediaLimits{}).status(),
                "not a finite number");
  const auto loud = DecodeAudio(FloatWav(24000, 2, std::vector<float>(2000, 1e30f)), MediaLimits{});
  ASSERT_TRUE(loud.ok()) << loud.status().ToString();  // finite, however loud: the reference takes it
  EXPECT_EQ(loud->samples.front(), 1e30f);
}

TEST(ProcessorConfig, DefaultsFilesAndRejections) {
  auto c = LoadMuseProcessorConfig(testing::TestdataPath("no_such_dir"));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->max_image_tokens, 4096);
  EXPECT_EQ(c->max_video_frame_tokens, 144);
  EXPECT_EQ(c->samples_per_token, 1920);
  const std::string dir = ::testing::TempDir() + "/media_config";
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir + "/processor_config.json")
        << R"({"image_processor": {"max_image_tokens": 16, "patch_size": 16, "image_mean": [0.1, 0.2, 0.3]},
              "video_processor": {"fps": 1.0, "num_frames": 8, "frame_timestamp_format": "<{timestamp:.2f}>"},
              "feature_extractor": {"sampling_rate": 16000, "samples_per_token": 640}})";
  }
  c = LoadMuseProcessorConfig(dir);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->max_image_tokens, 16);
  EXPECT_EQ(c->patch_size, 16);
  EXPECT_FLOAT_EQ(c->image_mean[2], 0.3f);
  EXPECT_EQ(c->num_frames, 8);
  EXPECT_EQ(c->frame_timestamp_format, "<{timestamp:.2f}>");
  EXPECT_EQ(c->samples_per_token, 640);
  EXPECT_NE(ProcessorConfigKey(*c), ProcessorConfigKey(MuseProcessorConfig{}));
  std::ofstream(dir + "/processor_config.json") << R"({"image_processor": {"resample": 3}})";
  EXPECT_EQ(LoadMuseProcessorConfig(dir).status().code(), StatusCode::kUnimplemented);
  std::ofstream(dir + "/processor_config.json") << R"({"video_processor": {"frame_timestamp_format": "{x}"}})";
  EXPECT_EQ(LoadMuseProcessorConfig(dir).status().code(), StatusCode::kUnimplemented);
  std::ofstream(dir + "/processor_config.json") << R"({"image_processor": {"patch_size": -3}})";
  EXPECT_EQ(LoadMuseProcessorConfig(dir).status().code(), StatusCode::kInvalidArgument);
  std::ofstream(dir + "/processor_config.json") << "not json";
  EXPECT_EQ(LoadMuseProcessorConfig(dir).status().code(), StatusCode::kInvalidArgument);
}

// Containers that name other resources (HLS and other playlists, ffconcat, image sequences) would
// let a request make FFmpeg open files or URLs on the server: only self-contained audio/video
// containers are demuxed, and no demuxer may open anything beyond the request's bytes.
TEST(HostileVideos, PlaylistsNamingOtherFilesAreRefused) {
  const std::string local = TestdataPath("shapes.mp4");
  const std::vector<std::string> documents = {
      "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\nfile://" + local + "\n#EXT-X-ENDLIST\n",
      "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\n" + local + "\n#EXT-X-ENDLIST\n",
      "ffconcat version 1.0\nfile '" + local + "'\n",
      "#EXTM3U\n#EXTINF:2,\nhttp://169.254.169.254/latest/meta-data\n",
  };
  const MuseProcessorConfig config;
  for (const std::string& text : documents) {
    SCOPED_TRACE(text);
    const std::vector<uint8_t> bytes(text.begin(), text.end());
    const auto video = ProcessVideo(bytes, MediaLimits{}, config);
    EXPECT_FALSE(video.ok());
    EXPECT_EQ(video.status().code(), StatusCode::kInvalidArgument) << video.status().ToString();
    const auto audio = DecodeAudio(bytes, MediaLimits{});
    EXPECT_FALSE(audio.ok());
    EXPECT_EQ(audio.status().code(), StatusCode::kInvalidArgument) << audio.status().ToString();
  }
}

}  // namespace
}  // namespace ember::media
