// A fixed pool of worker threads for data-parallel loops.
//
// ParallelFor splits [0, n) into contiguous chunks and every thread (the caller too) claims
// chunks until none are left. The chunk boundaries depend only on n, min_chunk and the pool
// size, never on timing, so each index is always computed by the same code over the same
// range and results are deterministic; which thread runs a chunk is dynamic, so a core taken
// by another process slows one thread's share of the work instead of stalling the whole loop
// on a fixed slice (the machines we run on are shared and noisy).
//
// A decode step issues hundreds of short loops, so idle workers spin briefly before they sleep:
// a futex wake-up per loop costs as much as a small loop itself.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ember {

class ThreadPool {
 public:
  // num_threads <= 0 means one per available core (EMBER_NUM_THREADS overrides).
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // fn(begin, end) over contiguous chunks of [0, n), at least `min_chunk` indices each.
  // Not reentrant: fn must not call ParallelFor on the same pool.
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk = 1);

  // The process-wide pool used by the kernels.
  static ThreadPool& Global();
  // Replaces the global pool's size (call before heavy work starts, e.g. from --threads).
  static void SetGlobalThreads(int num_threads);

 private:
  void WorkerLoop();
  // Claims and runs chunks of the job published as `generation` until none are left.
  void RunChunks(uint32_t generation);
  bool WaitForJob(uint32_t seen_generation);

  const int num_threads_;
  std::vector<std::thread> workers_;

  // The job: written by ParallelFor before it publishes a new generation in claim_, and not
  // touched again until every chunk has been reported in done_.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  // Atomic because a worker reads it before its claim succeeds, when a newer job may be writing
  // it; such a claim then fails on the generation.
  std::atomic<uint32_t> job_chunks_{0};
  // (generation << 32) | next unclaimed chunk. A worker that wakes late finds another
  // generation in the high half and claims nothing from a job that is not its own.
  std::atomic<uint64_t> claim_{0};
  std::atomic<uint32_t> done_{0};

  std::mutex mutex_;
  std::condition_variable wake_cv_;
  std::atomic<int> sleeping_{0};
  bool stopping_ = false;  // guarded by mutex_
};

// Number of cores this process may run on (sched_getaffinity), at least 1.
int AvailableCores();

}  // namespace ember
