// GGUF quantized GEMV (decode, m = 1) weight-streaming rate per format, dot variant and thread
// count, next to the STREAM triad on the same machine.
//
// Read the counters, not the times:
//   GgufStreamTriad/threads:T                 triad_B/s   best-of-10 triad over 3 x 512 MB arrays
//   GgufGemv/<type>/<isa>/k:4096/threads:T   weight_B/s  bytes of quantized weights per second
//                                             best_B/s    the same for the fastest call
//                                             of_triad    best_B/s / triad_B/s at T threads
//   GgufGemvInCache/<type>/<isa>/k:4096       best_B/s    1 MB matrix in L2, 1 thread: compute ceiling
// Each weight matrix is k = 4096 by n rows with n chosen for >= 576 MB of weights, more than
// twice the 260 MB L3, so every call streams the weights from DRAM. One matrix is resident at a
// time (the benchmarks are registered grouped by format). Quant bytes are random and the f16
// scales ordinary normal numbers, so no path takes a subnormal or NaN slow case.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtypes.h"
#include "core/thread_pool.h"
#include "formats/ggml_type.h"
#include "kernels/cpu/stream.h"
#include "quant/gguf_blocks.h"
#include "quant/gguf_dot.h"
#include "quant/gguf_matmul.h"
#include "bench_setup.h"

namespace ember::quant {
namespace {

constexpr int64_t kStreamBytesPerArray = int64_t{512} << 20;
constexpr int kStreamRepetitions = 10;
constexpr int64_t kK = 4096;
constexpr int64_t kMinWeightBytes = int64_t{576} << 20;
constexpr const char* kVariants[] = {"ref", "avx2", "avx512"};
constexpr int kThreadCounts[] = {1, 2};
constexpr GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                               GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K};

// Triad rate per thread count, filled by the triad benchmarks (registered, so run, first).
std::map<int, double>& TriadRates() {
  static std::map<int, double> rates;
  return rates;
}

uint64_t NextBits(uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return state;
}

// Sets every f16 scale field of the blocks to a value near 0.01 (the quant bytes stay random).
template <typename Block>
void SetScales(uint8_t* data, int64_t nb, uint64_t& state) {
  auto* blocks = reinterpret_cast<Block*>(data);
  for (int64_t i = 0; i < nb; ++i) {
    const uint16_t scale = static_cast<uint16_t>(0x2000 + (NextBits(state) >> 54));  // ~0.008-0.016
    if constexpr (requires { blocks[i].dmin; }) blocks[i].dmin = scale;
    if constexpr (requires { blocks[i].m; }) blocks[i].m = scale;
    blocks[i].d = scale;
  }
}

struct Matrix {
  GgmlType type;
  std::unique_ptr<uint8_t[]> data;
  QuantMatrix view;
};

// A k = kK matrix of `type` with at least `min_bytes` of weights. The pages are first touched
// by the pool threads, in the chunks GgufMatMul will read, for NUMA locality.
std::unique_ptr<Matrix> BuildMatrix(GgmlType type, int64_t min_bytes) {
  const GgmlTypeTraits traits = *GgmlTypeInfo(static_cast<uint32_t>(type));
  const int64_t row_bytes = *GgmlRowBytes(traits, kK);
  const int64_t n = (min_bytes / row_bytes + 63) / 64 * 64;
  auto m = std::make_unique<Matrix>();
  m->type = type;
  m->data = std::make_unique_for_overwrite<uint8_t[]>(static_cast<size_t>(n * row_bytes));
  uint8_t* data = m->data.get();
  ThreadPool::Global().ParallelFor(n, [&](int64_t begin, int64_t end) {
    uint64_t state = static_cast<uint64_t>(begin) * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t b = begin * row_bytes; b < end * row_bytes; b += 8) {
      const uint64_t bits = NextBits(state);
      std::memcpy(data + b, &bits, static_cast<size_t>(std::min<int64_t>(8, end * row_bytes - b)));
    }
    const int64_t nb = (end - begin) * row_bytes / traits.block_bytes;
    uint8_t* first = data + begin * row_bytes;
    switch (type) {
      case GgmlType::kQ4_0:
        SetScales<BlockQ4_0>(first, nb, state);
        break;
      case GgmlType::kQ4_1:
        SetScales<BlockQ4_1>(first, nb, state);
        break;
      case GgmlType::kQ5_0:
        SetScales<BlockQ5_0>(first, nb, state);
        break;
      case GgmlType::kQ8_0:
        SetScales<BlockQ8_0>(first, nb, state);
        break;
      case GgmlType::kQ4_K:
        SetScales<BlockQ4_K>(first, nb, state);
        break;
      case GgmlType::kQ6_K:
        SetScales<BlockQ6_K>(first, nb, state);
        break;
      default:
        break;
    }
  });
  m->view = QuantMatrix{type, data, n, kK, row_bytes};
  return m;
}

