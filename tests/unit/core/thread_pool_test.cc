#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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
  pool.ParallelFor(2, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(mutex);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(pool.num_threads(), 2);
  EXPECT_GE(AvailableCores(), 1);
}

}  // namespace
}  // namespace ember
