// Images: decoding vs PIL (+ exif_transpose + transformers' convert_to_rgb) and preprocessing vs
// MuseGlimmerImageProcessor, fixture by fixture.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "media/image_decode.h"
#include "media/media.h"
#include "media/muse_image_processor.h"
#include "media/resize.h"
#include "media_testdata.h"

namespace ember::media {
namespace {

using testing::ExpectedPixels;
using testing::Manifest;
using testing::ReadBytes;

// Decoders whose output is pinned by the format itself (PNG, lossless WebP) must match PIL
// exactly. Lossy JPEG / WebP go through the same libjpeg-turbo ISLOW IDCT with fancy upsampling
// and libwebp's default YUV->RGB as PIL; the bound allows a different library build to round
// differently (max_abs_diff printed).
int MaxDecodeDiff(const std::string& file) {
  if (file.ends_with(".jpg") || file == "lossy.webp") return 2;
  return 0;
}

TEST(ImageFixtures, DecodeMatchesPil) {
  for (const auto& c : Manifest()["images"]) {
    const std::string file = c["file"];
    SCOPED_TRACE(file);
    auto image = DecodeImage(ReadBytes(file), MediaLimits{});
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    ASSERT_EQ(image->width, c["width"].get<int64_t>());
    ASSERT_EQ(image->height, c["height"].get<int64_t>());
    const std::vector<uint8_t> want = ReadBytes(c["decoded_rgb"]);
    ASSERT_EQ(image->pixels.size(), want.size());
    int max_diff = 0;
    int64_t num_diff = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const int d = std::abs(int(image->pixels[i]) - int(want[i]));
      max_diff = std::max(max_diff, d);
      num_diff += d != 0;
    }
    EXPECT_LE(max_diff, MaxDecodeDiff(file)) << num_diff << " of " << want.size() << " values differ";
    std::printf("[decode] %-22s %4lldx%-4lld max_abs_diff %d (%lld values differ)\n", file.c_str(),
                static_cast<long long>(image->width), static_cast<long long>(image->height), max_diff,
                static_cast<long long>(num_diff));
  }
}

// From transformers' own decoded RGB, the processor must reproduce pixel_values bit for bit.
TEST(ImageFixtures, ProcessorMatchesTransformersBitExact) {
  const MuseProcessorConfig config;
  for (const auto& c : Manifest()["images"]) {
    const std::string file = c["file"];
    SCOPED_TRACE(file);
    RgbImage image;
    image.width = c["width"];
    image.height = c["height"];
    image.pixels = ReadBytes(c["decoded_rgb"]);
    auto v = ProcessImage(image, config, c["max_image_tokens"].get<int64_t>());
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->grid_thw, (std::array<int64_t, 3>{c["grid_thw"][0], c["grid_thw"][1], c["grid_thw"][2]}));
    EXPECT_EQ(v->num_tokens, c["num_tokens"].get<int64_t>());
    EXPECT_EQ(v->num_patches, c["num_patches"].get<int64_t>());
    EXPECT_EQ(v->patch_dim, c["patch_dim"].get<int64_t>());
    const std::vector<float> want = ExpectedPixels(c["pixel_values_u8"]);
    ASSERT_EQ(v->pixel_values.size(), want.size());
    int64_t mismatches = 0;
    for (size_t i = 0; i < want.size(); ++i) mismatches += std::memcmp(&want[i], &v->pixel_values[i], 4) != 0;
    EXPECT_EQ(mismatches, 0) << "of " << want.size();
    EXPECT_EQ(NumImageTokens(image.height, image.width, [&] {
                MuseProcessorConfig k;
                k.max_image_tokens = c["max_image_tokens"];
                return k;
              }()),
              v->num_tokens);
  }
}