// The DRAM-sized matrix for `type`, built on first use; building another type frees the
// previous one.
const QuantMatrix& CachedMatrix(GgmlType type) {
  static std::unique_ptr<Matrix> current;
  if (current && current->type == type) return current->view;
  current.reset();
  current = BuildMatrix(type, kMinWeightBytes);
  return current->view;
}

// Runs GEMVs against `w` and sets the rate counters; `threads` selects the triad to compare with
// (0: none).
void RunGemv(benchmark::State& state, const QuantMatrix& w, int threads) {
  std::vector<float> x(static_cast<size_t>(kK));
  uint64_t seed = 5;
  for (float& v : x)
    v = static_cast<float>(static_cast<int64_t>(NextBits(seed) >> 40) - (1 << 23)) / (1 << 23);
  std::vector<float> y(static_cast<size_t>(w.rows));
  // Timed per iteration: the best one is the figure comparable with the triad (itself a best
  // of 10), and the most robust to other processes on a shared machine; the mean is kept too.
  double best_seconds = 0.0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    GgufMatMul(x.data(), 1, w, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    if (best_seconds == 0.0 || seconds.count() < best_seconds) best_seconds = seconds.count();
  }
  const double bytes = static_cast<double>(w.rows * w.row_bytes);
  state.counters["weight_B/s"] =
      benchmark::Counter(bytes * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  if (best_seconds > 0.0) state.counters["best_B/s"] = benchmark::Counter(bytes / best_seconds);
  const auto triad = TriadRates().find(threads);
  if (triad != TriadRates().end() && best_seconds > 0.0) {
    state.counters["of_triad"] = benchmark::Counter(bytes / best_seconds / triad->second);
  }
}

void BM_GgufGemv(benchmark::State& state, GgmlType type, std::string variant, int threads) {
  if (bench::SelectVariantAndThreads(state, variant, threads)) RunGemv(state, CachedMatrix(type), threads);
}

// The same on a 1 MB matrix that stays in L2 (2 MB per core here), one thread: the kernel's
// compute ceiling. Where it is well above the DRAM figure, the DRAM GEMV is memory bound.
void BM_GgufGemvInCache(benchmark::State& state, GgmlType type, std::string variant) {
  if (!bench::SelectVariantAndThreads(state, variant, 1)) return;
  const std::unique_ptr<Matrix> m = BuildMatrix(type, int64_t{1} << 20);
  RunGemv(state, m->view, 0);
}

// One iteration runs the whole best-of-N measurement; the result is the counter.
void BM_StreamTriad(benchmark::State& state, int threads) {
  double gbps = 0.0;
  for (auto _ : state)
    gbps = kernels::MeasureStreamTriadGBps(kStreamBytesPerArray, kStreamRepetitions, threads);
  TriadRates()[threads] = gbps * 1e9;
  state.counters["triad_B/s"] = benchmark::Counter(gbps * 1e9);
}

bool RegisterAll() {
  for (int threads : kThreadCounts) {
    benchmark::RegisterBenchmark(("GgufStreamTriad/threads:" + std::to_string(threads)).c_str(),
                                 BM_StreamTriad, threads)
        ->Iterations(1)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (GgmlType type : kTypes) {
    const std::string type_name(GgmlTypeInfo(static_cast<uint32_t>(type))->name);
    for (const char* variant : kVariants) {
      for (int threads : kThreadCounts) {
        const std::string name = "GgufGemv/" + type_name + "/" + variant + "/k:" + std::to_string(kK) +
                                 "/threads:" + std::to_string(threads);
        // The scalar reference takes seconds per call; a few calls are enough to show it.
        benchmark::RegisterBenchmark(name.c_str(), BM_GgufGemv, type, std::string(variant), threads)
            ->Iterations(std::string(variant) == "ref" ? 2 : 12)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  for (GgmlType type : kTypes) {
    const std::string type_name(GgmlTypeInfo(static_cast<uint32_t>(type))->name);
    for (const char* variant : kVariants) {
      benchmark::RegisterBenchmark(
          ("GgufGemvInCache/" + type_name + "/" + variant + "/k:" + std::to_string(kK)).c_str(),
          BM_GgufGemvInCache, type, std::string(variant))
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return true;
}

const bool kRegistered = RegisterAll();

}  // namespace
}  // namespace ember::quant
