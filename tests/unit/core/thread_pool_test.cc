#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <vector>

namespace ember {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 3, 7, 100, 1001}) {
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPoolTest, ChunksAreContiguousAndRespectMinimumSize) {
  ThreadPool pool(4);
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  pool.ParallelFor(
      40,
      [&](int64_t begin, int64_t end) {
        std::lock_guard<std::mutex> lock(mutex);
        chunks.push_back({begin, end});
      },
      /*min_chunk=*/16);
  // 40 indices with chunks of at least 16: at most 2 chunks.
  EXPECT_LE(chunks.size(), 2u);
  int64_t covered = 0;
  for (auto [b, e] : chunks) covered += e - b;
  EXPECT_EQ(covered, 40);
}

TEST(ThreadPoolTest, ZeroWorkAndManyRoundsDoNotHang) {
  ThreadPool pool(2);
  pool.ParallelFor(0, [](int64_t, int64_t) { FAIL(); });
  std::atomic<int64_t> total{0};
  for (int round = 0; round < 2000; ++round) {
    pool.ParallelFor(8, [&](int64_t b, int64_t e) { total += e - b; });
  }
  EXPECT_EQ(total.load(), 16000);
}

TEST(ThreadPoolTest, UsesMoreThanOneThreadWhenAsked) {
  ThreadPool pool(2);
  std::mutex mutex;
  std::set<std::thread::id> ids;
  std::atomic<int> entered{0};
  pool.ParallelFor(2, [&](int64_t, int64_t) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      ids.insert(std::this_thread::get_id());
    }
    // Chunks are claimed dynamically: hold the first one until the other thread has claimed
    // the second (bounded, so a broken pool fails instead of hanging).
    entered++;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (entered.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  });
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(pool.num_threads(), 2);
  EXPECT_GE(AvailableCores(), 1);
}

TEST(ThreadPoolTest, ChunkBoundariesDependOnlyOnSizeAndPool) {
  // Determinism: the same (n, min_chunk) on pools of one size always gives the same chunks,
  // however the threads happen to claim them.
  auto chunks_of = [](ThreadPool& pool, int64_t n, int64_t min_chunk) {
    std::mutex mutex;
    std::set<std::pair<int64_t, int64_t>> chunks;
    pool.ParallelFor(
        n,
        [&](int64_t b, int64_t e) {
          std::lock_guard<std::mutex> lock(mutex);
          chunks.insert({b, e});
        },
        min_chunk);
    return chunks;
  };
  ThreadPool a(3), b(3);
  for (int64_t n : {5, 64, 1000, 4097}) {
    const auto first = chunks_of(a, n, 4);
    for (int round = 0; round < 20; ++round) {
      ASSERT_EQ(chunks_of(round % 2 ? a : b, n, 4), first) << "n=" << n;
    }
  }
}

TEST(ThreadPoolTest, IdleWorkersSleepAndWakeForTheNextJob) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int round = 0; round < 3; ++round) {
    // Longer than the spin time, so the workers are asleep when the next loop starts.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    pool.ParallelFor(300, [&](int64_t b, int64_t e) { total += e - b; });
  }
  EXPECT_EQ(total.load(), 900);
}

}  // namespace
}  // namespace ember
