// A fixed pool of worker threads for data-parallel loops.
//
// ParallelFor splits [0, n) into contiguous chunks, one per thread (the calling thread works
// too), and returns when all are done. Static chunking keeps results independent of timing:
// each index is always computed by the same code path, so outputs are deterministic.
#pragma once

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
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk = 1);

  // The process-wide pool used by the kernels.
  static ThreadPool& Global();
  // Replaces the global pool's size (call before heavy work starts, e.g. from --threads).
  static void SetGlobalThreads(int num_threads);

 private:
  void WorkerLoop(int worker_index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_chunks_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
};

// Number of cores this process may run on (sched_getaffinity), at least 1.
int AvailableCores();

}  // namespace ember
