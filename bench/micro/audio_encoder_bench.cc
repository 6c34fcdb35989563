// Muse Spark's audio encoder at the released sizes (patches 16, 6, 5, 4; hidden 256, 512, 1024,
// 2048; depths 2, 2, 2, 2; mlp_ratio 4; kernel 7; out 8192: ~118M parameters) on random bf16
// weights, encoding a 10 s clip in chunks of 64 tokens.
//
// Read the counters: audio_s/s is seconds of 24 kHz audio encoded per second of wall time (1 and
// 2 threads), FLOP/s the matmuls' 2*m*n*k per second.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "model/audio/muse_spark_audio.h"
#include "model/weight_source.h"

namespace ember {
namespace {

constexpr int64_t kSampleRate = 24000;
constexpr int64_t kClipSeconds = 10;

const MuseSparkAudioEncoder& Encoder() {
  static const std::unique_ptr<MuseSparkAudioEncoder> encoder = [] {
    auto loaded = MuseSparkAudioEncoder::Load(MuseSparkAudioConfig{}, std::make_unique<RandomWeightSource>(7));
    if (!loaded.ok()) std::abort();
    return std::move(*loaded);
  }();
  return *encoder;
}

// Matmul FLOPs per output token.
double FlopsPerToken(const MuseSparkAudioConfig& c) {
  double flops = 0, in = 1;
  for (int64_t i = 0; i < c.num_stages(); ++i) {
    const double rows = static_cast<double>(c.RowsPerToken(i)), h = c.hidden_sizes[i], f = c.IntermediateSize(i);
    flops += 2 * rows * (in * c.patch_sizes[i] * h + c.depths[i] * 2 * h * f);
    in = h;
  }
  return flops + 2 * in * c.out_hidden_size;
}

void BM_MuseSparkAudioEncoder(benchmark::State& state) {
  ThreadPool::SetGlobalThreads(static_cast<int>(state.range(0)));
  const MuseSparkAudioEncoder& encoder = Encoder();
  std::vector<float> clip(kClipSeconds * kSampleRate);
  for (size_t i = 0; i < clip.size(); ++i) clip[i] = 0.3f * std::sin(0.0576f * static_cast<float>(i));
  int64_t tokens = 0;
  for (auto _ : state) {
    auto out = encoder.Encode(clip.data(), static_cast<int64_t>(clip.size()));
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      return;
    }
    tokens = out->tokens;
    benchmark::DoNotOptimize(out->features.data());
  }
  state.counters["audio_s/s"] =
      benchmark::Counter(static_cast<double>(kClipSeconds), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["FLOP/s"] = benchmark::Counter(FlopsPerToken(encoder.config()) * static_cast<double>(tokens),
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.counters["params_M"] = static_cast<double>(encoder.config().NumParameters()) / 1e6;
}
BENCHMARK(BM_MuseSparkAudioEncoder)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

}  // namespace
}  // namespace ember
