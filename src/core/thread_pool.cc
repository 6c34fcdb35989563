#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace ember {

int AvailableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace {
int ResolveThreadCount(int requested) {
  if (requested > 0) return requested;
  if (const char* env = std::getenv("EMBER_NUM_THREADS")) {
    const int value = std::atoi(env);
    if (value > 0) return value;
  }
  return AvailableCores();
}

std::unique_ptr<ThreadPool>& GlobalPoolStorage() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(ResolveThreadCount(num_threads)) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  start_cv_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk) {
  if (n <= 0) return;
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  const int chunks = static_cast<int>(std::min<int64_t>(num_threads_, max_chunks));
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    pending_ = chunks - 1;
    ++generation_;
  }
  start_cv_.notify_all();
  fn(0, n / chunks);  // chunk 0 runs on the calling thread
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::WorkerLoop(int worker_index) {
  uint64_t seen_generation = 0;
  while (true) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n;
    int chunks;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_cv_.wait(lock, [&] { return stopping_ || generation_ != seen_generation; });
      if (stopping_) return;
      seen_generation = generation_;
      job = job_;
      n = job_n_;
      chunks = job_chunks_;
    }
    if (worker_index < chunks) {
      const int64_t begin = n * worker_index / chunks;
      const int64_t end = n * (worker_index + 1) / chunks;
      (*job)(begin, end);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

ThreadPool& ThreadPool::Global() {
  auto& pool = GlobalPoolStorage();
  if (!pool) pool = std::make_unique<ThreadPool>(0);
  return *pool;
}

void ThreadPool::SetGlobalThreads(int num_threads) {
  GlobalPoolStorage() = std::make_unique<ThreadPool>(num_threads);
}

}  // namespace ember
