// Muse Spark's vision encoder at the released sizes (50 layers, width 1536, 16 heads, MLP 8960,
// patch 14, temporal patch 2, 32x32 position table and windows, merge 2, adapter 6144 -> 4096 ->
// 4096, projection to 8192: ~1.9B parameters) on random bf16 weights, encoding one square image
// of the given side (448 px: a 32x32 patch grid, one window, 256 tokens).
//
// format: 0 the stored bf16 weights, 1 fp8, 2 nvfp4, 3 mxfp4 (converted at load, as `ember serve
// --quantization F --quantize-dense`; the 1176-wide patch embedding stays bf16).
//
// Read the counters: images/s (1 and 2 threads), FLOP/s the matmuls' 2*m*n*k plus the attention's
// QK^T and PV per second. One image at 448 px is ~4.1 TFLOP, so each run is a single iteration.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "model/vision/muse_spark_vision.h"
#include "model/weight_source.h"

namespace ember {
namespace {

// The tower as stored (format 0, bf16) or converted at load like `--quantization F
// --quantize-dense` (1 fp8, 2 nvfp4, 3 mxfp4); each built once, on first use.
const MuseSparkVisionEncoder& Encoder(int64_t format) {
  static std::unique_ptr<MuseSparkVisionEncoder> encoders[4];
  std::unique_ptr<MuseSparkVisionEncoder>& encoder = encoders[format];
  if (!encoder) {
    EncoderWeightOptions weights;
    if (format == 1) weights.quantization = quant::WeightFormat::kFp8E4m3;
    if (format == 2) weights.quantization = quant::WeightFormat::kNvfp4;
    if (format == 3) weights.quantization = quant::WeightFormat::kMxfp4;
    auto loaded = MuseSparkVisionEncoder::Load(MuseSparkVisionConfig{}, std::make_unique<RandomWeightSource>(7),
                                               "model.", weights);
    if (!loaded.ok()) std::abort();
    encoder = std::move(*loaded);
  }
  return *encoder;
}

// Matmul and attention FLOPs of one image of `patches` patches in one window (side <= 448 px).
double Flops(const MuseSparkVisionConfig& c, double patches) {
  const double d = c.hidden_size, f = c.intermediate_size, tokens = patches / (c.merge_size * c.merge_size);
  const double per_layer = 2 * patches * (4 * d * d + 2 * d * f) + 4 * patches * patches * d;
  return 2 * patches * d * c.PatchDim() + c.num_layers() * per_layer +
         2 * tokens * (c.out_hidden_size * c.projector_hidden_size + c.projector_hidden_size * c.projector_hidden_size +
                       c.projector_hidden_size * c.text_hidden_size);
}

void BM_MuseSparkVisionEncoder(benchmark::State& state) {
  ThreadPool::SetGlobalThreads(static_cast<int>(state.range(0)));
  const MuseSparkVisionEncoder& encoder = Encoder(state.range(2));
  const MuseSparkVisionConfig& c = encoder.config();
  const int64_t side = state.range(1) / c.patch_size;  // patches per side
  const VisionGrid grid = {1, side, side};
  std::vector<float> pixels(side * side * c.PatchDim());
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = std::sin(0.001f * static_cast<float>(i));
  for (auto _ : state) {
    auto out = encoder.Encode(pixels.data(), side * side, {grid});
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(out->features.data());
  }
  state.counters["images/s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["FLOP/s"] = benchmark::Counter(Flops(c, static_cast<double>(side * side)),
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.counters["params_M"] = static_cast<double>(c.NumParameters()) / 1e6;
}
BENCHMARK(BM_MuseSparkVisionEncoder)
    ->ArgNames({"threads", "px", "format"})
    ->Args({1, 224, 0})
    ->Args({2, 224, 0})
    ->Args({1, 448, 0})
    ->Args({2, 448, 0})
    ->Args({2, 224, 1})
    ->Args({2, 224, 2})
    ->Args({2, 224, 3})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

}  // namespace
}  // namespace ember
