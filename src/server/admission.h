// Bounds the engine requests in progress (--max-waiting-requests). An API request costs what it
// adds to the engine, prompts x n (a completions call with 500 prompts is 500 requests, not one),
// and its handler takes that many slots at once before it does any work; the request's
// GenerationJob holds them until the job ends. Taking them is one compare-exchange, so a burst can
// never admit more than the limit; checking a count that is only raised later, at submission, let
// every request of a burst through.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

namespace ember::server {

class Admission {
 public:
  // Move-only; gives its slots back when destroyed. A default-constructed slot holds nothing.
  class Slot {
   public:
    Slot() = default;
    Slot(std::atomic<int64_t>* count, int64_t cost) : count_(count), cost_(cost) {}
    Slot(Slot&& other) noexcept : count_(other.count_), cost_(other.cost_) { other.count_ = nullptr; }
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { Release(); }

   private:
    void Release();
    std::atomic<int64_t>* count_ = nullptr;
    int64_t cost_ = 0;
  };

  // `cost` slots (at least 1) if that many more keep the count within `limit`; nullopt otherwise.
  std::optional<Slot> TryAcquire(int64_t cost, int64_t limit);
  int64_t in_progress() const { return count_.load(); }

 private:
  std::atomic<int64_t> count_{0};
};

}  // namespace ember::server
