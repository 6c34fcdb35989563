// Block-scaled FP4 prefill GEMM rate: the row dots against the packed GEMM (block_scaled_packed.h),
// per format, m, a Muse-mid-like (n, k) and thread count, the matrix resident in cache.
//
//   BlockScaledGemm/<format>/<rows|packed>/m:M/n:N/k:K/threads:T   gop/s   2 m n k / best call / 1e9
//
// Shapes: 1536 x 1024 (an expert's gate+up at the mid config's hidden 1024 / 768 intermediate)
// and 1024 x 768 (its down projection). Best call, not mean: on a shared machine it is the one
// that had its cores to itself. Both paths run under the active level (avx512 or amx).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "quant/block_scaled.h"
#include "quant/block_scaled_packed.h"

namespace ember::quant {
namespace {

constexpr WeightFormat kFormats[] = {WeightFormat::kMxfp4, WeightFormat::kNvfp4};
constexpr int64_t kRows[] = {2, 4, 16, 64, 256};
constexpr int64_t kShapes[][2] = {{1536, 1024}, {1024, 768}};
constexpr int kThreadCounts[] = {1, 2};

void RunGemm(benchmark::State& state, WeightFormat format, bool packed, int64_t m, int64_t n, int64_t k, int threads) {
  ThreadPool::SetGlobalThreads(threads);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(n * k));
  for (float& v : w) v = normal(rng);
  std::vector<uint8_t> codes(n * CodesRowBytes(format, k)), scales(n * ScalesRowBytes(format, k));
  float global = 1.0f;
  if (format == WeightFormat::kMxfp4) {
    (void)QuantizeMxfp4(w.data(), n, k, codes.data(), scales.data());
  } else {
    global = Nvfp4GlobalScale(AbsMax(w.data(), n * k));
    (void)QuantizeNvfp4(w.data(), n, k, global, codes.data(), scales.data());
  }
  BlockScaledMatrix matrix = DenseBlockScaledMatrix(format, n, k, codes.data(), scales.data(), global);
  PackedBuffer copy = packed ? MaybePackBlockScaledMatrix(matrix) : nullptr;
  if (packed && copy == nullptr) {
    state.SkipWithError("no packed GEMM at this level");
    return;
  }
  matrix.packed = copy.get();
  std::vector<float> x(static_cast<size_t>(m * k));
  for (float& v : x) v = normal(rng);
  std::vector<float> y(static_cast<size_t>(m * n));
  double best = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    BlockScaledMatMul(x.data(), m, matrix, y.data());
    benchmark::DoNotOptimize(y.data());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (best == 0 || seconds < best) best = seconds;
  }
  state.counters["gop/s"] = 2.0 * static_cast<double>(m * n * k) / best / 1e9;
}

const bool kRegistered = [] {
  for (const WeightFormat format : kFormats) {
    for (const auto& shape : kShapes) {
      for (const int64_t m : kRows) {
        for (const int threads : kThreadCounts) {
          for (const bool packed : {false, true}) {
            benchmark::RegisterBenchmark(
                ("BlockScaledGemm/" + std::string(WeightFormatName(format)) + "/" + (packed ? "packed" : "rows") +
                 "/m:" + std::to_string(m) + "/n:" + std::to_string(shape[0]) + "/k:" + std::to_string(shape[1]) +
                 "/threads:" + std::to_string(threads))
                    .c_str(),
                [=](benchmark::State& s) { RunGemm(s, format, packed, m, shape[0], shape[1], threads); })
                ->MinTime(0.2)
                ->UseRealTime();
          }
        }
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace ember::quant
