// One phase's upstream instances (prefill or decode) and which one takes the next request: the
// fewest requests in flight, ties taken in turn (round robin), so that a slow instance gets
// fewer. An instance that refused a connection (or timed out connecting) is skipped for a short
// back-off rather than costing every request a failed connect; if every instance is backing
// off, a caller that must try anyway (decode) still gets the least loaded one.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace ember::router {

class Balancer {
 public:
  using Clock = std::chrono::steady_clock;

  Balancer(std::vector<std::string> urls, std::chrono::milliseconds backoff);
  // Before any use only (the router's setup moves its upstream lists into place).
  Balancer(Balancer&& other) noexcept
      : backoff_(other.backoff_), instances_(std::move(other.instances_)), next_(other.next_) {}

  // Holds one request on an instance; releases it when destroyed.
  class Lease {
   public:
    Lease() = default;
    Lease(Balancer* balancer, size_t index) : balancer_(balancer), index_(index) {}
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { Release(); }
    void Release();
    bool held() const { return balancer_ != nullptr; }
    size_t index() const { return index_; }

   private:
    Balancer* balancer_ = nullptr;
    size_t index_ = 0;
  };

  // The instance for the next request, skipping those in `exclude` (already tried) and those
  // backing off (unless `even_backing_off` and nothing else is left); nullopt when none.
  std::optional<Lease> Acquire(Clock::time_point now, bool even_backing_off, const std::vector<size_t>& exclude = {});

  // A failed connect starts the instance's back-off; another failure (an error answer, a broken
  // response) marks it failing without one; a good answer clears both. Each returns true when
  // the instance's failing state changed, so that it is logged once, not on every request.
  bool ReportConnectFailure(size_t index, Clock::time_point now);
  bool ReportFailure(size_t index);
  bool ReportSuccess(size_t index);

  size_t size() const { return instances_.size(); }
  const std::string& url(size_t index) const { return instances_[index].url; }
  size_t in_flight(size_t index) const;
  bool backing_off(size_t index, Clock::time_point now) const;

 private:
  struct Instance {
    std::string url;
    size_t in_flight = 0;
    bool failing = false;             // the last exchange failed
    Clock::time_point retry_after{};  // skipped until then (set by a failed connect)
  };
  void Release(size_t index);

  const std::chrono::milliseconds backoff_;
  mutable std::mutex mu_;
  std::vector<Instance> instances_;  // guarded by mu_ (the urls are fixed)
  size_t next_ = 0;                  // where the round robin among ties starts
};

}  // namespace ember::router
