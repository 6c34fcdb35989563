#include "router/balancer.h"

#include <algorithm>
#include <utility>

namespace ember::router {

Balancer::Balancer(std::vector<std::string> urls, std::chrono::milliseconds backoff) : backoff_(backoff) {
  for (auto& url : urls) instances_.push_back({std::move(url)});
}

Balancer::Lease& Balancer::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    balancer_ = std::exchange(other.balancer_, nullptr);
    index_ = other.index_;
  }
  return *this;
}

void Balancer::Lease::Release() {
  if (balancer_ != nullptr) std::exchange(balancer_, nullptr)->Release(index_);
}

std::optional<Balancer::Lease> Balancer::Acquire(Clock::time_point now, bool even_backing_off,
                                                 const std::vector<size_t>& exclude) {
  std::lock_guard lock(mu_);
  const size_t n = instances_.size();
  std::optional<size_t> best;
  bool best_backing_off = false;
  // Scanning from next_ makes the first of equally loaded instances rotate: round robin.
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (next_ + k) % n;
    if (std::find(exclude.begin(), exclude.end(), i) != exclude.end()) continue;
    const Instance& instance = instances_[i];
    const bool off = now < instance.retry_after;
    if (off && !even_backing_off) continue;
    // Any instance that is up beats one backing off; then the fewest in flight.
    if (!best || (best_backing_off && !off) ||
        (best_backing_off == off && instance.in_flight < instances_[*best].in_flight)) {
      best = i;
      best_backing_off = off;
    }
  }
  if (!best) return std::nullopt;
  ++instances_[*best].in_flight;
  next_ = (*best + 1) % n;
  return Lease(this, *best);
}

bool Balancer::ReportConnectFailure(size_t index, Clock::time_point now) {
  std::lock_guard lock(mu_);
  Instance& instance = instances_[index];
  instance.retry_after = now + backoff_;
  return !std::exchange(instance.failing, true);
}

bool Balancer::ReportFailure(size_t index) {
  std::lock_guard lock(mu_);
  return !std::exchange(instances_[index].failing, true);
}

bool Balancer::ReportSuccess(size_t index) {
  std::lock_guard lock(mu_);
  instances_[index].retry_after = {};
  return std::exchange(instances_[index].failing, false);
}

size_t Balancer::in_flight(size_t index) const {
  std::lock_guard lock(mu_);
  return instances_[index].in_flight;
}

bool Balancer::backing_off(size_t index, Clock::time_point now) const {
  std::lock_guard lock(mu_);
  return now < instances_[index].retry_after;
}

void Balancer::Release(size_t index) {
  std::lock_guard lock(mu_);
  --instances_[index].in_flight;
}

}  // namespace ember::router
