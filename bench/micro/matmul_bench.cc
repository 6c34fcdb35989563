// Matmul micro benchmarks: decode GEMV against the STREAM triad (memory bandwidth), and prefill
// GEMM throughput, for each compiled variant and for 1 and 2 threads.
//
// Read the counters, not the times:
//   StreamTriad/threads:T    triad_B/s   best-of-10 STREAM triad over 3 x 512 MB arrays
//   Gemv*/<isa>/.../threads:T weight_B/s bytes of weights streamed per second (m = 1)
//   Prefill/<isa>/.../threads:T FLOP/s   2*m*n*k per second
// GEMV weight_B/s divided by triad_B/s at the same thread count is the fraction of achievable
// bandwidth the kernel reaches. Weight matrices are 128-512 MB; the ones above the 260 MB L3
// are the true DRAM numbers (8192 x 8192 bf16 = 128 MB can stay partly cache resident).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/dtypes.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/cpu/stream.h"
#include "kernels/matmul.h"
#include "bench_setup.h"

namespace ember::kernels {
namespace {

constexpr int64_t kStreamBytesPerArray = int64_t{512} << 20;
constexpr int kStreamRepetitions = 10;
constexpr const char* kVariants[] = {"generic", "avx2", "avx512"};
constexpr int kThreadCounts[] = {1, 2};

// Cheap deterministic values in [-1, 1): filling hundreds of MB with mt19937 would dominate the
// benchmark's start-up, and the values only need to be ordinary normal numbers.
float NextValue(uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<int64_t>(state >> 40) - (int64_t{1} << 23)) / (1 << 23);
}

std::vector<float> RandomF32(int64_t count, uint64_t seed) {
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values) v = NextValue(seed);
  return values;
}

// Weights by shape, filled once and shared by every variant and thread count.
template <typename T>
const std::vector<T>& CachedWeights(int64_t n, int64_t k) {
  static std::map<std::pair<int64_t, int64_t>, std::vector<T>> cache;
  auto [it, inserted] = cache.try_emplace({n, k});
  if (inserted) {
    it->second.resize(static_cast<size_t>(n * k));
    uint64_t seed = static_cast<uint64_t>(n * 31 + k);
    for (T& v : it->second) {
      if constexpr (sizeof(T) == 2) {
        v = F32ToBF16(NextValue(seed));
      } else {
        v = NextValue(seed);
      }
    }
  }
  return it->second;
}

template <typename T>
void BM_Gemv(benchmark::State& state, std::string variant, int64_t n, int64_t k, int threads) {
  if (!bench::SelectVariantAndThreads(state, variant, threads)) return;
  const std::vector<T>& w = CachedWeights<T>(n, k);
  const TensorView view{sizeof(T) == 2 ? DType::kBF16 : DType::kF32, Shape{n, k}, w.data()};
  const std::vector<float> x = RandomF32(k, 5);
  std::vector<float> y(static_cast<size_t>(n));
  for (auto _ : state) {
    MatMul(x.data(), 1, view, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(n * k * static_cast<int64_t>(sizeof(T)));
  state.counters["weight_B/s"] =
      benchmark::Counter(bytes * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_Prefill(benchmark::State& state, std::string variant, int64_t m, int64_t n, int64_t k, int threads) {
  if (!bench::SelectVariantAndThreads(state, variant, threads)) return;
  const std::vector<uint16_t>& w = CachedWeights<uint16_t>(n, k);
  const TensorView view{DType::kBF16, Shape{n, k}, w.data()};
  const std::vector<float> x = RandomF32(m * k, 6);
  std::vector<float> y(static_cast<size_t>(m * n));
  for (auto _ : state) {
    MatMul(x.data(), m, view, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  state.counters["FLOP/s"] =
      benchmark::Counter(flops * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// One iteration runs the whole best-of-N measurement; the result is the counter.
void BM_StreamTriad(benchmark::State& state, int threads) {
  double gbps = 0.0;
  for (auto _ : state) gbps = MeasureStreamTriadGBps(kStreamBytesPerArray, kStreamRepetitions, threads);
  state.counters["triad_B/s"] = benchmark::Counter(gbps * 1e9);
}

std::string Name(const char* kind, const std::string& variant, const std::string& shape, int threads) {
  return std::string(kind) + "/" + variant + "/" + shape + "/threads:" + std::to_string(threads);
}

bool RegisterAll() {
  for (int threads : kThreadCounts) {
    benchmark::RegisterBenchmark(("StreamTriad/threads:" + std::to_string(threads)).c_str(), BM_StreamTriad,
                                 threads)
        ->Iterations(1)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  struct GemvShape {
    int64_t n, k;
  };
  constexpr GemvShape kGemvShapes[] = {{32768, 4096}, {8192, 8192}, {65536, 4096}};
  for (const GemvShape& s : kGemvShapes) {
    const std::string shape = "n:" + std::to_string(s.n) + "/k:" + std::to_string(s.k);
    for (const char* variant : kVariants) {
      for (int threads : kThreadCounts) {
        benchmark::RegisterBenchmark(Name("GemvBF16", variant, shape, threads).c_str(), BM_Gemv<uint16_t>,
                                     std::string(variant), s.n, s.k, threads)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  for (const char* variant : kVariants) {
    for (int threads : kThreadCounts) {
      benchmark::RegisterBenchmark(Name("GemvF32", variant, "n:16384/k:4096", threads).c_str(),
                                   BM_Gemv<float>, std::string(variant), int64_t{16384}, int64_t{4096},
                                   threads)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (int64_t dim : {1024, 4096}) {
    for (int64_t m : {64, 128, 512}) {
      const std::string shape =
          "m:" + std::to_string(m) + "/n:" + std::to_string(dim) + "/k:" + std::to_string(dim);
      for (const char* variant : kVariants) {
        for (int threads : kThreadCounts) {
          benchmark::RegisterBenchmark(Name("Prefill", variant, shape, threads).c_str(), BM_Prefill,
                                       std::string(variant), m, dim, dim, threads)
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
  return true;
}

const bool kRegistered = RegisterAll();

}  // namespace
}  // namespace ember::kernels
