#include "server/admission.h"

namespace ember::server {

Admission::Slot& Admission::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    count_ = other.count_;
    cost_ = other.cost_;
    other.count_ = nullptr;
  }
  return *this;
}

void Admission::Slot::Release() {
  if (count_ != nullptr) count_->fetch_sub(cost_);
  count_ = nullptr;
}

std::optional<Admission::Slot> Admission::TryAcquire(int64_t cost, int64_t limit) {
  int64_t current = count_.load();
  while (current + cost <= limit) {
    if (count_.compare_exchange_weak(current, current + cost)) return Slot(&count_, cost);
  }
  return std::nullopt;
}

}  // namespace ember::server
