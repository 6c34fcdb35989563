// Media preprocessing: decode + MuseGlimmer preprocess of a 1024x768 JPEG (the fixture
// tests/unit/media/testdata/bench_1024x768.jpg), and each step alone.
#include <benchmark/benchmark.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "media/image_decode.h"
#include "media/muse_image_processor.h"

namespace ember::media {
namespace {

std::vector<uint8_t> BenchJpeg() {
  std::ifstream in(std::string(EMBER_SOURCE_DIR) + "/tests/unit/media/testdata/bench_1024x768.jpg", std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void BM_DecodeJpeg1024x768(benchmark::State& state) {
  const std::vector<uint8_t> bytes = BenchJpeg();
  for (auto _ : state) benchmark::DoNotOptimize(DecodeImage(bytes, MediaLimits{}));
}
BENCHMARK(BM_DecodeJpeg1024x768)->Unit(benchmark::kMillisecond);

void BM_PreprocessImage1024x768(benchmark::State& state) {
  const RgbImage image = *DecodeImage(BenchJpeg(), MediaLimits{});
  const MuseProcessorConfig config;
  for (auto _ : state) benchmark::DoNotOptimize(ProcessImage(image, config));
}
BENCHMARK(BM_PreprocessImage1024x768)->Unit(benchmark::kMillisecond);

void BM_DecodeAndPreprocessJpeg1024x768(benchmark::State& state) {
  const std::vector<uint8_t> bytes = BenchJpeg();
  const MuseProcessorConfig config;
  for (auto _ : state) benchmark::DoNotOptimize(ProcessImage(*DecodeImage(bytes, MediaLimits{}), config));
}
BENCHMARK(BM_DecodeAndPreprocessJpeg1024x768)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ember::media
