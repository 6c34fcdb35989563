#include "kernels/cpu/peak_fma.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/cpu_features.h"
#include "core/isa.h"
#include "core/thread_pool.h"

namespace ember::kernels {

// Baseline x86-64 has no FMA: the portable loop is a multiply and an add per lane (GCC keeps
// them separate without -mfma), 4 lanes per SSE register, 8 independent chains.
double FmaLoopGeneric(int64_t iterations, int64_t* flops_per_iteration) {
  typedef float V4 __attribute__((vector_size(16)));
  constexpr int kAcc = 8;
  V4 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = V4{} + static_cast<float>(i);
  const V4 a = V4{} + 0.999999f;
  const V4 b = V4{} + 1e-6f;
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < kAcc; ++i) acc[i] = acc[i] * a + b;
  }
  *flops_per_iteration = int64_t{kAcc} * 4 * 2;
  float sum = 0;
  for (int i = 0; i < kAcc; ++i) sum += acc[i][0] + acc[i][1] + acc[i][2] + acc[i][3];
  return sum;
}

namespace {

using PeakLoop = double (*)(int64_t, int64_t*);

// Runs `loop` on `num_threads` plain threads at once, `repetitions` times; returns the best rate
// in 1e9 operations per second. Plain threads, one loop each: the pool's dynamic chunk claiming
// could run two loops on one thread back to back, which would measure half the peak.
double BestRateGops(PeakLoop loop, int64_t iterations, int repetitions, int num_threads) {
  EMBER_CHECK(iterations >= 1 && repetitions >= 1, "iterations {}, repetitions {}", iterations, repetitions);
  const int threads = num_threads > 0 ? num_threads : ThreadPool::Global().num_threads();
  int64_t ops_per_iteration = 0;
  std::atomic<double> sink{0};
  double best_seconds = std::numeric_limits<double>::infinity();
  for (int rep = 0; rep < repetitions; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        int64_t per = 0;
        sink.fetch_add(loop(iterations, &per));
        if (t == 0) ops_per_iteration = per;
      });
    }
    for (std::thread& w : workers) w.join();
    best_seconds = std::min(best_seconds, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  EMBER_CHECK(sink.load() > 0, "peak loop produced {}", sink.load());
  return static_cast<double>(ops_per_iteration) * static_cast<double>(iterations) * threads / best_seconds / 1e9;
}

}  // namespace

PeakFlops MeasurePeakF32Flops(int64_t iterations, int repetitions, int num_threads) {
  const CpuFeatures& cpu = HostCpuFeatures();
  PeakFlops result;
  PeakLoop loop = FmaLoopGeneric;
  result.isa = "generic";
  if (cpu.avx512f && cpu.HasAvx2Set()) {
    loop = FmaLoopAvx512;
    result.isa = "avx512";
  } else if (cpu.HasAvx2Set()) {
    loop = FmaLoopAvx2;
    result.isa = "avx2";
  }
  result.gflops = BestRateGops(loop, iterations, repetitions, num_threads);
  return result;
}

PeakInt8Ops MeasurePeakInt8Ops(int64_t iterations, int repetitions, int num_threads) {
  const CpuFeatures& cpu = HostCpuFeatures();
  PeakInt8Ops result;
  // What the loop needs; the quantized dots' AVX-512 variants need these and a few more.
  if (cpu.HasAvx2Set() && cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512vnni) {
    result.isa = "avx512-vnni";
    result.gops = BestRateGops(Int8DotLoopAvx512Vnni, iterations, repetitions, num_threads);
  } else if (cpu.HasAvx2Set()) {
    result.isa = "avx2";
    result.gops = BestRateGops(Int8DotLoopAvx2, iterations, repetitions, num_threads);
  } else {
    result.isa = "none";
  }
  return result;
}

PeakInt8Ops MeasurePeakAmxInt8Ops(int64_t iterations, int repetitions, int num_threads) {
  PeakInt8Ops result;
  result.isa = "none";
  if (!IsaSupported(Isa::kAmx)) return result;
  result.isa = "amx-int8";
  // A round is four 16-cycle products, ~16x an AVX-512 round: fewer rounds for the same run time.
  result.gops = BestRateGops(Int8DotLoopAmx, std::max<int64_t>(1, iterations / 16), repetitions, num_threads);
  return result;
}

}  // namespace ember::kernels
