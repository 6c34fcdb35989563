// Video (frame sampling, decode, preprocessing, placeholder text) against
// MuseGlimmerVideoProcessor + MuseSparkProcessor.replace_video_token, and audio against the
// ffmpeg CLI reference described in tests/unit/media/testdata/README.md.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "media/audio_decode.h"
#include "media/muse_video_processor.h"
#include "media/video_decode.h"
#include "media_testdata.h"

namespace ember::media {
namespace {

using testing::ExpectedPixels;
using testing::Manifest;
using testing::ReadBytes;
using testing::ReadFloats;

TEST(VideoFixtures, DecodeSamplesTheSameFramesAsFfmpegCli) {
  const MuseProcessorConfig config;
  for (const auto& c : Manifest()["videos"]) {
    const std::string file = c["file"];
    SCOPED_TRACE(file);
    auto video = DecodeVideoFrames(ReadBytes(file), MediaLimits{},
                                   [&](const VideoInfo& info) -> Expected<std::vector<int64_t>> {
                                     return SampleFrameIndices(info, config);
                                   });
    ASSERT_TRUE(video.ok()) << video.status().ToString();
    EXPECT_DOUBLE_EQ(video->info.fps, c["fps"].get<double>());
    EXPECT_EQ(video->info.total_num_frames, c["total_num_frames"].get<int64_t>());
    EXPECT_EQ(video->frame_indices, c["frames_indices"].get<std::vector<int64_t>>());
    const std::vector<uint8_t> want = ReadBytes(c["sampled_frames_rgb"]);
    std::vector<uint8_t> got;
    for (const RgbImage& f : video->frames) got.insert(got.end(), f.pixels.begin(), f.pixels.end());
    ASSERT_EQ(got.size(), want.size());
    int max_diff = 0;
    for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::abs(int(got[i]) - int(want[i])));
    EXPECT_EQ(max_diff, 0);
  }
}

TEST(VideoFixtures, ProcessorAndPlaceholderMatchTransformers) {
  const MuseProcessorConfig config;
  for (const auto& c : Manifest()["videos"]) {
    const std::string file = c["file"];
    SCOPED_TRACE(file);
    auto video = ProcessVideo(ReadBytes(file), MediaLimits{}, config);
    ASSERT_TRUE(video.ok()) << video.status().ToString();
    EXPECT_EQ(video->visual.grid_thw,
              (std::array<int64_t, 3>{c["grid_thw"][0], c["grid_thw"][1], c["grid_thw"][2]}));
    EXPECT_EQ(video->visual.num_patches, c["num_patches"].get<int64_t>());
    const std::vector<float> want = ExpectedPixels(c["pixel_values_u8"]);
    ASSERT_EQ(video->visual.pixel_values.size(), want.size());
    EXPECT_EQ(std::memcmp(want.data(), video->visual.pixel_values.data(), want.size() * 4), 0);
    const auto ts = c["timestamps"].get<std::vector<double>>();
    ASSERT_EQ(video->frame_timestamps.size(), ts.size());
    for (size_t i = 0; i < ts.size(); ++i) EXPECT_EQ(static_cast<double>(video->frame_timestamps[i]), ts[i]);
    auto text = RenderVideoPlaceholder(*video, config);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(*text, c["replacement"].get<std::string>());
  }
}

// Frame sampling against transformers for many (frame count, fps) pairs, computed in the fixture
// script with torch.linspace (whose float32 FMA arithmetic decides the truncated indices).
TEST(VideoSampling, MatchesTransformersSweep) {
  const MuseProcessorConfig config;
  int64_t n = 0;
  for (const auto& row : Manifest()["sample_frames"]) {
    VideoInfo info;
    info.total_num_frames = row[0];
    info.fps = row[1];
    ASSERT_EQ(SampleFrameIndices(info, config), row[2].get<std::vector<int64_t>>()) << row[0] << " " << row[1];
    ++n;
  }
  EXPECT_GT(n, 1000);
}

TEST(VideoPlaceholder, TimestampFormats) {
  EXPECT_EQ(*FormatTimestamp("Time: {timestamp:.1f}s", 0.25f), "Time: 0.2s");  // ties to even, as Python
  EXPECT_EQ(*FormatTimestamp("Time: {timestamp:.1f}s", 0.75f), "Time: 0.8s");
  EXPECT_EQ(*FormatTimestamp("{timestamp:.2f}", 1.5833334f), "1.58");
  EXPECT_EQ(*FormatTimestamp("{{t}}={timestamp}", 0.8f), "{t}=0.800000011920929");
  EXPECT_EQ(*FormatTimestamp("{timestamp}", 2.0f), "2.0");
  EXPECT_FALSE(FormatTimestamp("{timestamp:>8}", 1.0f).ok());
  EXPECT_FALSE(FormatTimestamp("{time}", 1.0f).ok());
  EXPECT_FALSE(FormatTimestamp("{timestamp", 1.0f).ok());
}

void ExpectWaveNear(const std::vector<float>& got, const std::vector<float>& want, float tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  float max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::abs(got[i] - want[i]));
  EXPECT_LE(max_diff, tol) << what;
  std::printf("[audio] %-26s %6zu samples max_abs_diff %.3g\n", what.c_str(), got.size(), max_diff);
}

TEST(AudioFixtures, DecodeMatchesFfmpegReference) {
  const MuseProcessorConfig config;
  for (const auto& c : Manifest()["audio"]) {
    const std::string file = c["file"];
    SCOPED_TRACE(file);
    auto audio = DecodeAudio(ReadBytes(file), MediaLimits{});
    ASSERT_TRUE(audio.ok()) << audio.status().ToString();
    EXPECT_EQ(audio->source_rate, c["source_rate"].get<int64_t>());
    EXPECT_EQ(audio->source_channels, c["source_channels"].get<int64_t>());
    ExpectWaveNear(audio->samples, ReadFloats(c["wave_f32"]), 1e-6f, file);
    EXPECT_EQ(NumAudioTokens(static_cast<int64_t>(audio->samples.size()), config), c["num_tokens"].get<int64_t>());
    EXPECT_EQ(static_cast<int64_t>(PadToWholeTokens(audio->samples, config).size()),
              c["padded_samples"].get<int64_t>());
  }
}

TEST(AudioFixtures, AudioOfAVideo) {
  for (const auto& c : Manifest()["videos"]) {
    if (!c.contains("audio")) continue;
    const std::string file = c["file"];
    auto audio = DecodeAudio(ReadBytes(file), MediaLimits{});
    ASSERT_TRUE(audio.ok()) << audio.status().ToString();
    ExpectWaveNear(audio->samples, ReadFloats(c["audio"]["wave_f32"]), 1e-6f, file);
  }
  EXPECT_EQ(RenderAudioPlaceholder(2), "<|soft_audio_start|><|audio|><|audio|><|soft_audio_end|>");
}

}  // namespace
}  // namespace ember::media
