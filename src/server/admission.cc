#include "server/admission.h"

namespace ember::server {

Admission::Slot& Admission::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    count_ = other.count_;
    other.count_ = nullptr;
  }
  return *this;
}

void Admission::Slot::Release() {
  if (count_ != nullptr) count_->fetch_sub(1);
  count_ = nullptr;
}

std::optional<Admission::Slot> Admission::TryAcquire(int64_t limit) {
  int64_t current = count_.load();
  while (current < limit) {
    if (count_.compare_exchange_weak(current, current + 1)) return Slot(&count_);
  }
  return std::nullopt;
}

}  // namespace ember::server
