#include "kernels/cpu/stream.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>

#include "core/check.h"
#include "core/thread_pool.h"

namespace ember::kernels {
namespace {

// Chunks of at least 64 Ki doubles (512 KB): thread dispatch is negligible next to them.
constexpr int64_t kMinChunk = int64_t{1} << 16;

enum class StreamKernel { kCopy, kTriad };

// Best seconds of one pass of `kernel` over arrays of `bytes_per_array`.
double BestPassSeconds(StreamKernel kernel, int64_t bytes_per_array, int repetitions, int num_threads) {
  EMBER_CHECK(bytes_per_array >= static_cast<int64_t>(sizeof(double)), "array of {} bytes", bytes_per_array);
  EMBER_CHECK(repetitions >= 1, "repetitions {}", repetitions);
  std::unique_ptr<ThreadPool> own_pool;
  ThreadPool* pool = &ThreadPool::Global();
  if (num_threads > 0 && num_threads != pool->num_threads()) {
    own_pool = std::make_unique<ThreadPool>(num_threads);
    pool = own_pool.get();
  }

  const int64_t n = bytes_per_array / static_cast<int64_t>(sizeof(double));
  // Uninitialised allocations: the pages are first touched below, by the owning threads.
  auto a = std::make_unique_for_overwrite<double[]>(static_cast<size_t>(n));
  auto b = std::make_unique_for_overwrite<double[]>(static_cast<size_t>(n));
  auto c = std::make_unique_for_overwrite<double[]>(static_cast<size_t>(kernel == StreamKernel::kTriad ? n : 1));
  pool->ParallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          a[i] = 0.0;
          b[i] = 1.0;
          if (kernel == StreamKernel::kTriad) c[i] = 2.0;
        }
      },
      kMinChunk);

  const double scalar = 3.0;
  double best_seconds = std::numeric_limits<double>::infinity();
  for (int rep = 0; rep < repetitions; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    pool->ParallelFor(
        n,
        [&](int64_t begin, int64_t end) {
          double* __restrict__ dst = a.get();
          const double* __restrict__ src_b = b.get();
          const double* __restrict__ src_c = c.get();
          if (kernel == StreamKernel::kTriad) {
            for (int64_t i = begin; i < end; ++i) dst[i] = src_b[i] + scalar * src_c[i];
          } else {
            for (int64_t i = begin; i < end; ++i) dst[i] = src_b[i];
          }
        },
        kMinChunk);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    best_seconds = std::min(best_seconds, elapsed.count());
  }
  // Reading a result back keeps the stores observable: triad 1 + 3 * 2 = 7, copy 1.
  const double expected = kernel == StreamKernel::kTriad ? 7.0 : 1.0;
  EMBER_CHECK(a[0] == expected && a[n - 1] == expected, "stream produced {} / {}", a[0], a[n - 1]);
  return best_seconds;
}

}  // namespace

double MeasureStreamTriadGBps(int64_t bytes_per_array, int repetitions, int num_threads) {
  const double seconds = BestPassSeconds(StreamKernel::kTriad, bytes_per_array, repetitions, num_threads);
  const int64_t n = bytes_per_array / static_cast<int64_t>(sizeof(double));
  return 3.0 * static_cast<double>(n) * sizeof(double) / seconds / 1e9;
}

double MeasureStreamCopyGBps(int64_t bytes_per_array, int repetitions, int num_threads) {
  const double seconds = BestPassSeconds(StreamKernel::kCopy, bytes_per_array, repetitions, num_threads);
  const int64_t n = bytes_per_array / static_cast<int64_t>(sizeof(double));
  return 2.0 * static_cast<double>(n) * sizeof(double) / seconds / 1e9;
}

}  // namespace ember::kernels
