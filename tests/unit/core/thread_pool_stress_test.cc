// Back-to-back ParallelFor calls whose chunk counts alternate, with a hook that stalls threads
// between reading the claim word and claiming from it. A pool whose job publication can be seen
// half-done lets a late thread of one job claim a chunk of the next: an index then runs twice
// or not at all, a write is missing when ParallelFor returns, or the caller spins forever. A
// watchdog turns the last into a failure instead of a hung test.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace ember {
namespace {

// Yields or sleeps a few microseconds at random: wide enough for another job to be published
// while a thread holds a stale claim word.
void StallSometimes() {
  thread_local std::minstd_rand rng(static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id())));
  const unsigned r = rng() % 8;
  if (r < 3) {
    std::this_thread::yield();
  } else if (r == 3) {
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 50));
  }
}

class ClaimHook {
 public:
  ClaimHook() { ThreadPool::SetClaimHookForTesting(&StallSometimes); }
  ~ClaimHook() { ThreadPool::SetClaimHookForTesting(nullptr); }
};

// Aborts the process with a message when `progress` stops moving for `limit`.
class Watchdog {
 public:
  Watchdog(const std::atomic<int64_t>& progress, std::chrono::seconds limit)
      : thread_([&progress, limit, this] {
          int64_t last = -1;
          auto since = std::chrono::steady_clock::now();
          while (!stop_.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            const int64_t now_value = progress.load();
            if (now_value != last) {
              last = now_value;
              since = std::chrono::steady_clock::now();
            } else if (std::chrono::steady_clock::now() - since > limit) {
              std::fprintf(stderr, "ThreadPool stress: no ParallelFor returned for %llds after iteration %lld\n",
                           static_cast<long long>(limit.count()), static_cast<long long>(last));
              std::abort();
            }
          }
        }) {}
  ~Watchdog() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

void StressAlternatingJobs(int threads, int iterations) {
  ThreadPool pool(threads);
  ClaimHook hook;
  std::atomic<int64_t> iteration{0};
  Watchdog watchdog(iteration, std::chrono::seconds(20));
  // Small (2 chunks), large (threads * 4 chunks), small, ...: a late thread of a small job sees
  // a claim index past its own chunk count but within the next job's.
  const int64_t sizes[] = {2, 997, 3, 64 * threads + 5};
  constexpr int64_t kMax = 2048;
  std::vector<std::atomic<int>> hits(kMax);
  std::vector<int64_t> stamps(kMax, -1);  // plain writes: must all be visible on return
  for (int it = 0; it < iterations; ++it) {
    const int64_t n = sizes[it % 4];
    for (int64_t i = 0; i < n; ++i) hits[i].store(0, std::memory_order_relaxed);
    pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        hits[i].fetch_add(1, std::memory_order_relaxed);
        stamps[i] = it;
      }
    });
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(hits[i].load(std::memory_order_relaxed), 1) << threads << " threads, iteration " << it << ", n " << n
                                                            << ", index " << i;
      ASSERT_EQ(stamps[i], it) << threads << " threads, iteration " << it << ", n " << n << ", index " << i;
    }
    iteration = it;
  }
}

TEST(ThreadPoolStressTest, AlternatingChunkCountsTwoThreads) { StressAlternatingJobs(2, 20000); }
TEST(ThreadPoolStressTest, AlternatingChunkCountsFourThreads) { StressAlternatingJobs(4, 10000); }
TEST(ThreadPoolStressTest, AlternatingChunkCountsEightThreads) { StressAlternatingJobs(8, 5000); }

// Two threads sharing one pool: their jobs are serialised, never interleaved.
TEST(ThreadPoolStressTest, ConcurrentCallersAreSerialised) {
  ThreadPool pool(3);
  ClaimHook hook;
  auto caller = [&pool](int seed) {
    std::vector<std::atomic<int>> hits(600);
    for (int it = 0; it < 2000; ++it) {
      const int64_t n = (it + seed) % 2 ? 7 : 600;
      for (int64_t i = 0; i < n; ++i) hits[i].store(0);
      pool.ParallelFor(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "caller " << seed << " iteration " << it;
    }
  };
  std::thread other(caller, 1);
  caller(0);
  other.join();
}

}  // namespace
}  // namespace ember
