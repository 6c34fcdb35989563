// The MoE expert matmuls of one batch-1 decode token on the mid-size Muse model (12 layers, 32
// experts of gate_up [1536, 768] and down [768, 768], top-4): per-expert ExpertWeights::Apply
// (the MoE before the grouped matmul) against ApplyGrouped, per expert storage, 1 and 2 threads.
// Weights are random bytes of the right format (timing only), 12 layers' worth so they stream
// from memory as in a real decode. Read `us_per_token` (also the wall time per iteration); on a
// shared machine compare the `min` aggregates of --benchmark_repetitions.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtypes.h"
#include "core/thread_pool.h"
#include "model/expert_weights.h"
#include "quant/block_scaled.h"

namespace ember {
namespace {

constexpr int64_t kLayers = 12, kExperts = 32, kTopK = 4, kHidden = 768, kInter = 768;

enum class Storage { kBf16, kNvfp4, kMxfp4, kFp8 };

uint8_t NextByte(uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<uint8_t>(state >> 56);
}

// An [E, rows, cols] stack in `storage` filled with random but ordinary values; NVFP4 gate_up is
// split into gate and up halves with their own global scales, as the Muse checkpoints have it.
ExpertWeights MakeStack(Storage storage, int64_t rows, int64_t cols, bool halves, uint64_t seed) {
  if (storage == Storage::kBf16) {
    auto data = std::make_shared<std::vector<uint16_t>>(kExperts * rows * cols);
    for (uint16_t& v : *data) v = F32ToBF16(static_cast<float>(NextByte(seed)) / 128.0f - 1.0f);
    static std::vector<std::shared_ptr<std::vector<uint16_t>>> keep;
    keep.push_back(data);
    return ExpertWeights::Dense({DType::kBF16, Shape({kExperts, rows, cols}), data->data()});
  }
  const quant::WeightFormat format = storage == Storage::kNvfp4   ? quant::WeightFormat::kNvfp4
                                     : storage == Storage::kMxfp4 ? quant::WeightFormat::kMxfp4
                                                                  : quant::WeightFormat::kFp8E4m3;
  const quant::Fp8ScaleKind kind = quant::Fp8ScaleKind::kBlock128;
  const int64_t code_bytes = quant::CodesRowBytes(format, cols) * rows;
  const int64_t scale_bytes = format == quant::WeightFormat::kFp8E4m3 ? 4 * quant::Fp8ScaleCount(kind, rows, cols)
                                                                      : quant::ScalesRowBytes(format, cols) * rows;
  auto bytes = std::make_shared<std::vector<uint8_t>>(kExperts * (code_bytes + scale_bytes));
  std::vector<std::vector<quant::BlockScaledMatrix>> parts(kExperts);
  for (int64_t e = 0; e < kExperts; ++e) {
    uint8_t* codes = bytes->data() + e * (code_bytes + scale_bytes);
    uint8_t* scales = codes + code_bytes;
    // FP8 codes with exponent 7 (values in [1, 2)): no subnormals to slow the FMAs down.
    for (int64_t i = 0; i < code_bytes; ++i) {
      codes[i] = format == quant::WeightFormat::kFp8E4m3 ? ((NextByte(seed) & 0x87) | 0x38) : NextByte(seed);
    }
    if (format == quant::WeightFormat::kFp8E4m3) {
      std::fill_n(reinterpret_cast<float*>(scales), scale_bytes / 4, 0.01f);
    } else {
      for (int64_t i = 0; i < scale_bytes; ++i) scales[i] = 120 + NextByte(seed) % 8;  // e8m0 / ue4m3 near 1
    }
    const quant::BlockScaledMatrix whole =
        quant::DenseBlockScaledMatrix(format, rows, cols, codes, scales, format == quant::WeightFormat::kNvfp4 ? 0.01f : 1.0f, kind);
    if (halves) {
      quant::BlockScaledMatrix gate = *quant::SliceRows(whole, 0, rows / 2);
      quant::BlockScaledMatrix up = *quant::SliceRows(whole, rows / 2, rows / 2);
      up.global_scale = 0.02f;
      parts[e] = {gate, up};
    } else {
      parts[e] = {whole};
    }
  }
  return ExpertWeights::BlockScaled(rows, cols, std::move(parts), bytes);
}

struct Layer {
  ExpertWeights gate_up, down;
};

const std::vector<Layer>& Layers(Storage storage) {
  static std::vector<Layer> cache[4];
  std::vector<Layer>& layers = cache[static_cast<int>(storage)];
  if (layers.empty()) {
    for (int64_t l = 0; l < kLayers; ++l) {
      const uint64_t seed = static_cast<uint64_t>(l * 7 + static_cast<int>(storage));
      layers.push_back({MakeStack(storage, 2 * kInter, kHidden, storage == Storage::kNvfp4, seed),
                        MakeStack(storage, kHidden, kInter, false, seed + 1000)});
    }
  }
  return layers;
}

void BM_DecodeExperts(benchmark::State& state, Storage storage, bool grouped, int threads) {
  ThreadPool::SetGlobalThreads(threads);
  const std::vector<Layer>& layers = Layers(storage);
  std::vector<float> x(kTopK * kHidden, 0.5f), gate_up(kTopK * 2 * kInter), act(kTopK * kInter, 0.25f),
      out(kTopK * kHidden);
  uint64_t route = 1;
  for (auto _ : state) {
    for (const Layer& layer : layers) {
      int64_t experts[kTopK];
      for (int64_t s = 0; s < kTopK; ++s) experts[s] = (NextByte(route) % (kExperts / kTopK)) * kTopK + s;
      std::sort(experts, experts + kTopK);
      if (grouped) {
        std::vector<ExpertWeights::Group> up_groups, down_groups;
        for (int64_t s = 0; s < kTopK; ++s) {
          up_groups.push_back({experts[s], x.data() + s * kHidden, 1, gate_up.data() + s * 2 * kInter});
          down_groups.push_back({experts[s], act.data() + s * kInter, 1, out.data() + s * kHidden});
        }
        layer.gate_up.ApplyGrouped(up_groups);
        layer.down.ApplyGrouped(down_groups);
      } else {
        for (int64_t s = 0; s < kTopK; ++s) {
          layer.gate_up.Apply(experts[s], x.data() + s * kHidden, 1, gate_up.data() + s * 2 * kInter);
          layer.down.Apply(experts[s], act.data() + s * kInter, 1, out.data() + s * kHidden);
        }
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["us_per_token"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 1e-6,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void RegisterAll() {
  const std::pair<Storage, const char*> storages[] = {
      {Storage::kBf16, "bf16"}, {Storage::kNvfp4, "nvfp4"}, {Storage::kMxfp4, "mxfp4"}, {Storage::kFp8, "fp8"}};
  for (auto [storage, name] : storages) {
    for (int threads : {1, 2}) {
      for (bool grouped : {false, true}) {
        benchmark::RegisterBenchmark(
            (std::string("DecodeExperts/") + name + (grouped ? "/grouped" : "/per_expert") + "/threads:" +
             std::to_string(threads))
                .c_str(),
            BM_DecodeExperts, storage, grouped, threads)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime()
            ->ComputeStatistics("min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); });
      }
    }
  }
}
const bool registered = (RegisterAll(), true);

}  // namespace
}  // namespace ember
