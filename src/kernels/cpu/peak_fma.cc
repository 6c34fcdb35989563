#include "kernels/cpu/peak_fma.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <memory>

#include "core/check.h"
#include "core/cpu_features.h"
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

PeakFlops MeasurePeakF32Flops(int64_t iterations, int repetitions, int num_threads) {
  EMBER_CHECK(iterations >= 1 && repetitions >= 1, "iterations {}, repetitions {}", iterations, repetitions);
  const CpuFeatures& cpu = HostCpuFeatures();
  PeakFlops result;
  double (*loop)(int64_t, int64_t*) = FmaLoopGeneric;
  result.isa = "generic";
  if (cpu.avx512f && cpu.HasAvx2Set()) {
    loop = FmaLoopAvx512;
    result.isa = "avx512";
  } else if (cpu.HasAvx2Set()) {
    loop = FmaLoopAvx2;
    result.isa = "avx2";
  }
  std::unique_ptr<ThreadPool> own_pool;
  ThreadPool* pool = &ThreadPool::Global();
  if (num_threads > 0 && num_threads != pool->num_threads()) {
    own_pool = std::make_unique<ThreadPool>(num_threads);
    pool = own_pool.get();
  }
  const int threads = pool->num_threads();
  int64_t flops_per_iteration = 0;
  std::atomic<double> sink{0};
  double best_seconds = std::numeric_limits<double>::infinity();
  for (int rep = 0; rep < repetitions; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    pool->ParallelFor(threads, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        int64_t per = 0;
        const double value = loop(iterations, &per);
        double expected = sink.load();
        while (!sink.compare_exchange_weak(expected, expected + value)) {
        }
        if (t == 0) flops_per_iteration = per;
      }
    });
    best_seconds = std::min(best_seconds, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  EMBER_CHECK(sink.load() > 0, "peak loop produced {}", sink.load());
  result.gflops = static_cast<double>(flops_per_iteration) * static_cast<double>(iterations) * threads /
                  best_seconds / 1e9;
  return result;
}

}  // namespace ember::kernels
