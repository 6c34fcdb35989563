// Bounds the API requests in progress (--max-waiting-requests). A handler takes a slot before it
// does any work, and the request's GenerationJob holds it until the job ends. Taking the slot is
// one compare-exchange, so a burst can never admit more than the limit; checking a count that is
// only raised later, at submission, let every request of a burst through.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

namespace ember::server {

class Admission {
 public:
  // Move-only; gives its slot back when destroyed. A default-constructed slot holds nothing.
  class Slot {
   public:
    Slot() = default;
    explicit Slot(std::atomic<int64_t>* count) : count_(count) {}
    Slot(Slot&& other) noexcept : count_(other.count_) { other.count_ = nullptr; }
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { Release(); }

   private:
    void Release();
    std::atomic<int64_t>* count_ = nullptr;
  };

  // A slot if fewer than `limit` requests are in progress; nullopt otherwise.
  std::optional<Slot> TryAcquire(int64_t limit);
  int64_t in_progress() const { return count_.load(); }

 private:
  std::atomic<int64_t> count_{0};
};

}  // namespace ember::server
