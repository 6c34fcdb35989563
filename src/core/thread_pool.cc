#include "core/thread_pool.h"

#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>

namespace ember {

int AvailableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace {
// Chunks per thread: enough that a thread slowed by another process hands work to the others,
// few enough that each chunk still streams a long run of weight rows.
constexpr int64_t kChunksPerThread = 4;
// The claim word's chunk fields are 16 bits wide.
constexpr int64_t kMaxChunks = 0xFFFF;
// How long an idle thread polls before sleeping: longer than the gap between the loops of one
// forward pass, short enough that an idle server does not burn its cores. EMBER_SPIN_US
// overrides it (0: sleep at once, for machines where other processes want the cores).
std::chrono::microseconds SpinTime() {
  static const std::chrono::microseconds spin = [] {
    const char* env = std::getenv("EMBER_SPIN_US");
    return std::chrono::microseconds(env != nullptr ? std::max(0, std::atoi(env)) : 200);
  }();
  return spin;
}

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

std::atomic<void (*)()> g_claim_hook{nullptr};

// The claim word: generation << 32 | chunk count << 16 | next chunk.
uint32_t GenerationOf(uint64_t claim) { return static_cast<uint32_t>(claim >> 32); }
uint32_t ChunkCountOf(uint64_t claim) { return static_cast<uint32_t>(claim >> 16) & 0xFFFF; }
uint32_t NextChunkOf(uint64_t claim) { return static_cast<uint32_t>(claim) & 0xFFFF; }
uint64_t ClaimWord(uint32_t generation, uint32_t chunks) {
  return static_cast<uint64_t>(generation) << 32 | static_cast<uint64_t>(chunks) << 16;
}

// Polls `ready` for up to SpinTime(); true once it holds.
template <typename Ready>
bool SpinUntil(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + SpinTime();
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      _mm_pause();
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
    // On a machine with idle cores this returns at once; on a crowded one it lets the process
    // that holds the core we are waiting for run.
    std::this_thread::yield();
  }
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(ResolveThreadCount(num_threads)) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

namespace {
thread_local int t_thread_index = 0;

// The caller of a ParallelFor is thread 0 of that pool while the loop runs, even when it is a
// worker of another pool.
class CallerIndex {
 public:
  CallerIndex() : saved_(t_thread_index) { t_thread_index = 0; }
  ~CallerIndex() { t_thread_index = saved_; }

 private:
  int saved_;
};
}  // namespace

int ThreadPool::ThreadIndex() { return t_thread_index; }

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_cv_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::ParallelFor(int64_t n, FunctionRef<void(int64_t, int64_t)> fn, int64_t min_chunk) {
  if (n <= 0) return;
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  const int64_t chunks =
      std::min({num_threads_ == 1 ? 1 : num_threads_ * kChunksPerThread, max_chunks, kMaxChunks});
  const CallerIndex caller_index;
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> caller(caller_mutex_);
  job_ = &fn;
  job_n_ = n;
  done_.store(0, std::memory_order_relaxed);
  if (auto hook = g_claim_hook.load(std::memory_order_relaxed)) hook();
  const uint32_t generation = GenerationOf(claim_.load(std::memory_order_relaxed)) + 1;
  // Publishes the job fields above with the word (release; seq_cst also orders it before the
  // load of sleeping_ below, against WaitForJob's increment before it sleeps).
  claim_.store(ClaimWord(generation, static_cast<uint32_t>(chunks)), std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst) > 0) {
    // Taking the mutex orders this publication against a worker about to sleep (no lost wake-up).
    { std::lock_guard<std::mutex> lock(mutex_); }
    wake_cv_.notify_all();
  }
  RunChunks(generation);
  // Acquire pairs with each chunk's release increment: their writes are visible on return.
  const auto all_done = [&] { return done_.load(std::memory_order_acquire) == chunks; };
  while (!SpinUntil(all_done)) std::this_thread::yield();
  job_ = nullptr;
}

void ThreadPool::RunChunks(uint32_t generation) {
  uint64_t claim = claim_.load(std::memory_order_acquire);
  while (true) {
    if (GenerationOf(claim) != generation) return;
    const uint32_t chunk = NextChunkOf(claim);
    const uint32_t chunks = ChunkCountOf(claim);
    if (chunk >= chunks) return;
    if (auto hook = g_claim_hook.load(std::memory_order_relaxed)) hook();
    // Succeeds only if the word is still exactly the one checked above: same job, same count,
    // chunk unclaimed. Acquire makes the job fields published with that word visible.
    if (!claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_acquire, std::memory_order_acquire)) {
      continue;
    }
    // Owning an unfinished chunk keeps the job alive until done_ counts it.
    const int64_t begin = job_n_ * chunk / chunks;
    const int64_t end = job_n_ * (chunk + 1) / chunks;
    (*job_)(begin, end);
    done_.fetch_add(1, std::memory_order_release);
    claim = claim_.load(std::memory_order_acquire);
  }
}

bool ThreadPool::WaitForJob(uint32_t seen_generation) {
  const auto new_job = [&] { return GenerationOf(claim_.load(std::memory_order_acquire)) != seen_generation; };
  if (SpinUntil(new_job)) return true;
  std::unique_lock<std::mutex> lock(mutex_);
  sleeping_.fetch_add(1, std::memory_order_seq_cst);
  wake_cv_.wait(lock, [&] { return stopping_ || new_job(); });
  sleeping_.fetch_sub(1, std::memory_order_relaxed);
  return !stopping_;
}

void ThreadPool::WorkerLoop(int index) {
  t_thread_index = index;
  uint32_t seen_generation = 0;
  while (WaitForJob(seen_generation)) {
    seen_generation = GenerationOf(claim_.load(std::memory_order_acquire));
    RunChunks(seen_generation);
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

void ThreadPool::SetClaimHookForTesting(void (*hook)()) { g_claim_hook.store(hook); }

}  // namespace ember
