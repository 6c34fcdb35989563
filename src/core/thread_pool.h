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
//
// How a job is published and claimed (thread_pool.cc) is explained beside claim_ below.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "core/function_ref.h"

namespace ember {

class ThreadPool {
 public:
  // num_threads <= 0 means one per available core (EMBER_NUM_THREADS overrides).
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // fn(begin, end) over contiguous chunks of [0, n), at least `min_chunk` indices each; every
  // write fn makes is visible to the caller when ParallelFor returns. Callers on different
  // threads take turns. Not reentrant: fn must not call ParallelFor on the same pool. Makes no
  // heap allocation (fn is referenced, not copied).
  void ParallelFor(int64_t n, FunctionRef<void(int64_t, int64_t)> fn, int64_t min_chunk = 1);

  // Inside a ParallelFor body: the running thread's index in [0, num_threads()) of the pool that
  // runs the body (0 for the caller), so that a kernel can give each thread its own slice of
  // scratch the caller sized once, instead of thread_local buffers that each worker grows the
  // first time it happens to get a chunk. 0 outside any ParallelFor.
  static int ThreadIndex();

  // The process-wide pool used by the kernels.
  static ThreadPool& Global();
  // Replaces the global pool's size (call before heavy work starts, e.g. from --threads).
  static void SetGlobalThreads(int num_threads);

  // Test hook, to widen the race windows in stress tests: ParallelFor calls it between writing
  // a job and publishing it, and every thread between reading the claim word and claiming from
  // it. Null by default (a relaxed load per job and per chunk).
  static void SetClaimHookForTesting(void (*hook)());

 private:
  void WorkerLoop(int index);
  // Claims and runs chunks of the job published as `generation` until none are left.
  void RunChunks(uint32_t generation);
  bool WaitForJob(uint32_t seen_generation);

  const int num_threads_;
  std::vector<std::thread> workers_;
  // One ParallelFor at a time: the job fields below belong to a single caller.
  std::mutex caller_mutex_;

  // The job. ParallelFor writes these, then publishes claim_ with release order; a thread reads
  // them only after a successful exchange on a claim word of that job's generation (acquire),
  // and ParallelFor writes them again only after done_ has counted every chunk of the job, so
  // no thread ever reads them while they change.
  const FunctionRef<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  // Everything a thread needs to claim a chunk, in one word: generation (32 bits) | chunk count
  // (16) | next unclaimed chunk (16). A thread claims by compare-exchange of the word it read
  // to that word plus one, so a claim succeeds only if generation, count and index are all
  // still those it checked: a thread that read the word of an old job can never claim a chunk
  // of a newer one. The generation is 32 bits; a thread would have to stall between its read
  // and its exchange through 2^32 jobs to be fooled.
  std::atomic<uint64_t> claim_{0};
  // Chunks of the current job that have finished. Only a successful claim of the current job
  // adds to it, and the job ends only when every chunk is counted, so the count can neither
  // overshoot nor be reached while a chunk still runs.
  std::atomic<uint32_t> done_{0};

  std::mutex mutex_;
  std::condition_variable wake_cv_;
  std::atomic<int> sleeping_{0};
  bool stopping_ = false;  // guarded by mutex_
};

// Number of cores this process may run on (sched_getaffinity), at least 1.
int AvailableCores();

}  // namespace ember