// The end-to-end path the server runs (bytes -> decode -> process) for the exactly-decodable
// formats equals transformers bit for bit.
TEST(ImageFixtures, BytesToPixelValuesEndToEnd) {
  const MuseProcessorConfig config;
  for (const auto& c : Manifest()["images"]) {
    const std::string file = c["file"];
    if (MaxDecodeDiff(file) != 0) continue;
    SCOPED_TRACE(file);
    auto image = DecodeImage(ReadBytes(file), MediaLimits{});
    ASSERT_TRUE(image.ok());
    auto v = ProcessImage(*image, config, c["max_image_tokens"].get<int64_t>());
    ASSERT_TRUE(v.ok());
    const std::vector<float> want = ExpectedPixels(c["pixel_values_u8"]);
    ASSERT_EQ(v->pixel_values.size(), want.size());
    EXPECT_EQ(std::memcmp(want.data(), v->pixel_values.data(), want.size() * 4), 0);
  }
}

TEST(SmartResize, MatchesPythonSweep) {
  int64_t n = 0;
  for (const auto& row : Manifest()["smart_resize"]) {
    const auto [h, w] = SmartResize(row[0], row[1], row[2], row[3]);
    ASSERT_EQ(h, row[4].get<int64_t>()) << row.dump();
    ASSERT_EQ(w, row[5].get<int64_t>()) << row.dump();
    ++n;
  }
  EXPECT_GT(n, 1000);
}

TEST(Resize, SameSizeIsIdentityAndWeightsAreNormalised) {
  std::vector<uint8_t> px(5 * 7 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 37);
  EXPECT_EQ(ResizeLanczosAntialias(px.data(), 5, 7, 3, 5, 7), px);
  for (auto [in, out] : {std::pair{100, 28}, {28, 100}, {1000, 3}, {3, 1000}, {1, 28}}) {
    const ResampleTaps t = LanczosAntialiasTaps(in, out);
    for (int64_t i = 0; i < out; ++i) {
      int64_t sum = 0;
      for (int k = 0; k < t.count[i]; ++k) sum += t.weights[i * t.max_taps + k];
      EXPECT_NEAR(static_cast<double>(sum) / (1 << t.precision), 1.0, 0.01) << in << "->" << out;
    }
  }
}

TEST(Placeholders, ImageStringAndHash) {
  ProcessedVisual v;
  v.num_tokens = 3;
  EXPECT_EQ(RenderImagePlaceholder(v), "<|image_start|><|patch|><|patch|><|patch|><|image_end|>");
  const std::vector<uint8_t> a = ReadBytes("rgb_odd.png");
  EXPECT_EQ(ContentHash("image", a), ContentHash("image", a));
  EXPECT_NE(ContentHash("image", a), ContentHash("image", ReadBytes("wide.png")));
  EXPECT_NE(ContentHash("image", a), ContentHash("audio", a));  // the key is part of the hash
  EXPECT_EQ(SniffMediaKind(a), MediaKind::kPng);
  EXPECT_EQ(SniffMediaKind(ReadBytes("tall.jpg")), MediaKind::kJpeg);
  EXPECT_EQ(SniffMediaKind(ReadBytes("lossy.webp")), MediaKind::kWebp);
  EXPECT_EQ(SniffMediaKind(ReadBytes("tone_s16_44k_stereo.wav")), MediaKind::kWav);
  EXPECT_EQ(SniffMediaKind(ReadBytes("tone_48k_stereo.flac")), MediaKind::kFlac);
  EXPECT_EQ(SniffMediaKind(ReadBytes("tone_8k.ogg")), MediaKind::kOgg);
  EXPECT_EQ(SniffMediaKind(ReadBytes("tone_22k.mp3")), MediaKind::kMp3);
  EXPECT_EQ(SniffMediaKind(ReadBytes("shapes.mp4")), MediaKind::kMp4);
  EXPECT_EQ(SniffMediaKind(ReadBytes("shapes_vp9.webm")), MediaKind::kWebm);
}

}  // namespace
}  // namespace ember::media
